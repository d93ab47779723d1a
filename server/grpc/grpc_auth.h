#ifndef PACELINE_SERVER_GRPC_GRPC_AUTH_H_
#define PACELINE_SERVER_GRPC_GRPC_AUTH_H_

// The API key of a gRPC call: its `authorization` metadata entry.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/support/string_ref.h"
#include "server/frontend/auth.h"

namespace paceline::server {

// TenantAuthenticator::Authenticate on the `authorization` entry of a
// call's client metadata (grpc::ServerContext::client_metadata(); gRPC
// lowercases the keys). UNAUTHENTICATED when the entry is missing or
// appears more than once.
absl::StatusOr<std::string> AuthenticateMetadata(
    const TenantAuthenticator& auth,
    const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_GRPC_AUTH_H_
