// SseParser: splits a text/event-stream body into events' data as bytes arrive in arbitrary
// pieces (the `data:` lines of an event joined by "\n"; other fields and comments ignored).
// Not thread-safe: one parser per stream.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ds41 {

class SseParser {
 public:
  // Feeds bytes; on_event(data) runs for each event they complete, in order.
  void Feed(std::string_view bytes, const std::function<void(std::string_view data)>& on_event);

 private:
  void Line(std::string_view line, const std::function<void(std::string_view)>& on_event);
  std::string line_;  // the current line, not yet ended
  std::string data_;  // the current event's data
  bool has_data_ = false;
};

}  // namespace ds41
