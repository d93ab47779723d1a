#ifndef PACELINE_SERVER_HTTP_ROUTER_H_
#define PACELINE_SERVER_HTTP_ROUTER_H_

// HTTP routing by table: each route a method and a path pattern, matched in
// order. A pattern is an exact path ("/v1/models"), or a prefix ending in
// one "{name}" that matches the rest of the path ("/v1/models/{id}" matches
// "/v1/models/m", the parameter "m"). An API keeps its table beside its
// handlers (server/openai/openai_service.cc): adding an endpoint is a row
// there and its handler.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paceline::server::http {

struct RoutePattern {
  absl::string_view method;  // "GET", "POST"
  absl::string_view path;    // exact, or ending in "{name}"
};

struct RouteMatch {
  int route = -1;     // the matching route's index; -1 when none matches
  std::string param;  // what the route's {name} matched
  // route -1: the methods the path takes ("GET", "GET, POST"): 405 with
  // Allow; empty when no route has the path: 404.
  std::string allowed;
};

RouteMatch MatchRoute(absl::Span<const RoutePattern> routes,
                      absl::string_view method, absl::string_view path);

}  // namespace paceline::server::http

#endif  // PACELINE_SERVER_HTTP_ROUTER_H_
