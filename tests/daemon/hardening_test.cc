// Issue 33's probes of the running daemon, each the client that found a
// failure, made into a test that failed before its fix:
//
//   - one non-streamed request whose answer would be hundreds of MB is
//     refused before any work, naming what to lower; an answer within
//     max_response_bytes is no larger than its estimate; after a large
//     answer the daemon's RSS returns near its baseline;
//   - a body whose objects have many keys is refused at 4096 keys (it took
//     time quadratic in the keys, on the shared intake pool);
//   - a never-reading SSE client with n choices is cut when all of them
//     together pass max_unread_bytes (the limit was per choice);
//   - while one tenant sends each of these, another tenant's time to first
//     token stays within 2x its quiet value.
//
// HTTP framing (smuggling) is http_framing_test; the token budget
// scheduler's token_budget_test; the drain drain_test. They skip without
// ../shared/models.

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "paceline/v1/paceline.grpc.pb.h"
#include "server/frontend/answer_size.h"
#include "server/frontend/sha256.h"
#include "tests/daemon/storm_harness.h"
#include "tests/testing/http_post.h"
#include "tests/testing/wait_for.h"

namespace paceline::server {
namespace {

using ::paceline::testing::HttpPost;
using ::paceline::testing::HttpResponse;
using ::paceline::testing::WaitFor;
using storm::Idle;
using storm::kCheckRss;
using storm::kKey;
using storm::ReadResources;
using storm::StormTest;

using Json = nlohmann::json;

// {"prompt": [prompts x "Once upon a time"], n, max_tokens, logprobs
// (0: off)}, not streamed, every token generated.
std::string BatchBody(int prompts, int n, int max_tokens, int logprobs) {
  Json body = {{"prompt", std::vector<std::string>(prompts, "Once upon a time")},
               {"n", n},
               {"max_tokens", max_tokens},
               {"ignore_eos", true},
               {"temperature", 0.8}};
  if (logprobs > 0) body["logprobs"] = logprobs;
  return body.dump();
}

// The error object of an OpenAI error answer (a test failure if it is not
// one).
Json ErrorOf(const HttpResponse& r) {
  const Json body = Json::parse(r.body, nullptr, false);
  EXPECT_TRUE(body.is_object() && body.contains("error")) << r.body;
  return body.is_object() && body.contains("error") ? body["error"] : Json();
}

// The error's param; "" when null or absent.
std::string ParamOf(const HttpResponse& r) {
  const Json error = ErrorOf(r);
  return error.contains("param") && error["param"].is_string()
             ? error["param"].get<std::string>()
             : "";
}

// A JSON object of `n` keys "k0": 0, ... as text.
std::string KeysObject(int n) {
  std::string text = "{";
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ",", "\"k", i, "\":", i);
  }
  return text + "}";
}

class AnswerSizeTest : public StormTest {};

TEST_F(AnswerSizeTest, TheProbesBatchIsRefusedBeforeAnyWork) {
  Start(storm::kStories260KPath, "");
  const int64_t steps = Status().engine_steps();
  // The probe: 64 prompts x n 16 x 509 tokens x 20 logprobs, not streamed
  // (it built a 273 MB body and left the daemon at 1.87 GB).
  const HttpResponse r = HttpPost(daemon_.http_port(), "/v1/completions",
                                  BatchBody(64, 16, 509, 20), kKey);
  EXPECT_EQ(r.status, 400) << r.body;
  const Json error = ErrorOf(r);
  EXPECT_EQ(ParamOf(r), "logprobs") << r.body;
  EXPECT_NE(error.value("message", "").find("max_response_bytes"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(Status().engine_steps(), steps) << "no work was done for it";
}

TEST_F(AnswerSizeTest, AnAnswerWithinTheLimitIsNoLargerThanItsEstimate) {
  // 4 prompts x n 4 x 100 tokens x 5 logprobs: the estimate is exactly the
  // limit, so the request is taken; its answer must fit.
  const int64_t estimate =
      16 * 100 *
      (kAnswerTextBytesPerToken + kAnswerLogprobBytes +
       5 * kAnswerTopLogprobBytes);
  Start(storm::kStories260KPath, "",
        absl::StrCat("max_response_bytes: ", estimate, "\n"));
  const HttpResponse ok = HttpPost(daemon_.http_port(), "/v1/completions",
                                   BatchBody(4, 4, 100, 5), kKey);
  ASSERT_EQ(ok.status, 200) << ok.body.substr(0, 400);
  EXPECT_LE(static_cast<int64_t>(ok.body.size()), estimate);
  EXPECT_GT(ok.body.size(), estimate / 8) << "the answer was generated";
  // One token more each is over: logprobs are what to lower.
  const HttpResponse over = HttpPost(daemon_.http_port(), "/v1/completions",
                                     BatchBody(4, 4, 101, 5), kKey);
  EXPECT_EQ(over.status, 400) << over.body;
  EXPECT_EQ(ParamOf(over), "logprobs") << over.body;
  // Without logprobs, n is: 8 prompts x n 16 x 500 tokens x 8 bytes.
  ASSERT_GT(8 * 16 * 500 * kAnswerTextBytesPerToken, estimate);
  const HttpResponse plain = HttpPost(daemon_.http_port(), "/v1/completions",
                                      BatchBody(8, 16, 500, 0), kKey);
  EXPECT_EQ(plain.status, 400) << plain.body;
  EXPECT_EQ(ParamOf(plain), "n") << plain.body;
}

TEST_F(AnswerSizeTest, TheRssReturnsNearItsBaselineAfterALargeAnswer) {
  if (!kCheckRss) GTEST_SKIP() << "RSS grows by design under ASan";
  Start(storm::kStories260KPath, "", "max_response_bytes: 268435456\n");
  // 32 prompts x n 16 x 128 tokens x 20 logprobs: tens of MB of JSON.
  const std::string body = BatchBody(32, 16, 128, 20);
  // The baseline: after the same work streamed, which touches the same KV
  // pages and engine buffers (they stay, sized by the config) but never
  // holds the answer whole.
  Json streamed = Json::parse(body);
  streamed["stream"] = true;
  storm::SseStream warm_up(daemon_.http_port(), streamed.dump());
  ASSERT_TRUE(warm_up.sent());
  ASSERT_TRUE(warm_up.ReadToEnd(absl::Seconds(300)));
  ASSERT_TRUE(warm_up.done()) << warm_up.head();
  WaitStatus(Idle, absl::Seconds(30), "idle after the streamed warm-up");
  const int64_t baseline_kb = ReadResources(daemon_.pid()).rss_kb;
  const HttpResponse r =
      HttpPost(daemon_.http_port(), "/v1/completions", body, kKey);
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 400);
  EXPECT_GT(r.body.size(), 16u << 20);
  const int64_t answered_kb = ReadResources(daemon_.pid()).rss_kb;
  WaitStatus(Idle, absl::Seconds(30), "idle after the large answer");
  // The daemon gives free memory back once it is idle (within a second),
  // and again when more is freed after that: CI once saw the only idle
  // trim run while the finished call's answer was still being freed
  // (memory_trim_test covers that order).
  // Measured here (2026-12-06): baseline 231 MB, 448 MB with the answer
  // held; 449 MB a minute later without the trim, 266-267 MB with it.
  constexpr int64_t kBoundKb = 64 << 10;
  int64_t rss_kb = 0;
  const bool back = WaitFor(
      [&] {
        rss_kb = ReadResources(daemon_.pid()).rss_kb;
        return rss_kb <= baseline_kb + kBoundKb;
      },
      absl::Seconds(20), "the RSS back near its baseline");
  EXPECT_TRUE(back) << "baseline " << baseline_kb << " KiB, answered "
                    << answered_kb << " KiB, now " << rss_kb << " KiB";
}

class JsonLimitsTest : public StormTest {};

TEST_F(JsonLimitsTest, ObjectsWithTooManyKeysAreRefusedByName) {
  Start(storm::kStories260KPath, "");
  // The probe: 100,000 unknown top-level keys (1.1 MB) took 14 s.
  std::string body = KeysObject(100000);
  body.insert(1, R"("prompt":"Once","max_tokens":1,)");
  const HttpResponse top =
      HttpPost(daemon_.http_port(), "/v1/completions", body, kKey);
  EXPECT_EQ(top.status, 400) << top.body.substr(0, 400);
  EXPECT_NE(ErrorOf(top).value("message", "").find("more than 4096 keys"),
            std::string::npos)
      << top.body;
  // chat_template_kwargs is named as the param.
  const std::string chat = absl::StrCat(
      R"({"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":)",
      KeysObject(5000), "}");
  const HttpResponse kwargs =
      HttpPost(daemon_.http_port(), "/v1/chat/completions", chat, kKey);
  EXPECT_EQ(kwargs.status, 400) << kwargs.body.substr(0, 400);
  EXPECT_EQ(ParamOf(kwargs), "chat_template_kwargs")
      << kwargs.body;
  // 4096 keys are within the bound (the unknown ones are ignored).
  std::string within = KeysObject(4093);
  within.insert(1, R"("prompt":"Once","max_tokens":1,"temperature":0,)");
  const HttpResponse ok =
      HttpPost(daemon_.http_port(), "/v1/completions", within, kKey);
  EXPECT_EQ(ok.status, 200) << ok.body.substr(0, 400);
}

// n 16, 5 logprobs, 120 tokens each, streamed: each choice's output (about
// 14 KB as the limit counts it) stays well under 64 KiB, all of them
// together (about 220 KB) pass it with room for what the kernel's socket
// buffers take.
std::string ManyChoicesSse() {
  return R"({"prompt":"Once upon a time","stream":true,"n":16,)"
         R"("max_tokens":120,"ignore_eos":true,"logprobs":5,)"
         R"("temperature":0.8})";
}

class UnreadPerCallTest : public StormTest {};

TEST_F(UnreadPerCallTest, ANeverReadingClientWithManyChoicesIsCut) {
  Start(storm::kStories260KPath, "", "max_unread_bytes: 65536\n",
        "send_buffer_bytes: 8192");
  const int64_t steps = Status().engine_steps();
  // Sent, then not read until the engine is done with it.
  storm::SseStream reader(daemon_.http_port(), ManyChoicesSse(), 4096);
  ASSERT_TRUE(reader.sent());
  WaitStatus(
      [&](const v1::ServerStatus& s) {
        return s.running_sequences() == 0 && s.waiting_requests() == 0 &&
               s.engine_steps() > steps;
      },
      absl::Seconds(60), "the call generated, then cut or finished");
  ASSERT_TRUE(reader.ReadToEnd(absl::Seconds(30)));
  EXPECT_NE(reader.tail().find("reads too slowly"), std::string::npos)
      << reader.tail();
  EXPECT_FALSE(reader.done()) << reader.tail();
}

// Two tenants: "storm" (the attacker, kKey) and "victim".
constexpr char kVictimKey[] = "victim-key";

class FairnessUnderAttackTest : public StormTest {
 protected:
  void SetUp() override {
    StormTest::SetUp();
    if (IsSkipped()) return;
    Start(storm::kStories260KPath, "",
          absl::StrCat("max_unread_bytes: 65536\n"
                       "tenants { name: \"victim\" api_key_sha256: \"",
                       Sha256Hex(kVictimKey), "\" }\n"),
          "send_buffer_bytes: 8192");
    victim_ = v1::Paceline::NewStub(daemon_.Channel());
  }

  // The victim's time to its first token for one short request.
  absl::Duration VictimTtft() {
    auto ctx =
        paceline::testing::MakeClientContext(kVictimKey, absl::Seconds(60));
    const absl::Time sent = absl::Now();
    auto reader = victim_->Generate(ctx.get(), storm::Request(2, 0));
    v1::GenerateResponse response;
    absl::Duration ttft = absl::InfiniteDuration();
    while (reader->Read(&response)) {
      if (response.has_delta() && ttft == absl::InfiniteDuration()) {
        ttft = absl::Now() - sent;
      }
    }
    EXPECT_TRUE(reader->Finish().ok());
    return ttft;
  }

  // The victim's times to first token, sorted, for requests sent one
  // after another until `more` is false (at least `min_count`).
  template <typename More>
  std::vector<absl::Duration> VictimTtfts(int min_count, More more) {
    std::vector<absl::Duration> ttfts;
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while ((static_cast<int>(ttfts.size()) < min_count || more()) &&
           absl::Now() < deadline) {
      ttfts.push_back(VictimTtft());
    }
    std::sort(ttfts.begin(), ttfts.end());
    return ttfts;
  }

  // The `percent` quantile of sorted durations (nearest rank).
  static absl::Duration Quantile(const std::vector<absl::Duration>& sorted,
                                 int percent) {
    const size_t rank = (sorted.size() * percent + 99) / 100;
    return sorted[std::max<size_t>(rank, 1) - 1];
  }

  // Every abusive request of the probe, once each, as the attacker (its
  // bodies made once: the test's own CPU time would slow the daemon on 2
  // cores).
  void AttackOnce() {
    const int port = daemon_.http_port();
    HttpPost(port, "/v1/completions", batch_body_, kKey);
    HttpPost(port, "/v1/completions", keys_body_, kKey);
    paceline::testing::HttpRaw(
        port,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
        "xchunked\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n"
        "Connection: close\r\n\r\n");
    storm::SseStream reader(port, ManyChoicesSse(), 4096);
    absl::SleepFor(absl::Milliseconds(300));  // then it goes away
  }

  const std::string batch_body_ = BatchBody(64, 16, 509, 20);
  const std::string keys_body_ = [] {
    std::string keys = KeysObject(100000);
    keys.insert(1, R"("prompt":"Once","max_tokens":1,)");
    return keys;
  }();
  std::unique_ptr<v1::Paceline::Stub> victim_;
};

TEST_F(FairnessUnderAttackTest, TheVictimsTtftStaysWithinTwiceItsQuietValue) {
  VictimTtfts(5, [] { return false; });  // warm-up
  const auto quiet = VictimTtfts(30, [] { return false; });
  // Rounds of every abuse, each followed by a pause: what one client
  // sends, not a busy loop competing for the cores. The victim keeps
  // asking until three rounds have run beside it.
  std::atomic<bool> stop = false;
  std::atomic<int> rounds = 0;
  std::thread attacker([&] {
    while (!stop) {
      AttackOnce();
      ++rounds;
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  const auto attacked = VictimTtfts(30, [&] { return rounds < 3; });
  stop = true;
  attacker.join();
  EXPECT_GE(rounds, 3);
  // What the attack did before the fixes: the key-laden body held the
  // intake pool for 14 s and the batch filled the engine for a minute, so
  // most of the victim's requests waited seconds. The median stays within
  // 2x, or 250 ms more: on 2 cores the attacker's requests (a 1.1 MB body
  // read and refused, a batch refused, 16 sequences until they are cut)
  // share the cores with the victim's. The slowest request may meet the
  // other tests' processes on a loaded CI machine (one took 312 ms against
  // a quiet 4 ms, 2026-12-07), so it gets seconds, not milliseconds: a
  // stall of the old kind still breaks it. Measured here (2026-12-06,
  // stories260K): quiet p99 0.6-2.4 ms, under attack 9-14 ms.
  const absl::Duration quiet_median = Quantile(quiet, 50);
  const absl::Duration attacked_median = Quantile(attacked, 50);
  EXPECT_LE(attacked_median,
            std::max(2 * quiet_median, quiet_median + absl::Milliseconds(250)))
      << "median quiet " << quiet_median << ", under attack "
      << attacked_median;
  EXPECT_LE(Quantile(attacked, 99), Quantile(quiet, 99) + absl::Seconds(3))
      << "p99 quiet " << Quantile(quiet, 99) << ", under attack "
      << Quantile(attacked, 99);
}

}  // namespace
}  // namespace paceline::server
