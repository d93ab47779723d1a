#include "tools/paceline/grpc_client.h"

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace paceline::tools {

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(
    const std::string& server, const std::string& tls_ca) {
  if (tls_ca.empty()) {
    return grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  }
  grpc::SslCredentialsOptions options;
  ASSIGN_OR_RETURN(options.pem_root_certs, ReadWholeFile(tls_ca, "--tls-ca"));
  return grpc::CreateChannel(server, grpc::SslCredentials(options));
}

absl::Status FromGrpc(const grpc::Status& s, const grpc::ClientContext& ctx) {
  // gRPC and Abseil number their status codes alike.
  const auto code = static_cast<absl::StatusCode>(s.error_code());
  std::string message =
      absl::StrCat(absl::StatusCodeToString(code), ": ", s.error_message());
  const auto& trailers = ctx.GetServerTrailingMetadata();
  if (auto it = trailers.find("retry-after-ms"); it != trailers.end()) {
    absl::StrAppend(&message, " (retry after ",
                    absl::string_view(it->second.data(), it->second.size()),
                    " ms)");
  }
  return absl::Status(code, message);
}

}  // namespace paceline::tools
