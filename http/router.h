// Exact-path routing table: path -> method -> handler. Unknown path -> 404, known path with
// another method -> 405 with Allow; both through the responder's ErrorFormatter.
//
// Thread-compatible: Add before the server starts; Dispatch, being const, then runs on any number
// of io threads at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "http/http_responder.h"
#include "http/http_types.h"

namespace ds41 {

// Runs on an io thread: must not block. Copy what you need from the request before going async.
using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpResponder>)>;

class HttpRouter {
 public:
  // Replaces an earlier handler for the same (method, path). Method is case-sensitive ("GET").
  void Add(std::string method, std::string path, HttpHandler handler);
  void Dispatch(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder) const;

 private:
  std::map<std::string, std::map<std::string, HttpHandler>, std::less<>> routes_;  // path -> method
};

}  // namespace ds41
