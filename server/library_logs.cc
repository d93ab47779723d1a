#include "server/library_logs.h"

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"

namespace paceline::server {

bool LogLimiter::Admit(absl::Time now, int64_t* dropped) {
  absl::MutexLock lock(&mu_);
  if (now - window_start_ >= window_) {
    window_start_ = now;
    lines_ = 0;
  }
  if (lines_ >= max_lines_) {
    ++dropped_;
    *dropped = 0;
    return false;
  }
  ++lines_;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

namespace {

LogLimiter& ProtobufLimiter() {
  static auto* limiter = new LogLimiter(kLibraryLogLines, kLibraryLogWindow);
  return *limiter;
}

LogLimiter& GrpcLimiter() {
  static auto* limiter = new LogLimiter(kLibraryLogLines, kLibraryLogWindow);
  return *limiter;
}

// Writes `message` as "pacelined: LIBRARY: message" when `limiter` admits
// it (or `always`), after a line for what it dropped before.
void Write(LogLimiter& limiter, const char* library, const std::string& message,
           bool always) {
  int64_t dropped = 0;
  if (!limiter.Admit(absl::Now(), &dropped) && !always) return;
  if (dropped > 0) {
    std::fprintf(stderr, "pacelined: %s: %lld messages dropped (rate limit)\n",
                 library, static_cast<long long>(dropped));
  }
  std::fprintf(stderr, "pacelined: %s: %s\n", library, message.c_str());
}

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  Write(ProtobufLimiter(), "libprotobuf",
        std::string(file) + ":" + std::to_string(line) + ": " + message,
        level == google::protobuf::LOGLEVEL_FATAL);
}

void GrpcLog(gpr_log_func_args* args) {
  Write(GrpcLimiter(), "grpc",
        std::string(gpr_log_severity_string(args->severity)) + " " +
            args->file + ":" + std::to_string(args->line) + ": " +
            args->message,
        false);
}

}  // namespace

void InstallLibraryLogLimits() {
  google::protobuf::SetLogHandler(&ProtobufLog);
  gpr_set_log_function(&GrpcLog);
}

}  // namespace paceline::server
