#include "server/http/router.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace paceline::server::http {
namespace {

// What `path` gives the pattern's {name}: "" for an exact match; nullopt
// when it does not match.
std::optional<std::string> Match(absl::string_view pattern,
                                 absl::string_view path) {
  const size_t brace = pattern.find('{');
  if (brace == absl::string_view::npos) {
    if (pattern == path) return std::string();
    return std::nullopt;
  }
  const absl::string_view prefix = pattern.substr(0, brace);
  if (!absl::StartsWith(path, prefix)) return std::nullopt;
  return std::string(path.substr(prefix.size()));
}

}  // namespace

RouteMatch MatchRoute(absl::Span<const RoutePattern> routes,
                      absl::string_view method, absl::string_view path) {
  RouteMatch out;
  for (size_t i = 0; i < routes.size(); ++i) {
    std::optional<std::string> param = Match(routes[i].path, path);
    if (!param.has_value()) continue;
    if (routes[i].method == method) {
      out.route = static_cast<int>(i);
      out.param = *std::move(param);
      out.allowed.clear();
      return out;
    }
    if (!absl::StrContains(out.allowed, routes[i].method)) {
      absl::StrAppend(&out.allowed, out.allowed.empty() ? "" : ", ",
                      routes[i].method);
    }
  }
  return out;
}

}  // namespace paceline::server::http
