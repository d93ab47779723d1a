#ifndef PACELINE_TESTS_TESTING_DAEMON_PROCESS_H_
#define PACELINE_TESTS_TESTING_DAEMON_PROCESS_H_

// The real pacelined as a child process, for integration tests: started
// with a command line, ready once it says so, reachable at the port it
// bound, signalled and reaped by the test.
//
//   DaemonProcess daemon;
//   ASSERT_OK(daemon.Start({"--model", "dummy:tiny", "--listen",
//                           "127.0.0.1:0", "--tenant", "a:KEY",
//                           "--allow-root"}));
//   auto stub = paceline::v1::Paceline::NewStub(daemon.Channel());
//   auto ctx = MakeClientContext("KEY");
//   ...
//   EXPECT_EQ(daemon.Drain().value_or(-1), 0);  // SIGTERM, wait, exit code

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace paceline::testing {

// The build's daemon: server/pacelined in the build folder.
std::string PacelinedPath();

// Owns one pacelined process. Its stderr goes to a pipe that a background
// thread drains into memory (so the daemon never blocks on it); stdin is
// /dev/null, stdout is the test's, and it leads a process group of its own. Not
// thread-safe, except stderr_text() and WaitForStderr(), which any thread may
// call.
class DaemonProcess {
 public:
  explicit DaemonProcess(std::string binary = PacelinedPath());
  // Kills the daemon's process group (SIGKILL: the daemon, if it still
  // runs, and anything it started), reaps it, and joins the reader thread.
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Spawns `binary args...` and waits until its stderr has a line
  // "pacelined: ready". The address comes from the line before it,
  // "pacelined: listening on HOST:PORT". For a binary named pacelined,
  // unless `args` has --http-listen, "--http-listen 127.0.0.1:0" is added
  // (tests run side by side; the default port 8000 would collide); the HTTP
  // port comes from the line "pacelined: http on HOST:PORT" when the daemon
  // prints one. Errors (each with the daemon's stderr so far):
  // FailedPrecondition when already started or when the binary is missing,
  // Internal when the daemon exits or closes stderr before it is ready,
  // DeadlineExceeded after `ready_timeout` (the daemon is then killed). Start
  // only once per object.
  absl::Status Start(const std::vector<std::string>& args,
                     absl::Duration ready_timeout = absl::Seconds(60));

  // "HOST:PORT" as the daemon printed it; empty before a successful Start.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // The OpenAI HTTP API's port; 0 when it is off.
  int http_port() const { return http_port_; }
  // The child's pid while it runs (not yet reaped); -1 otherwise.
  pid_t pid() const { return pid_; }

  // An insecure channel to address().
  std::shared_ptr<grpc::Channel> Channel() const;

  // Sends `sig` to the daemon. FailedPrecondition once it has been reaped.
  absl::Status Signal(int sig);

  // Waits for the daemon to exit and reaps it: its exit status, or 128 +
  // the signal that ended it. DeadlineExceeded if it still runs after
  // `timeout` (it is left running). Returns the same value when called
  // again after the daemon was reaped.
  absl::StatusOr<int> WaitExit(absl::Duration timeout);

  // Drains the daemon as an operator stops it: Signal(SIGTERM), then
  // WaitExit(timeout); its exit code (0 after a clean drain). The errors of
  // Signal (FailedPrecondition once reaped) and of WaitExit
  // (DeadlineExceeded, with the stderr so far, while it still runs).
  absl::StatusOr<int> Drain(absl::Duration timeout = absl::Seconds(30));

  // Everything the daemon has written to stderr so far.
  std::string stderr_text() const;

  // Waits until stderr contains `text`; false after `timeout` or once
  // stderr is closed without it.
  bool WaitForStderr(absl::string_view text, absl::Duration timeout) const;

 private:
  void ReadStderr(int fd);
  // The error `status` with the stderr so far appended.
  absl::Status WithStderr(absl::Status status) const;
  // Parses "pacelined: listening on HOST:PORT" out of stderr.
  absl::Status ParseAddress();

  // Constant after construction.
  const std::string binary_;

  // Used by the owning thread only.
  pid_t pid_ = -1;
  pid_t pgid_ = -1;  // the daemon's process group (its pid)
  bool started_ = false;
  int exit_code_ = -1;  // valid once reaped (started_ && pid_ == -1)
  std::string address_;
  int port_ = 0;
  int http_port_ = 0;
  std::thread reader_;

  mutable absl::Mutex mu_;
  std::string stderr_ ABSL_GUARDED_BY(mu_);
  bool stderr_closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Adds `authorization: Bearer <api_key>` to a call's metadata.
void AddApiKey(grpc::ClientContext* ctx, absl::string_view api_key);

// A ClientContext carrying the key, with a deadline `timeout` from now.
// (ClientContext can be neither copied nor moved, hence the pointer.)
std::unique_ptr<grpc::ClientContext> MakeClientContext(
    absl::string_view api_key, absl::Duration timeout = absl::Seconds(30));

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_DAEMON_PROCESS_H_
