#include "trace/sse_parser.h"

namespace ds41 {

void SseParser::Feed(std::string_view bytes, const std::function<void(std::string_view)>& on_event) {
  for (char c : bytes) {
    if (c == '\n') {
      if (!line_.empty() && line_.back() == '\r') line_.pop_back();
      Line(line_, on_event);
      line_.clear();
    } else {
      line_.push_back(c);
    }
  }
}

void SseParser::Line(std::string_view line, const std::function<void(std::string_view)>& on_event) {
  if (line.empty()) {  // a blank line ends the event
    if (has_data_) on_event(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.substr(0, 5) != "data:") return;  // event:, id:, retry: and ": comments"
  line.remove_prefix(5);
  if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(line);
  has_data_ = true;
}

}  // namespace ds41
