#include "tests/testing/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"

extern char** environ;

namespace paceline::testing {
namespace {

constexpr char kListeningPrefix[] = "pacelined: listening on ";
constexpr char kHttpPrefix[] = "pacelined: http on ";
constexpr char kReadyLine[] = "pacelined: ready\n";

// The exit code of a waitpid status: the exit status, or 128 + signal.
int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string PacelinedPath() { return BinaryPath("server/pacelined"); }

DaemonProcess::DaemonProcess(std::string binary) : binary_(std::move(binary)) {}

DaemonProcess::~DaemonProcess() {
  if (started_) kill(-pgid_, SIGKILL);  // the group outlives a reaped leader
  if (pid_ > 0) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  // The pipe reaches end-of-file once the daemon is gone.
  if (reader_.joinable()) reader_.join();
  // A failed test shows why the daemon did what it did (a sanitizer's
  // report, a crash), even when it failed on an early ASSERT that did not
  // print the stderr itself.
  if (started_ && ::testing::Test::HasFailure()) {
    const std::string err = stderr_text();
    constexpr size_t kTail = 32 * 1024;
    std::cerr << "--- pacelined's stderr (the test failed"
              << (err.size() > kTail ? "; its last 32 KiB" : "") << "):\n"
              << (err.size() > kTail ? err.substr(err.size() - kTail) : err)
              << "--- end of pacelined's stderr\n";
  }
}

absl::Status DaemonProcess::Start(const std::vector<std::string>& args,
                                  absl::Duration ready_timeout) {
  if (started_) return absl::FailedPreconditionError("already started");
  if (access(binary_.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        binary_,
        " is not an executable (is pacelined built?): ", std::strerror(errno)));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  // dup2 clears close-on-exec on the copy; the originals close at exec.
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);

  std::vector<std::string> argv_strings = {binary_};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  const bool is_pacelined =
      std::filesystem::path(binary_).filename() == "pacelined";
  if (is_pacelined &&
      std::find(args.begin(), args.end(), "--http-listen") == args.end()) {
    argv_strings.push_back("--http-listen");
    argv_strings.push_back("127.0.0.1:0");
  }
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  // Its own process group, so that the destructor also ends anything it
  // started (which would otherwise hold the stderr pipe open).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);

  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, binary_.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return absl::InternalError(
        absl::StrCat("posix_spawn ", binary_, ": ", std::strerror(rc)));
  }
  started_ = true;
  pid_ = pid;
  pgid_ = pid;
  reader_ = std::thread([this, fd = fds[0]] { ReadStderr(fd); });

  bool ready = false;
  {
    absl::MutexLock lock(&mu_);
    auto ready_or_closed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stderr_closed_ || absl::StrContains(stderr_, kReadyLine);
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready_or_closed), ready_timeout);
    ready = absl::StrContains(stderr_, kReadyLine);
  }
  if (!ready) {
    absl::StatusOr<int> exited = WaitExit(absl::Seconds(1));
    if (exited.ok()) {
      return WithStderr(absl::InternalError(absl::StrCat(
          "pacelined exited with ", *exited, " before it was ready")));
    }
    kill(-pgid_, SIGKILL);
    (void)WaitExit(absl::Seconds(10));
    return WithStderr(absl::DeadlineExceededError(
        absl::StrCat("pacelined was not ready after ",
                     absl::FormatDuration(ready_timeout), "; killed it")));
  }
  return ParseAddress();
}

absl::Status DaemonProcess::ParseAddress() {
  const std::string err = stderr_text();
  const size_t at = err.find(kListeningPrefix);
  if (at == std::string::npos) {
    return WithStderr(absl::InternalError(
        "pacelined was ready without a 'listening on' line"));
  }
  const size_t begin = at + std::strlen(kListeningPrefix);
  const size_t end = err.find('\n', begin);
  std::string address = err.substr(begin, end - begin);
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return WithStderr(absl::InternalError(
        absl::StrCat("cannot parse the address '", address, "'")));
  }
  address_ = std::move(address);
  port_ = port;
  const size_t http = err.find(kHttpPrefix);
  if (http != std::string::npos) {
    const size_t line_end = err.find('\n', http);
    const std::string line = err.substr(http, line_end - http);
    // "pacelined: http on HOST:PORT" or "... HOST:PORT (TLS)".
    const std::string address_part = line.substr(
        std::strlen(kHttpPrefix),
        line.find(' ', std::strlen(kHttpPrefix)) - std::strlen(kHttpPrefix));
    const size_t http_colon = address_part.rfind(':');
    if (http_colon == std::string::npos ||
        !absl::SimpleAtoi(
            absl::string_view(address_part).substr(http_colon + 1),
            &http_port_)) {
      return WithStderr(absl::InternalError(
          absl::StrCat("cannot parse the HTTP address in '", line, "'")));
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> DaemonProcess::Channel() const {
  return grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
}

absl::Status DaemonProcess::Signal(int sig) {
  if (pid_ <= 0) {
    return absl::FailedPreconditionError("pacelined is not running");
  }
  if (kill(pid_, sig) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> DaemonProcess::WaitExit(absl::Duration timeout) {
  if (!started_) return absl::FailedPreconditionError("not started");
  const absl::Time deadline = absl::Now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_code_ = ExitCode(status);
      break;
    }
    if (r < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (absl::Now() >= deadline) {
      return WithStderr(absl::DeadlineExceededError(absl::StrCat(
          "pacelined still runs after ", absl::FormatDuration(timeout))));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return exit_code_;
}

absl::StatusOr<int> DaemonProcess::Drain(absl::Duration timeout) {
  if (absl::Status signalled = Signal(SIGTERM); !signalled.ok()) {
    return signalled;
  }
  return WaitExit(timeout);
}

std::string DaemonProcess::stderr_text() const {
  absl::MutexLock lock(&mu_);
  return stderr_;
}

bool DaemonProcess::WaitForStderr(absl::string_view text,
                                  absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto found_or_closed = [this, text]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stderr_closed_ || absl::StrContains(stderr_, text);
  };
  mu_.AwaitWithTimeout(absl::Condition(&found_or_closed), timeout);
  return absl::StrContains(stderr_, text);
}

void DaemonProcess::ReadStderr(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&mu_);
    stderr_.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  absl::MutexLock lock(&mu_);
  stderr_closed_ = true;
}

absl::Status DaemonProcess::WithStderr(absl::Status status) const {
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), "\n--- pacelined stderr ---\n",
                   stderr_text(), "--- end of stderr ---"));
}

void AddApiKey(grpc::ClientContext* ctx, absl::string_view api_key) {
  ctx->AddMetadata("authorization", absl::StrCat("Bearer ", api_key));
}

std::unique_ptr<grpc::ClientContext> MakeClientContext(
    absl::string_view api_key, absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  AddApiKey(ctx.get(), api_key);
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return ctx;
}

}  // namespace paceline::testing
