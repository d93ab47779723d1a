// Every limit a tenant or the server sets answers its own status, end to
// end, over gRPC and over the OpenAI HTTP API (issue 18's scenario 10): one
// table, each row a request over each transport and what it must get back
// (the gRPC code, the HTTP status, words of the message). A refused
// request holds nothing afterwards.
//
// The queue's limit (a full queue: RESOURCE_EXHAUSTED / 429 with a retry
// hint) needs the tenant's running slot and queue filled first; it has a
// test of its own below. The call lifetime is lifetime_test's, the unread
// bytes slow_reader's (storm_test), the drain drain_test's.
//
// They skip without ../shared/models.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/daemon/storm_harness.h"
#include "tests/testing/http_post.h"

namespace paceline::server {
namespace {

using ::paceline::testing::HttpPost;
using ::paceline::testing::HttpResponse;
using ::paceline::testing::MakeClientContext;
using storm::Idle;
using storm::kKey;
using storm::StormTest;
using storm::Stream;
using storm::Tally;

// The tenant's limits, and the server's 64 KiB message and body limits.
// (A request no pool could ever hold is DaemonTest's.)
constexpr char kTenantLimits[] = R"(  max_prompt_tokens: 8
  max_tokens_limit: 900
  max_running: 1
  max_queued: 1
  min_pace_tokens_per_s: 2
  max_stop_strings: 2
  max_stop_string_bytes: 16
)";
constexpr char kServerLimits[] = R"(grpc { max_message_bytes: 65536 }
)";
constexpr char kHttpLimits[] = "max_body_bytes: 65536";

// One row: the same request over both APIs and the answer each must give.
struct LimitCase {
  std::string what;
  v1::GenerateRequest grpc_request;
  std::string http_body;  // POST /v1/completions
  std::string key;        // kKey unless it tests the key
  grpc::StatusCode code;
  int http_status;
  // Words the gRPC message / the HTTP error's body must contain.
  std::string grpc_words;
  std::string http_words;
};

v1::GenerateRequest Short(const std::string& text = "Once") {
  v1::GenerateRequest r;
  r.set_text(text);
  r.mutable_stopping()->set_max_tokens(4);
  return r;
}

std::string Body(const std::string& extra, const std::string& prompt = "Once") {
  return absl::StrCat(R"({"prompt": ")", prompt, R"(", "max_tokens": 4)", extra,
                      "}");
}

std::vector<LimitCase> Cases() {
  std::vector<LimitCase> cases;
  const std::string long_prompt = "Once upon a time there was a big dog";
  cases.push_back({"prompt over max_prompt_tokens", Short(long_prompt),
                   Body("", long_prompt), kKey,
                   grpc::StatusCode::INVALID_ARGUMENT, 400, "max_prompt_tokens",
                   "max_prompt_tokens"});
  v1::GenerateRequest many = Short();
  many.mutable_stopping()->set_max_tokens(901);
  cases.push_back({"max_tokens over max_tokens_limit", many,
                   R"({"prompt": "Once", "max_tokens": 901})", kKey,
                   grpc::StatusCode::INVALID_ARGUMENT, 400, "max_tokens",
                   "max_tokens"});
  v1::GenerateRequest slow = Short();
  slow.mutable_delivery()->set_pace_tokens_per_s(1);
  cases.push_back({"pace under min_pace_tokens_per_s", slow,
                   Body(R"(, "stream": true, "pace_tokens_per_s": 1)"), kKey,
                   grpc::StatusCode::INVALID_ARGUMENT, 400,
                   "min_pace_tokens_per_s", "min_pace_tokens_per_s"});
  v1::GenerateRequest stops = Short();
  for (const char* s : {"a", "b", "c"}) stops.mutable_stopping()->add_stop(s);
  cases.push_back({"stop strings over max_stop_strings", stops,
                   Body(R"(, "stop": ["a", "b", "c"])"), kKey,
                   grpc::StatusCode::INVALID_ARGUMENT, 400, "max_stop_strings",
                   "max_stop_strings"});
  v1::GenerateRequest long_stop = Short();
  long_stop.mutable_stopping()->add_stop(std::string(17, 'x'));
  cases.push_back(
      {"a stop string over max_stop_string_bytes", long_stop,
       Body(absl::StrCat(R"(, "stop": [")", std::string(17, 'x'), R"("])")),
       kKey, grpc::StatusCode::INVALID_ARGUMENT, 400, "max_stop_string_bytes",
       "max_stop_string_bytes"});
  v1::GenerateRequest bad_top_p = Short();
  bad_top_p.mutable_sampling()->set_top_p(0);
  cases.push_back({"a sampling value out of range", bad_top_p,
                   Body(R"(, "top_p": 0)"), kKey,
                   grpc::StatusCode::INVALID_ARGUMENT, 400, "top_p", "top_p"});
  v1::GenerateRequest other_model = Short();
  other_model.set_model("no-such-model");
  cases.push_back({"a model the server does not serve", other_model,
                   Body(R"(, "model": "no-such-model")"), kKey,
                   grpc::StatusCode::NOT_FOUND, 404, "no-such-model",
                   "model_not_found"});
  const std::string big(70000, 'a');
  cases.push_back({"a message over the size limit", Short(big), Body("", big),
                   kKey, grpc::StatusCode::RESOURCE_EXHAUSTED, 413, "", ""});
  cases.push_back({"a wrong key", Short(), Body(""), "not-the-key",
                   grpc::StatusCode::UNAUTHENTICATED, 401, "", ""});
  return cases;
}

class LimitsTest : public StormTest {
 protected:
  void SetUp() override {
    StormTest::SetUp();
    if (IsSkipped()) return;
    Start("dummy:stories42m", kTenantLimits, kServerLimits, kHttpLimits);
  }
};

TEST_F(LimitsTest, EveryLimitAnswersItsOwnStatusOnBothApis) {
  for (const LimitCase& c : Cases()) {
    SCOPED_TRACE(c.what);
    v1::CompleteResponse out;
    auto ctx = MakeClientContext(c.key);
    const grpc::Status st = stub_->Complete(ctx.get(), c.grpc_request, &out);
    EXPECT_EQ(st.error_code(), c.code) << st.error_message();
    EXPECT_FALSE(st.error_message().empty());
    EXPECT_TRUE(absl::StrContains(st.error_message(), c.grpc_words))
        << st.error_message();

    const HttpResponse http =
        HttpPost(daemon_.http_port(), "/v1/completions", c.http_body, c.key);
    EXPECT_EQ(http.status, c.http_status) << http.body;
    // An OpenAI-shaped error: {"error": {"message": ..., "type": ...}}.
    EXPECT_TRUE(absl::StrContains(http.body, "\"error\"")) << http.body;
    EXPECT_TRUE(absl::StrContains(http.body, "\"message\"")) << http.body;
    EXPECT_TRUE(absl::StrContains(http.body, c.http_words)) << http.body;
  }
  // Nothing refused holds anything.
  WaitStatus(Idle, absl::Seconds(10), "idle after the refusals");
}

TEST_F(LimitsTest, AFullQueueIsRefusedWithARetryHintOnBothApis) {
  // One running (max_running 1) and one queued (max_queued 1): 900 tokens
  // take dummy:stories42m many seconds to generate (a paced stream would
  // not do: it frees its slot once generated, whatever its pace).
  Tally tally;
  v1::GenerateRequest hold = Short();  // within max_prompt_tokens
  hold.mutable_stopping()->set_max_tokens(900);
  hold.mutable_stopping()->set_ignore_eos(true);
  std::vector<std::unique_ptr<Stream>> holders;
  holders.push_back(std::make_unique<Stream>(stub_.get(), hold, &tally));
  WaitStatus(
      [](const v1::ServerStatus& s) { return s.running_sequences() == 1; },
      absl::Seconds(30), "one running");
  holders.push_back(std::make_unique<Stream>(stub_.get(), hold, &tally));
  const v1::ServerStatus full = WaitStatus(
      [](const v1::ServerStatus& s) { return s.waiting_requests() == 1; },
      absl::Seconds(30), "one queued");
  ASSERT_EQ(full.running_sequences(), 1) << storm::Describe(full);

  v1::CompleteResponse out;
  auto ctx = MakeClientContext(kKey);
  const grpc::Status st = stub_->Complete(ctx.get(), Short(), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << st.error_message();
  const auto& trailers = ctx->GetServerTrailingMetadata();
  EXPECT_NE(trailers.find("retry-after-ms"), trailers.end());

  const HttpResponse http =
      HttpPost(daemon_.http_port(), "/v1/completions", Body(""), kKey);
  EXPECT_EQ(http.status, 429) << http.body;
  EXPECT_TRUE(
      absl::StrContains(absl::AsciiStrToLower(http.headers), "retry-after-ms:"))
      << http.headers;
  EXPECT_TRUE(absl::StrContains(http.body, "\"error\"")) << http.body;

  for (auto& h : holders) h->Cancel();
  ASSERT_TRUE(tally.WaitDone(2, absl::Seconds(30)));
  WaitStatus(Idle, absl::Seconds(30), "idle after the holders left");
}

}  // namespace
}  // namespace paceline::server
