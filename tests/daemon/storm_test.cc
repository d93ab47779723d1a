// Storms against the real pacelined (issue 18's scenarios 1, 2 and 9), each
// asserting what the daemon holds before and after: KV blocks, running and
// waiting requests, paced streams and buffered tokens (its own
// GetServerStatus), and the process's threads, open fds and RSS (/proc).
//
//   - 1,000 streams (500 gRPC, 500 SSE; half of each paced) reset while
//     queued, generating or in paced delivery: every resource back to its
//     baseline within 5 s.
//   - A stream reset at each stage alone: queued, in prefill, and in paced
//     delivery after its generation ended.
//   - 2,000 concurrent calls against a queue of 100: every call ends, the
//     refused ones with RESOURCE_EXHAUSTED and a retry hint, sooner than
//     the admitted ones finish; nothing is left behind.
//
// The only times asserted are deadlines; the latencies are printed (the
// README's "Reliability" figures). They skip without ../shared/models.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/daemon/storm_harness.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/stories260k_oracle.h"
#include "tests/testing/wait_for.h"

namespace paceline::server {
namespace {

using ::paceline::testing::kStories260KPath;
using ::paceline::testing::MakeClientContext;
using ::paceline::testing::WaitFor;
using storm::Describe;
using storm::Idle;
using storm::kKey;
using storm::ProcessResources;
using storm::ReadResources;
using storm::Request;
using storm::SseStream;
using storm::StormTest;
using storm::Stream;
using storm::Tally;

// 1,000 streams at once, half of them paced; reset while some wait in the
// queue, some run and some are in paced delivery.
struct Storm {
  Tally tally;
  std::vector<std::unique_ptr<Stream>> grpc;
  std::vector<std::unique_ptr<SseStream>> sse;
};

class DisconnectStormTest : public StormTest {
 protected:
  static constexpr int kPerTransport = 500;
  static constexpr int kMaxTokens = 100;
  static constexpr double kPace = 4;  // a paced stream lasts 25 s

  // Opens the storm's streams and waits until the daemon holds requests in
  // every stage (waiting, running, paced), then resets every stream; the
  // streams that had ended before the reset.
  int OpenAndReset(Storm& storm) {
    for (int i = 0; i < kPerTransport; ++i) {
      const double pace = i % 2 == 0 ? kPace : 0;
      storm.grpc.push_back(std::make_unique<Stream>(
          stub_.get(), Request(kMaxTokens, pace), &storm.tally));
      storm.sse.push_back(
          std::make_unique<SseStream>(daemon_.http_port(), pace, kMaxTokens));
      EXPECT_TRUE(storm.sse.back()->sent()) << "SSE stream " << i;
    }
    EXPECT_TRUE(storm.tally.WaitAccepted(kPerTransport, absl::Seconds(60)));
    const v1::ServerStatus open = WaitStatus(
        [](const v1::ServerStatus& s) {
          return s.waiting_requests() > 0 && s.running_sequences() > 0 &&
                 s.paced_streams() > 0;
        },
        absl::Seconds(60), "requests waiting, running and paced at once");
    std::printf("storm: at the reset: %s; %s\n", Describe(open).c_str(),
                Describe(ReadResources(daemon_.pid())).c_str());
    const int ended = storm.tally.done();
    for (auto& s : storm.grpc) s->Cancel();
    for (auto& s : storm.sse) s->Reset();
    return ended;
  }
};

TEST_F(DisconnectStormTest, EveryResourceReturnsToItsBaseline) {
  Start(kStories260KPath, "  max_queued: 2000\n",
        "scheduler { max_running: 256 }\n");
  WarmUp();
  // A first storm, not measured: whatever the daemon keeps once it has
  // served this load (thread pools, allocator arenas) is in the baseline.
  {
    Storm warm;
    OpenAndReset(warm);
    WaitStatus(Idle, absl::Seconds(30), "idle after the warm-up storm");
    ASSERT_TRUE(warm.tally.WaitDone(kPerTransport, absl::Seconds(30)));
  }
  absl::SleepFor(absl::Seconds(1));  // closed connections fully gone
  const ProcessResources base = ReadResources(daemon_.pid());
  std::printf("storm: baseline %s\n", Describe(base).c_str());

  Storm storm;
  const int ended = OpenAndReset(storm);
  const absl::Time reset = absl::Now();
  // The paced half cannot have ended (25 s each).
  EXPECT_LE(ended, kPerTransport / 2) << "gRPC streams ended before the reset";
  const v1::ServerStatus after =
      WaitStatus(Idle, absl::Seconds(5), "every gauge at 0 after the reset");
  ProcessResources now;
  EXPECT_TRUE(WaitFor(
      [&] {
        now = ReadResources(daemon_.pid());
        return now.fds <= base.fds && now.threads <= base.threads;
      },
      absl::Seconds(5), "fds and threads back to the baseline"))
      << Describe(now) << " vs " << Describe(base);
  std::printf(
      "storm: %d of %d gRPC streams had ended; back to the baseline "
      "%.0f ms after the reset: %s; %s\n",
      ended, kPerTransport, absl::ToDoubleMilliseconds(absl::Now() - reset),
      Describe(after).c_str(), Describe(now).c_str());
  // The second storm allocates what the first one freed.
  if (storm::kCheckRss) {
    EXPECT_LE(now.rss_kb, base.rss_kb + 64 * 1024) << Describe(now);
  }
  ASSERT_TRUE(storm.tally.WaitDone(kPerTransport, absl::Seconds(30)));
  EXPECT_EQ(storm.tally.done(grpc::StatusCode::CANCELLED),
            kPerTransport - ended);

  // The daemon still serves.
  Tally again;
  Stream one(stub_.get(), Request(8, 0), &again);
  ASSERT_TRUE(again.WaitDone(1, absl::Seconds(60)));
  EXPECT_EQ(again.done(grpc::StatusCode::OK), 1);
}

// One stream reset at one stage of its life, over gRPC or SSE: the stages
// are told apart by the daemon's own gauges before the reset.
enum class Transport { kGrpc, kSse };

class StageTest : public StormTest,
                  public ::testing::WithParamInterface<Transport> {
 protected:
  // Opens one stream on the transport under test.
  void Open(int32_t max_tokens, double pace, const std::string& text = "") {
    v1::GenerateRequest request = Request(max_tokens, pace);
    if (!text.empty()) request.set_text(text);
    if (GetParam() == Transport::kGrpc) {
      grpc_.push_back(std::make_unique<Stream>(stub_.get(), request, &tally_));
    } else {
      sse_.push_back(std::make_unique<SseStream>(daemon_.http_port(), pace,
                                                 max_tokens, text));
      ASSERT_TRUE(sse_.back()->sent());
    }
  }
  void ResetLast() {
    if (GetParam() == Transport::kGrpc) {
      grpc_.back()->Cancel();
    } else {
      sse_.back()->Reset();
    }
  }
  void ResetAll() {
    for (auto& s : grpc_) s->Cancel();
    for (auto& s : sse_) {
      if (s->fd() >= 0) s->Reset();
    }
  }

  Tally tally_;
  std::vector<std::unique_ptr<Stream>> grpc_;
  std::vector<std::unique_ptr<SseStream>> sse_;
};

TEST_P(StageTest, ResetWhileQueuedLeavesTheQueue) {
  // dummy:stories42m generates slowly enough (tens of tokens/s on 2 cores)
  // that the first request holds the tenant's one slot for seconds.
  Start("dummy:stories42m", "  max_running: 1\n");
  Open(480, 0, "Once");
  WaitStatus(
      [](const v1::ServerStatus& s) { return s.running_sequences() == 1; },
      absl::Seconds(30), "the first stream running");
  Open(8, 0, "Once");
  const v1::ServerStatus queued = WaitStatus(
      [](const v1::ServerStatus& s) { return s.waiting_requests() == 1; },
      absl::Seconds(30), "the second stream queued");
  EXPECT_EQ(queued.running_sequences(), 1);
  ResetLast();
  const v1::ServerStatus left = WaitStatus(
      [](const v1::ServerStatus& s) { return s.waiting_requests() == 0; },
      absl::Seconds(5), "the queue empty after the reset");
  EXPECT_EQ(left.running_sequences(), 1) << "the first still runs";
  ResetAll();
  WaitStatus(Idle, absl::Seconds(5), "idle after both resets");
}

TEST_P(StageTest, ResetDuringPrefillFreesItsBlocks) {
  // dummy:stories42m has byte-level tokens: a 480-byte prompt is 480
  // tokens, prefilled 32 a step, ~15 steps of tens of ms on 2 cores.
  Start("dummy:stories42m", "", "scheduler { max_batched_tokens: 32 }\n");
  Open(8, 0, std::string(480, 'a'));
  const v1::ServerStatus prefill = WaitStatus(
      [](const v1::ServerStatus& s) {
        return s.running_sequences() == 1 && s.kv_cache().used_blocks() > 0;
      },
      absl::Seconds(30), "the stream in prefill");
  ResetLast();
  // The prompt is 30 blocks of 16: still in prefill when reset unless the
  // whole prompt was done (then it has generated nothing yet either).
  std::printf("prefill: reset with %lld blocks in use\n",
              static_cast<long long>(prefill.kv_cache().used_blocks()));
  WaitStatus(Idle, absl::Seconds(5), "idle after a reset in prefill");
  if (GetParam() == Transport::kGrpc) {
    ASSERT_TRUE(tally_.WaitDone(1, absl::Seconds(10)));
    EXPECT_EQ(tally_.done(grpc::StatusCode::CANCELLED), 1);
    EXPECT_EQ(grpc_.back()->deltas(), 0);
  }
}

TEST_P(StageTest, ResetDuringPacedDeliveryDropsTheBuffer) {
  Start(kStories260KPath, "");
  Open(200, 2);  // generated in a burst, delivered over 100 s
  const v1::ServerStatus delivering = WaitStatus(
      [](const v1::ServerStatus& s) {
        return s.running_sequences() == 0 && s.paced_streams() == 1 &&
               s.buffered_tokens() > 100;
      },
      absl::Seconds(30), "generation ended, delivery paced");
  EXPECT_EQ(delivering.kv_cache().used_blocks(), 0);
  ResetLast();
  WaitStatus(Idle, absl::Seconds(5), "no paced stream after the reset");
}

INSTANTIATE_TEST_SUITE_P(Transports, StageTest,
                         ::testing::Values(Transport::kGrpc, Transport::kSse),
                         [](const auto& info) {
                           return info.param == Transport::kGrpc ? "Grpc"
                                                                 : "Sse";
                         });

TEST_F(StormTest, TenfoldOverloadIsRefusedFastAndLeavesNothing) {
  constexpr int kQueue = 100;
  constexpr int kCalls = 2000;
  Start(kStories260KPath, absl::StrCat("  max_queued: ", kQueue, "\n"),
        "scheduler { max_running: 64 }\n");
  WarmUp();
  const ProcessResources base = ReadResources(daemon_.pid());
  Tally tally;
  std::vector<std::unique_ptr<Stream>> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(
        std::make_unique<Stream>(stub_.get(), Request(64, 0), &tally));
  }
  // While the storm lasts, the queue never holds more than its limit.
  int max_waiting = 0;
  int64_t peak_rss_kb = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(300);
  while (!tally.WaitDone(kCalls, absl::Milliseconds(50)) &&
         absl::Now() < deadline) {
    max_waiting = std::max(max_waiting, Status().waiting_requests());
    peak_rss_kb = std::max(peak_rss_kb, ReadResources(daemon_.pid()).rss_kb);
  }
  ASSERT_TRUE(tally.WaitDone(kCalls, absl::Seconds(300))) << "a call hung";
  const int ok = tally.done(grpc::StatusCode::OK);
  const int refused = tally.done(grpc::StatusCode::RESOURCE_EXHAUSTED);
  const absl::Duration refused_p50 =
      tally.Quantile(grpc::StatusCode::RESOURCE_EXHAUSTED, 0.5);
  const absl::Duration refused_p99 =
      tally.Quantile(grpc::StatusCode::RESOURCE_EXHAUSTED, 0.99);
  const absl::Duration ok_p50 = tally.Quantile(grpc::StatusCode::OK, 0.5);
  std::printf(
      "overload: %d calls, %d served, %d refused; refusal p50 %.1f ms, p99 "
      "%.1f ms; served p50 %.1f ms; max waiting %d; RSS %lld -> %lld MiB\n",
      kCalls, ok, refused, absl::ToDoubleMilliseconds(refused_p50),
      absl::ToDoubleMilliseconds(refused_p99),
      absl::ToDoubleMilliseconds(ok_p50), max_waiting,
      static_cast<long long>(base.rss_kb / 1024),
      static_cast<long long>(peak_rss_kb / 1024));
  EXPECT_EQ(ok + refused, kCalls);
  EXPECT_GT(refused, kCalls / 2);
  EXPECT_EQ(tally.retry_hints(), refused) << "every refusal has a retry hint";
  EXPECT_LE(max_waiting, kQueue);
  // A refusal does not wait behind the engine: it comes back before half
  // the served calls have finished.
  EXPECT_LT(refused_p99, ok_p50);
  if (storm::kCheckRss) {
    EXPECT_LE(peak_rss_kb, base.rss_kb + 512 * 1024);
  }
  WaitStatus(Idle, absl::Seconds(5), "idle after the overload");
}

// Scenario 20: a reader that stops reading. Its stream's released output
// piles up past max_unread_bytes (8 KiB here; 480 tokens with 20
// alternatives each are ~170 KB on gRPC, more as SSE JSON), so the stream
// is cut: its request cancelled and its blocks freed while the client still
// reads nothing, and a stream beside it keeps its pace. Once the stalled
// client reads, it finds what the transport had taken and then the cut's
// RESOURCE_EXHAUSTED.
class SlowReaderTest : public StormTest {
 protected:
  void SetUp() override {
    StormTest::SetUp();
    if (IsSkipped()) return;
    Start(kStories260KPath, "", "max_unread_bytes: 8192\n",
          "send_buffer_bytes: 8192");
  }

  static v1::GenerateRequest Heavy() {
    v1::GenerateRequest r = Request(480, 0);
    r.mutable_logprobs()->set_enabled(true);
    r.mutable_logprobs()->set_top_n(20);
    return r;
  }

  // A normal paced stream beside the stalled one, read to its end.
  void ExpectAPacedNeighbourKeepsItsPace() {
    Tally tally;
    Stream neighbour(stub_.get(), Request(20, 40), &tally);
    ASSERT_TRUE(tally.WaitDone(1, absl::Seconds(60)));
    EXPECT_EQ(tally.done(grpc::StatusCode::OK), 1);
    EXPECT_GE(neighbour.deltas(), 2) << "paced, not one burst";
  }

  // The stalled stream was cut: nothing of it runs, waits or is buffered.
  void ExpectCut(int64_t steps_before) {
    // Idle once the engine has stepped for it (the status is published
    // after each step).
    WaitStatus(
        [&](const v1::ServerStatus& s) {
          return Idle(s) && s.engine_steps() > steps_before;
        },
        absl::Seconds(30), "the stalled stream cut and freed");
  }
};

TEST_F(SlowReaderTest, AStalledGrpcReaderIsCutWithItsStatus) {
  // A small, fixed flow-control window, so that what the client's transport
  // takes in stays far below the output.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  auto channel = grpc::CreateCustomChannel(
      daemon_.address(), grpc::InsecureChannelCredentials(), args);
  auto stalled_stub = v1::Paceline::NewStub(channel);
  const int64_t steps_before = Status().engine_steps();
  auto ctx = MakeClientContext(kKey, absl::Seconds(120));
  auto reader = stalled_stub->Generate(ctx.get(), Heavy());
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));  // the Accepted; then no reads
  ASSERT_TRUE(response.has_accepted());
  ExpectCut(steps_before);
  ExpectAPacedNeighbourKeepsItsPace();
  int deltas = 0;
  while (reader->Read(&response)) deltas += response.has_delta() ? 1 : 0;
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  EXPECT_NE(status.error_message().find("reads too slowly"), std::string::npos)
      << status.error_message();
  EXPECT_LT(deltas, 480) << "the stream was cut short";
}

TEST_F(SlowReaderTest, AStalledSseReaderIsCutWithAnErrorEvent) {
  const int64_t steps_before = Status().engine_steps();
  // A small receive buffer (set before connecting: the window follows).
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int rcvbuf = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(daemon_.http_port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string body =
      R"({"prompt": "Once upon a time", "stream": true, "max_tokens": 480,)"
      R"( "ignore_eos": true, "logprobs": 5, "temperature": 0.8})";
  const std::string request = absl::StrCat(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nConnection: close\r\n"
      "Authorization: Bearer ",
      kKey, "\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  ExpectCut(steps_before);
  ExpectAPacedNeighbourKeepsItsPace();
  std::string answer;
  char buf[65536];
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_NE(answer.find("reads too slowly"), std::string::npos)
      << answer.substr(answer.size() > 400 ? answer.size() - 400 : 0);
  EXPECT_EQ(answer.find("data: [DONE]"), std::string::npos);
}

}  // namespace
}  // namespace paceline::server
