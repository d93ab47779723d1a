#ifndef PACELINE_TESTS_DAEMON_STORM_HARNESS_H_
#define PACELINE_TESTS_DAEMON_STORM_HARNESS_H_

// What the storm, drain and soak tests share: a pacelined started on a
// config of one tenant ("storm", key kKey) with gRPC and HTTP on ephemeral
// ports, its resources (/proc: threads, fds, RSS) and gauges
// (GetServerStatus), gRPC streams on the callback API, SSE streams on raw
// sockets, and a tally of how the calls ended.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "server/frontend/sha256.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/loopback.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/stories260k_oracle.h"
#include "tests/testing/wait_for.h"

namespace paceline::server::storm {

using ::paceline::testing::DaemonProcess;
using ::paceline::testing::HaveStories260K;
using ::paceline::testing::kStories260KPath;
using ::paceline::testing::MakeClientContext;
using ::paceline::testing::WaitFor;
using ::paceline::testing::WriteFile;

// The storm tenant's API key.
inline constexpr char kKey[] = "storm-key";

// What the daemon process holds, read from /proc.
struct ProcessResources {
  int threads = 0;
  int fds = 0;
  int64_t rss_kb = 0;
};

ProcessResources ReadResources(pid_t pid);

// Whether RSS bounds mean anything in this build. Under AddressSanitizer
// (tools/sanitize.sh asan builds the daemon and the tests alike) freed
// memory sits in its quarantine (256 MiB by default) and RSS grows by
// design; threads and fds are still checked.
inline constexpr bool kCheckRss = !paceline::testing::kAddressSanitizer;

std::string Describe(const ProcessResources& r);

std::string Describe(const v1::ServerStatus& s);

bool Idle(const v1::ServerStatus& s);

// Enough descriptors for a thousand sockets here and in the daemon (which
// inherits the limit).
void RaiseFdLimit();

v1::GenerateRequest Request(int32_t max_tokens, double pace);

// How the calls of a storm went; any thread may report.
class Tally {
 public:
  void Accepted() {
    absl::MutexLock lock(&mu_);
    ++accepted_;
  }
  void Done(const grpc::Status& status, absl::Duration latency,
            bool retry_hint) {
    absl::MutexLock lock(&mu_);
    ++done_;
    if (retry_hint) ++retry_hints_;
    ++codes_[status.error_code()];
    latencies_[status.error_code()].push_back(latency);
  }
  // Waits until `n` calls were accepted (or done); false at the deadline.
  bool WaitAccepted(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&] { return accepted_ + done_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  bool WaitDone(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&] { return done_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  int done(grpc::StatusCode code) {
    absl::MutexLock lock(&mu_);
    return codes_[code];
  }
  int done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  int retry_hints() {
    absl::MutexLock lock(&mu_);
    return retry_hints_;
  }
  // The q-quantile of the latencies of the calls that ended with `code`.
  absl::Duration Quantile(grpc::StatusCode code, double q) {
    absl::MutexLock lock(&mu_);
    std::vector<absl::Duration>& v = latencies_[code];
    if (v.empty()) return absl::InfiniteDuration();
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
  }

 private:
  absl::Mutex mu_;
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  int retry_hints_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<grpc::StatusCode, int> codes_ ABSL_GUARDED_BY(mu_);
  std::map<grpc::StatusCode, std::vector<absl::Duration>> latencies_
      ABSL_GUARDED_BY(mu_);
};

// One Generate stream on the callback API: reports its Accepted and its
// end, and counts what it read; Cancel() resets it (RST_STREAM).
class Stream : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Stream(v1::Paceline::Stub* stub, const v1::GenerateRequest& request,
         Tally* tally)
      : tally_(tally), started_(absl::Now()) {
    paceline::testing::AddApiKey(&context_, kKey);
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(300));
    stub->async()->Generate(&context_, &request, this);
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }
  int deltas() const { return deltas_; }
  // The token ids read, the Finished message (if one came) and the status
  // (once the tally counts this stream done).
  int tokens() const {
    absl::MutexLock lock(&mu_);
    return tokens_;
  }
  std::optional<v1::Finished> finished() const {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  grpc::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (response_.has_accepted()) tally_->Accepted();
    if (response_.has_delta()) ++deltas_;
    {
      absl::MutexLock lock(&mu_);
      tokens_ += response_.delta().token_ids_size();
      if (response_.has_finished()) finished_ = response_.finished();
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      status_ = status;
    }
    const auto& trailers = context_.GetServerTrailingMetadata();
    tally_->Done(status, absl::Now() - started_,
                 trailers.find("retry-after-ms") != trailers.end());
  }

 private:
  Tally* const tally_;
  const absl::Time started_;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;
  std::atomic<int> deltas_ = 0;
  mutable absl::Mutex mu_;
  int tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<v1::Finished> finished_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

// An SSE stream on a raw socket: POST /v1/completions with stream true;
// Reset() closes it with an RST (SO_LINGER 0), as a client that vanishes.
class SseStream {
 public:
  SseStream(int port, double pace, int max_tokens,
            const std::string& prompt = "")
      : SseStream(port, Body(pace, max_tokens, prompt)) {}
  // POSTs `body` (a completions request) as it is; `rcvbuf` > 0: a small
  // receive window (a reader that falls behind).
  SseStream(int port, const std::string& body, int rcvbuf = 0)
      : fd_(paceline::testing::ConnectLoopback(port, rcvbuf)) {
    const std::string request = absl::StrCat(
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nAuthorization: Bearer ",
        kKey, "\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
    sent_ = fd_ >= 0 && paceline::testing::SendAll(fd_, request);
  }
  ~SseStream() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  bool sent() const { return sent_; }
  // Reads what is there; true once a first "data:" event arrived.
  bool ReadSome() {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      seen_.append(buf, static_cast<size_t>(std::min<ssize_t>(n, 64)));
      tail_.append(buf, static_cast<size_t>(n));
      if (absl::StrContains(tail_, "data: [DONE]")) done_ = true;
      // An error event counts once it is whole (its blank line read): it
      // can arrive over several reads, and CI once stopped reading after
      // `data: {"error":`, before the message.
      const size_t error_at = tail_.rfind("\"error\"");
      if (error_at != std::string::npos &&
          tail_.find("\n\n", error_at) != std::string::npos) {
        error_ = true;
      }
      if (absl::StrContains(tail_, "data:")) first_chunk_ = true;
      if (tail_.size() > kTailBytes) {
        tail_.erase(0, tail_.size() - kTailBytes);
      }
    }
    if (n == 0) closed_ = true;
    return first_chunk_;
  }
  // Reads until the stream ends ("data: [DONE]", an error event, or the
  // server closing it; a finished SSE response keeps its connection open);
  // false at the deadline.
  bool ReadToEnd(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!closed_ && !done_ && !error_ && absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, 100);
      ReadSome();
    }
    return closed_ || done_ || error_;
  }
  bool first_chunk() const { return first_chunk_; }
  // The first bytes of each read so far (for failure messages), and the
  // last bytes read.
  const std::string& head() const { return seen_; }
  const std::string& tail() const { return tail_; }
  bool closed() const { return closed_; }
  // Whether the stream ended with "data: [DONE]" / carried an error event.
  bool done() const { return done_; }
  bool error() const { return error_; }
  // A streamed completion of `max_tokens` (ignore_eos), paced at `pace`
  // when > 0.
  static std::string Body(double pace, int max_tokens,
                          const std::string& prompt) {
    std::string body = absl::StrCat(
        R"({"prompt": ")", prompt.empty() ? "Once upon a time" : prompt,
        R"(", "stream": true, "max_tokens": )", max_tokens,
        R"(, "ignore_eos": true, "temperature": 0.8)");
    if (pace > 0) absl::StrAppend(&body, R"(, "pace_tokens_per_s": )", pace);
    return body + "}";
  }

  void Reset() {
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool sent_ = false;
  bool first_chunk_ = false;
  bool closed_ = false;
  bool done_ = false;
  bool error_ = false;
  std::string seen_;  // the first bytes of each read, enough for "data:"
  // The last bytes read (kTailBytes), for the markers above: room for a
  // whole error event.
  static constexpr size_t kTailBytes = 1024;
  std::string tail_;
};

class StormTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
    RaiseFdLimit();
  }

  void Start(const std::string& model, const std::string& tenant_limits,
             const std::string& server_extra = "",
             const std::string& http_extra = "",
             const std::vector<std::string>& extra_args = {}) {
    const std::string config = WriteFile(
        "storm.textproto",
        absl::StrCat("model { path: \"", model,
                     "\" }\nlisten: \"127.0.0.1:0\"\n"
                     "http { listen: \"127.0.0.1:0\" ",
                     http_extra, " }\n", server_extra,
                     "tenants {\n  name: \"storm\"\n", "  api_key_sha256: \"",
                     Sha256Hex(kKey), "\"\n", tenant_limits, "}\n"));
    std::vector<std::string> args = {"--config", config, "--allow-root"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    ASSERT_TRUE(daemon_.Start(args).ok()) << daemon_.stderr_text();
    stub_ = v1::Paceline::NewStub(daemon_.Channel());
  }

  v1::ServerStatus Status() {
    v1::ServerStatus status;
    auto ctx = MakeClientContext(kKey);
    EXPECT_TRUE(stub_->GetServerStatus(ctx.get(), {}, &status).ok());
    return status;
  }

  // Polls until `done` holds; the last status (the test fails with `what`
  // at the deadline, printing the statuses it saw about every 250 ms).
  template <typename Pred>
  v1::ServerStatus WaitStatus(Pred done, absl::Duration timeout,
                              absl::string_view what) {
    v1::ServerStatus s;
    const absl::Time start = absl::Now();
    absl::Time last_kept = absl::InfinitePast();
    std::string seen;
    const bool held = WaitFor(
        [&] {
          s = Status();
          const absl::Time now = absl::Now();
          if (now - last_kept >= absl::Milliseconds(250)) {
            absl::StrAppend(&seen, "\n  +", absl::FormatDuration(now - start),
                            ": ", Describe(s));
            last_kept = now;
          }
          return done(s);
        },
        timeout, what);
    EXPECT_TRUE(held) << Describe(s) << "\nseen:" << seen;
    return s;
  }

  // One unpaced gRPC request and one SSE request run to the end, so that
  // what the daemon creates on first use (threads, pools) is in the
  // baseline.
  void WarmUp() {
    Tally tally;
    Stream grpc_stream(stub_.get(), Request(8, 0), &tally);
    ASSERT_TRUE(tally.WaitDone(1, absl::Seconds(60)));
    SseStream sse(daemon_.http_port(), 0, 8);
    ASSERT_TRUE(sse.sent());
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!sse.closed() && absl::Now() < deadline) {
      pollfd p{sse.fd(), POLLIN, 0};
      poll(&p, 1, 100);
      sse.ReadSome();
    }
    WaitStatus(Idle, absl::Seconds(30), "idle after the warm-up");
  }

  DaemonProcess daemon_;
  std::unique_ptr<v1::Paceline::Stub> stub_;
};
}  // namespace paceline::server::storm

#endif  // PACELINE_TESTS_DAEMON_STORM_HARNESS_H_
