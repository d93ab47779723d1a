// SIGTERM with work at every stage (issue 18's scenario 14): a gRPC stream
// running, another queued behind the tenant's one running slot, and an SSE
// stream queued too.
//
//   - Within the drain timeout, every one of them is admitted in turn and
//     finishes whole; new calls are refused (UNAVAILABLE, HTTP 503) while
//     they do; the daemon exits 0.
//   - At the drain timeout, what is left is cut: the gRPC streams, queued or
//     running, get a Finished (CANCELLED, with the usage so far) and then
//     ABORTED; the SSE stream an error event and no [DONE]; exit 0.
//
// They skip without ../shared/models.

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/server/storm_harness.h"
#include "tests/testing/http_post.h"
#include "tests/testing/wait_for.h"

namespace paceline::server {
namespace {

using ::paceline::testing::HttpPost;
using ::paceline::testing::MakeClientContext;
using storm::kKey;
using storm::Request;
using storm::SseStream;
using storm::StormTest;
using storm::Stream;
using storm::Tally;

class DrainTest : public StormTest {
 protected:
  // One tenant slot: a stream of `first_tokens` runs (dummy:stories42m
  // generates tens of tokens/s on 2 cores, so it holds the slot), a second
  // gRPC stream and an SSE stream of `queued_tokens` wait.
  void StartWithWorkAtEveryStage(const std::string& server_extra,
                                 int first_tokens, int queued_tokens) {
    Start("dummy:stories42m", "  max_running: 1\n", server_extra);
    running_ = std::make_unique<Stream>(stub_.get(), Request(first_tokens, 0),
                                        &tally_);
    WaitStatus(
        [](const v1::ServerStatus& s) { return s.running_sequences() == 1; },
        absl::Seconds(30), "the first stream running");
    queued_ = std::make_unique<Stream>(stub_.get(), Request(queued_tokens, 0),
                                       &tally_);
    WaitStatus(
        [](const v1::ServerStatus& s) { return s.waiting_requests() == 1; },
        absl::Seconds(30), "the second stream queued");
    sse_ = std::make_unique<SseStream>(daemon_.http_port(), 0, queued_tokens);
    ASSERT_TRUE(sse_->sent());
    const v1::ServerStatus before = WaitStatus(
        [](const v1::ServerStatus& s) { return s.waiting_requests() == 2; },
        absl::Seconds(30), "the SSE stream queued");
    ASSERT_EQ(before.running_sequences(), 1);
  }

  // New calls over both APIs while the daemon drains.
  void ExpectNewCallsRefused() {
    v1::CompleteResponse out;
    auto ctx = MakeClientContext(kKey);
    v1::GenerateRequest r = Request(4, 0);
    EXPECT_EQ(stub_->Complete(ctx.get(), r, &out).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    const auto http = HttpPost(daemon_.http_port(), "/v1/completions",
                               R"({"prompt": "Once", "max_tokens": 4})", kKey);
    EXPECT_EQ(http.status, 503) << http.body;
  }

  Tally tally_;
  std::unique_ptr<Stream> running_;
  std::unique_ptr<Stream> queued_;
  std::unique_ptr<SseStream> sse_;
};

TEST_F(DrainTest, QueuedAndHttpStreamsFinishWithinTheTimeout) {
  // A second or so for the first, then the queued two in turn.
  StartWithWorkAtEveryStage("drain_timeout_seconds: 60\n", 32, 16);
  ASSERT_TRUE(daemon_.Signal(SIGTERM).ok());
  ASSERT_TRUE(daemon_.WaitForStderr("draining", absl::Seconds(5)));
  ExpectNewCallsRefused();
  ASSERT_TRUE(tally_.WaitDone(2, absl::Seconds(60)));
  for (const Stream* s : {running_.get(), queued_.get()}) {
    EXPECT_TRUE(s->status().ok()) << s->status().error_message();
    ASSERT_TRUE(s->finished().has_value());
    EXPECT_EQ(s->finished()->reason(), v1::FINISH_REASON_LENGTH);
  }
  EXPECT_EQ(running_->tokens(), 32);
  EXPECT_EQ(queued_->tokens(), 16);
  ASSERT_TRUE(sse_->ReadToEnd(absl::Seconds(60)));
  EXPECT_TRUE(sse_->done());
  EXPECT_FALSE(sse_->error());
  absl::StatusOr<int> code = daemon_.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << daemon_.stderr_text();
}

TEST_F(DrainTest, TheTimeoutCutsQueuedAndHttpStreamsWithTheirStatus) {
  // Minutes of generation: the queued two are never admitted in time.
  StartWithWorkAtEveryStage("drain_timeout_seconds: 1\n", 900, 16);
  ASSERT_TRUE(daemon_.Signal(SIGTERM).ok());
  ASSERT_TRUE(daemon_.WaitForStderr("draining", absl::Seconds(5)));
  ExpectNewCallsRefused();
  ASSERT_TRUE(tally_.WaitDone(2, absl::Seconds(30)));
  EXPECT_EQ(tally_.done(grpc::StatusCode::ABORTED), 2);
  for (const Stream* s : {running_.get(), queued_.get()}) {
    // The Finished before the status says how far the request got.
    ASSERT_TRUE(s->finished().has_value()) << s->status().error_message();
    EXPECT_EQ(s->finished()->reason(), v1::FINISH_REASON_CANCELLED);
    EXPECT_GT(s->finished()->usage().prompt_tokens(), 0);
    EXPECT_NE(s->finished()->message().find("drain timeout"), std::string::npos)
        << s->finished()->message();
  }
  EXPECT_GE(running_->tokens(), 1);
  EXPECT_LT(running_->tokens(), 900);
  EXPECT_GE(running_->finished()->usage().completion_tokens(),
            running_->tokens());
  EXPECT_EQ(queued_->tokens(), 0);
  EXPECT_EQ(queued_->finished()->usage().completion_tokens(), 0);
  ASSERT_TRUE(sse_->ReadToEnd(absl::Seconds(30)));
  EXPECT_TRUE(sse_->error());
  EXPECT_FALSE(sse_->done());
  absl::StatusOr<int> code = daemon_.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << daemon_.stderr_text();
}

}  // namespace
}  // namespace paceline::server
