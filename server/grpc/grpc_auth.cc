#include "server/grpc/grpc_auth.h"

#include <iterator>

#include "absl/status/status.h"

namespace paceline::server {

absl::StatusOr<absl::string_view> AuthorizationMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata) {
  const auto [begin, end] =
      client_metadata.equal_range(grpc::string_ref("authorization"));
  if (begin == end) {
    return absl::UnauthenticatedError("missing authorization metadata");
  }
  if (std::next(begin) != end) {
    return absl::UnauthenticatedError(
        "more than one authorization metadata entry");
  }
  return absl::string_view(begin->second.data(), begin->second.size());
}

}  // namespace paceline::server
