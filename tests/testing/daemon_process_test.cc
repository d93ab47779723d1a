// DaemonProcess against /bin/sh scripts that behave like pacelined (or
// fail to): the harness is checked before the daemon exists.

#include "tests/testing/daemon_process.h"

#include <signal.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace paceline::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kAnnounce[] =
    "echo 'pacelined: loading model' >&2; "
    "echo 'pacelined: listening on 127.0.0.1:4242' >&2; "
    "echo 'pacelined: ready' >&2; ";

// Exits 0 on SIGTERM after saying so, as the daemon drains. The trap comes
// before the announcement, as the daemon's handler comes before "ready".
constexpr char kTrapTerm[] =
    "trap 'echo pacelined: drained >&2; exit 0' TERM; ";
constexpr char kServe[] = "while :; do sleep 0.02; done";

TEST(DaemonProcessTest, StartsParsesTheAddressAndStopsOnSigterm) {
  DaemonProcess daemon("/bin/sh");
  ASSERT_TRUE(
      daemon.Start({"-c", std::string(kTrapTerm) + kAnnounce + kServe}).ok());
  EXPECT_EQ(daemon.address(), "127.0.0.1:4242");
  EXPECT_EQ(daemon.port(), 4242);
  EXPECT_GT(daemon.pid(), 0);
  EXPECT_THAT(daemon.stderr_text(), HasSubstr("loading model"));

  ASSERT_TRUE(daemon.Signal(SIGTERM).ok());
  EXPECT_TRUE(daemon.WaitForStderr("drained", absl::Seconds(10)));
  absl::StatusOr<int> code = daemon.WaitExit(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(daemon.pid(), -1);
  EXPECT_EQ(daemon.WaitExit(absl::ZeroDuration()).value_or(-1), 0);
  EXPECT_FALSE(daemon.Signal(SIGTERM).ok());
}

TEST(DaemonProcessTest, DrainSendsSigtermAndReturnsTheExitCode) {
  DaemonProcess daemon("/bin/sh");
  ASSERT_TRUE(
      daemon.Start({"-c", std::string(kTrapTerm) + kAnnounce + kServe}).ok());
  absl::StatusOr<int> code = daemon.Drain(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  // The reader thread may still be reading the last line when the daemon is
  // reaped.
  EXPECT_TRUE(daemon.WaitForStderr("drained", absl::Seconds(10)));
  EXPECT_EQ(daemon.pid(), -1);
  // Reaped: there is nothing left to signal.
  EXPECT_EQ(daemon.Drain().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(DaemonProcessTest, DrainTimesOutWhenSigtermIsIgnored) {
  DaemonProcess daemon("/bin/sh");
  ASSERT_TRUE(
      daemon.Start({"-c", std::string("trap '' TERM; ") + kAnnounce + kServe})
          .ok());
  absl::StatusOr<int> code = daemon.Drain(absl::Milliseconds(50));
  EXPECT_EQ(code.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(code.status().message(), HasSubstr("pacelined: ready"));
  EXPECT_GT(daemon.pid(), 0);
  // The destructor kills and reaps it.
}

TEST(DaemonProcessTest, ReportsASignalDeathAs128PlusSignal) {
  DaemonProcess daemon("/bin/sh");
  ASSERT_TRUE(
      daemon.Start({"-c", std::string(kAnnounce) + "exec sleep 60"}).ok());
  ASSERT_TRUE(daemon.Signal(SIGKILL).ok());
  EXPECT_EQ(daemon.WaitExit(absl::Seconds(10)).value_or(-1), 128 + SIGKILL);
}

TEST(DaemonProcessTest, WaitExitTimesOutWhileRunning) {
  DaemonProcess daemon("/bin/sh");
  ASSERT_TRUE(
      daemon.Start({"-c", std::string(kAnnounce) + "exec sleep 60"}).ok());
  absl::StatusOr<int> code = daemon.WaitExit(absl::Milliseconds(50));
  EXPECT_EQ(code.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GT(daemon.pid(), 0);
  // The destructor kills and reaps it.
}

TEST(DaemonProcessTest, EarlyExitFailsWithTheStderr) {
  DaemonProcess daemon("/bin/sh");
  const absl::Status s =
      daemon.Start({"-c", "echo 'pacelined: bad --tenant' >&2; exit 2"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("exited with 2"));
  EXPECT_THAT(s.message(), HasSubstr("pacelined: bad --tenant"));
  EXPECT_EQ(daemon.WaitExit(absl::ZeroDuration()).value_or(-1), 2);
}

TEST(DaemonProcessTest, NotReadyInTimeIsKilled) {
  DaemonProcess daemon("/bin/sh");
  const absl::Status s =
      daemon.Start({"-c", "echo 'pacelined: loading' >&2; exec sleep 60"},
                   absl::Milliseconds(200));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("pacelined: loading"));
  EXPECT_EQ(daemon.pid(), -1);
}

TEST(DaemonProcessTest, MissingBinaryIsFailedPrecondition) {
  DaemonProcess daemon("/nonexistent/pacelined");
  EXPECT_EQ(daemon.Start({}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DaemonProcessTest, DefaultBinaryIsTheBuildsDaemon) {
  EXPECT_THAT(PacelinedPath(), ::testing::EndsWith("/server/pacelined"));
}

TEST(MakeClientContextTest, CarriesTheBearerKeyAndADeadline) {
  const absl::Time before = absl::Now();
  std::unique_ptr<grpc::ClientContext> ctx =
      MakeClientContext("KEY", absl::Seconds(5));
  const absl::Time deadline = absl::FromChrono(ctx->deadline());
  EXPECT_GE(deadline, before + absl::Seconds(5));
  EXPECT_LE(deadline, absl::Now() + absl::Seconds(5));
}

}  // namespace
}  // namespace paceline::testing
