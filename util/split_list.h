// Comma-separated lists as flags give them ("a:1,b:2").
#pragma once

#include <string>
#include <vector>

namespace ds41 {

// "a:1,b:2" -> {"a:1", "b:2"} (empty parts dropped).
inline std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace ds41
