#include "chat/python_json.h"

#include <cstdio>

namespace ds41::chat {
namespace {

void DumpString(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);  // Python writes lowercase hex
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void Dump(const nlohmann::ordered_json& v, std::string& out) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        DumpString(key, out);
        out += ": ";
        Dump(item, out);
      }
      out += '}';
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        Dump(item, out);
      }
      out += ']';
      return;
    }
    case nlohmann::ordered_json::value_t::string:
      DumpString(v.get_ref<const std::string&>(), out);
      return;
    default:
      // null, booleans, integers and floats: nlohmann's shortest round-trip form agrees with
      // Python's repr for finite values (3.0, 1.5e-07, 1e+16).
      out += v.dump();
      return;
  }
}

}  // namespace

std::string PythonJsonDumps(const nlohmann::ordered_json& value) {
  std::string out;
  Dump(value, out);
  return out;
}

}  // namespace ds41::chat
