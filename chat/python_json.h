// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it.
//
// The release renders tool schemas and non-string tool arguments this way (", " and ": "
// separators, key order as given, non-ASCII kept), so the prompt must too to match its bytes.
// Use ordered_json so the client's key order survives parsing.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ds41::chat {

std::string PythonJsonDumps(const nlohmann::ordered_json& value);

}  // namespace ds41::chat
