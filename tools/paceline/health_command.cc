// `paceline health --server ADDR`: asks the daemon's standard gRPC health
// service whether it serves (for Docker HEALTHCHECK, scripts, humans).
// Prints the status; exits 0 only for SERVING.

#include <chrono>
#include <iostream>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/grpc_client.h"

namespace paceline::tools {
namespace {

constexpr char kUsage[] =
    "usage: paceline health --server ADDR [--service NAME] [--timeout "
    "SECONDS]\n"
    "                       [--tls-ca FILE]\n"
    "\n"
    "Asks pacelined's grpc.health.v1.Health service for its status and\n"
    "prints it (SERVING, NOT_SERVING while it drains, ...). Exit code 0 only\n"
    "when SERVING, 1 otherwise (including when it cannot be reached). Needs\n"
    "no API key.\n"
    "\n"
    "  --server ADDR      HOST:PORT of the daemon\n"
    "  --service NAME     a service name (default \"\": the whole server)\n"
    "  --timeout SECONDS  deadline (default 5)\n"
    "  --tls-ca FILE      use TLS, trusting the PEM certificates in FILE\n";

constexpr FlagDef kFlags[] = {
    {"server", true}, {"service", true}, {"timeout", true}, {"tls-ca", true}};

absl::Status Check(const ParsedArgs& args, double timeout_s) {
  ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::Channel> channel,
      Connect(*args.Get("server"), args.Get("tls-ca").value_or("")));
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::duration<double>(timeout_s)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(args.Get("service").value_or(""));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status s = stub->Check(&ctx, request, &response);
  if (!s.ok()) return FromGrpc(s, ctx);
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                   response.status())
            << "\n";
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError("not serving");
  }
  return absl::OkStatus();
}

}  // namespace

int RunHealth(std::span<const std::string> argv) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, kFlags);
  if (!args.ok()) return UsageError("health", kUsage, args.status().message());
  if (args->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (!args->positional().empty()) {
    return UsageError(
        "health", kUsage,
        absl::StrCat("unexpected argument '", args->positional()[0], "'"));
  }
  if (!args->Has("server")) {
    return UsageError("health", kUsage, "--server is required");
  }
  absl::StatusOr<std::optional<double>> timeout_s =
      GetNumberFlag(*args, "timeout", kPositive);
  if (!timeout_s.ok()) {
    return UsageError("health", kUsage, timeout_s.status().message());
  }
  absl::Status status = Check(*args, timeout_s->value_or(5));
  if (status.ok()) return kExitOk;
  if (status.message() == "not serving") return kExitFailure;
  return Failure("health", status);
}

}  // namespace paceline::tools
