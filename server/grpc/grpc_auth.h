#ifndef PACELINE_SERVER_GRPC_GRPC_AUTH_H_
#define PACELINE_SERVER_GRPC_GRPC_AUTH_H_

// The API key of a gRPC call: its `authorization` metadata entry.

#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/string_ref.h"

namespace paceline::server {

// The value of the `authorization` entry of a call's client metadata
// (grpc::ServerContext::client_metadata(); gRPC lowercases the keys), for
// Frontend::Authenticate; it views `client_metadata`. UNAUTHENTICATED when
// the entry is missing or appears more than once.
absl::StatusOr<absl::string_view> AuthorizationMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_GRPC_AUTH_H_
