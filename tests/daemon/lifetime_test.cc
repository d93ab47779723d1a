// The maximum call lifetime (config max_stream_seconds, issue 18's streams
// that never end): a call alive that long after it was submitted is cut
// and its request cancelled, whatever stage it is in.
//
//   - A paced gRPC stream gets a Finished (CANCELLED, the usage so far,
//     a message naming the limit) and then DEADLINE_EXCEEDED.
//   - A paced SSE stream gets an error event and no [DONE].
//   - A Complete that would generate for far longer gets
//     DEADLINE_EXCEEDED.
//   - Everything they held is freed; a new call is served as usual.
//
// They skip without ../shared/models.

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/daemon/storm_harness.h"

namespace paceline::server {
namespace {

using ::paceline::testing::MakeClientContext;
using storm::Idle;
using storm::kKey;
using storm::Request;
using storm::SseStream;
using storm::StormTest;
using storm::Stream;
using storm::Tally;

class LifetimeTest : public StormTest {};

TEST_F(LifetimeTest, CallsOlderThanTheLimitAreCutAndFreed) {
  Start("dummy:stories42m", "", "max_stream_seconds: 2\n");
  // Paced at 2 tokens/s, 900 tokens would take minutes.
  Tally tally;
  Stream paced(stub_.get(), Request(900, 2), &tally);
  SseStream sse(daemon_.http_port(), 2, 900);
  ASSERT_TRUE(sse.sent());
  ASSERT_TRUE(tally.WaitAccepted(1, absl::Seconds(30)));

  // dummy:stories42m makes tens of tokens/s here: 1,000 take far longer
  // than the limit too.
  v1::GenerateRequest long_request = Request(1000, 0);
  v1::CompleteResponse answer;
  auto ctx = MakeClientContext(kKey);
  const grpc::Status complete =
      stub_->Complete(ctx.get(), long_request, &answer);
  EXPECT_EQ(complete.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << complete.error_message();
  EXPECT_NE(complete.error_message().find("max_stream_seconds"),
            std::string::npos)
      << complete.error_message();

  ASSERT_TRUE(tally.WaitDone(1, absl::Seconds(30)));
  EXPECT_EQ(paced.status().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << paced.status().error_message();
  ASSERT_TRUE(paced.finished().has_value()) << paced.status().error_message();
  EXPECT_EQ(paced.finished()->reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_NE(paced.finished()->message().find("max_stream_seconds"),
            std::string::npos)
      << paced.finished()->message();
  EXPECT_GE(paced.tokens(), 1);
  EXPECT_LT(paced.tokens(), 900);
  EXPECT_GE(paced.finished()->usage().completion_tokens(), paced.tokens());

  ASSERT_TRUE(sse.ReadToEnd(absl::Seconds(30))) << sse.head();
  EXPECT_TRUE(sse.error()) << sse.head();
  EXPECT_FALSE(sse.done());
  EXPECT_TRUE(
      daemon_.WaitForStderr("max_stream_seconds: cut", absl::Seconds(5)))
      << daemon_.stderr_text();

  WaitStatus(Idle, absl::Seconds(30), "idle after the cuts");
  // A new call lives its own lifetime.
  Tally after;
  Stream fresh(stub_.get(), Request(8, 0), &after);
  ASSERT_TRUE(after.WaitDone(1, absl::Seconds(30)));
  EXPECT_TRUE(fresh.status().ok()) << fresh.status().error_message();
  EXPECT_EQ(fresh.tokens(), 8);
}

}  // namespace
}  // namespace paceline::server
