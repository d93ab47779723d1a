#ifndef PACELINE_TOOLS_PACELINE_GRPC_CLIENT_H_
#define PACELINE_TOOLS_PACELINE_GRPC_CLIENT_H_

// What the subcommands that talk to a running pacelined share: the channel
// (plaintext, or TLS trusting a PEM file) and gRPC errors as absl::Status.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace paceline::tools {

// A channel to `server` ("host:port"): insecure when `tls_ca` is empty,
// else TLS trusting the PEM certificates in that file (NotFound when it
// cannot be read).
absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(
    const std::string& server, const std::string& tls_ca);

// "UNAUTHENTICATED: unknown API key", plus the server's retry hint
// (" (retry after N ms)") when its trailers carry one.
absl::Status FromGrpc(const grpc::Status& s, const grpc::ClientContext& ctx);

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_GRPC_CLIENT_H_
