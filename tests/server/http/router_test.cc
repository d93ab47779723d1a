// MatchRoute: exact paths, a trailing {name}, the first match wins, and
// what a miss says (404: no route has the path; 405: the methods it takes).

#include "server/http/router.h"

#include <vector>

#include "gtest/gtest.h"

namespace paceline::server::http {
namespace {

const std::vector<RoutePattern> kRoutes = {
    {"GET", "/health"},
    {"GET", "/v1/models"},
    {"GET", "/v1/models/{id}"},
    {"POST", "/v1/completions"},
    {"POST", "/tokenize"},
    {"PUT", "/tokenize"},
};

TEST(MatchRouteTest, ExactPathsMatchTheirMethodOnly) {
  RouteMatch m = MatchRoute(kRoutes, "GET", "/v1/models");
  EXPECT_EQ(m.route, 1);
  EXPECT_EQ(m.param, "");
  EXPECT_EQ(m.allowed, "");
  EXPECT_EQ(MatchRoute(kRoutes, "POST", "/v1/completions").route, 3);
  // A prefix of an exact path, or a longer one, is another path.
  EXPECT_EQ(MatchRoute(kRoutes, "GET", "/heal").route, -1);
  EXPECT_EQ(MatchRoute(kRoutes, "GET", "/health/x").route, -1);
}

TEST(MatchRouteTest, TheTrailingParameterTakesTheRestOfThePath) {
  RouteMatch m = MatchRoute(kRoutes, "GET", "/v1/models/llama-3");
  EXPECT_EQ(m.route, 2);
  EXPECT_EQ(m.param, "llama-3");
  m = MatchRoute(kRoutes, "GET", "/v1/models/org/name");
  EXPECT_EQ(m.route, 2);
  EXPECT_EQ(m.param, "org/name");
  m = MatchRoute(kRoutes, "GET", "/v1/models/");
  EXPECT_EQ(m.route, 2);
  EXPECT_EQ(m.param, "");
}

TEST(MatchRouteTest, AnUnknownPathIsNotFound) {
  RouteMatch m = MatchRoute(kRoutes, "GET", "/v2/models");
  EXPECT_EQ(m.route, -1);
  EXPECT_EQ(m.allowed, "");
}

TEST(MatchRouteTest, AKnownPathWithAnotherMethodListsTheAllowedOnes) {
  RouteMatch m = MatchRoute(kRoutes, "DELETE", "/tokenize");
  EXPECT_EQ(m.route, -1);
  EXPECT_EQ(m.allowed, "POST, PUT");
  m = MatchRoute(kRoutes, "POST", "/v1/models/x");
  EXPECT_EQ(m.route, -1);
  EXPECT_EQ(m.allowed, "GET");
  // Methods are case-sensitive (RFC 9110 §9.1).
  EXPECT_EQ(MatchRoute(kRoutes, "get", "/health").allowed, "GET");
}

}  // namespace
}  // namespace paceline::server::http
