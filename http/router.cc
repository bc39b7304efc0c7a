#include "http/router.h"

namespace ds41 {

void HttpRouter::Add(std::string method, std::string path, HttpHandler handler) {
  routes_[std::move(path)][std::move(method)] = std::move(handler);
}

void HttpRouter::Dispatch(const HttpRequest& request, const std::shared_ptr<HttpResponder>& responder) const {
  auto path_it = routes_.find(request.path);
  if (path_it == routes_.end()) {
    responder->SendError(404, "Unknown path: " + request.path, "invalid_request_error", "not_found");
    return;
  }
  auto method_it = path_it->second.find(request.method);
  if (method_it == path_it->second.end()) {
    std::string allow;
    for (const auto& [method, unused] : path_it->second) {
      if (!allow.empty()) allow += ", ";
      allow += method;
    }
    responder->SendError(405, "Method " + request.method + " not allowed for " + request.path,
                         "invalid_request_error", "method_not_allowed", HttpHeaders{{"Allow", allow}});
    return;
  }
  method_it->second(request, responder);
}

}  // namespace ds41
