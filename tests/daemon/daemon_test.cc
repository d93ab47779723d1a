// Integration tests against the real pacelined (a child process on a
// loopback port) with the real C++ gRPC client: the stories260K oracle
// through Generate and Complete, concurrency, pacing, auth, limits,
// cancellation and drain. They skip when ../shared/models is absent.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "server/frontend/sha256.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/stories260k_oracle.h"
#include "tests/testing/wait_for.h"

namespace paceline::server {
namespace {

using ::paceline::testing::DaemonProcess;
using ::paceline::testing::HaveStories260K;
using ::paceline::testing::kGreedy64Text;
using ::paceline::testing::kStories260KPath;
using ::paceline::testing::MakeClientContext;
using ::paceline::testing::ReadFile;
using ::paceline::testing::WaitFor;
using ::paceline::testing::WriteFile;

constexpr char kAliceKey[] = "alice-test-key";
constexpr char kBobKey[] = "bob-test-key";

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

// What one Generate stream delivered.
struct StreamResult {
  grpc::Status status;
  v1::Accepted accepted;
  std::string text;
  std::vector<int32_t> ids;
  absl::Time started;                      // client clock, before the call
  std::vector<absl::Time> delta_arrivals;  // client clock
  bool finished = false;
  v1::Finished finish;
};

StreamResult RunGenerate(v1::Paceline::Stub& stub, const std::string& key,
                         const v1::GenerateRequest& request,
                         grpc::ClientContext* context = nullptr) {
  std::unique_ptr<grpc::ClientContext> own;
  if (context == nullptr) {
    own = MakeClientContext(key, absl::Seconds(60));
    context = own.get();
  }
  StreamResult out;
  out.started = absl::Now();
  auto reader = stub.Generate(context, request);
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
    if (r.has_accepted()) out.accepted = r.accepted();
    if (r.has_delta()) {
      out.text += r.delta().text();
      out.ids.insert(out.ids.end(), r.delta().token_ids().begin(),
                     r.delta().token_ids().end());
      out.delta_arrivals.push_back(absl::Now());
    }
    if (r.has_finished()) {
      out.finished = true;
      out.finish = r.finished();
    }
  }
  out.status = reader->Finish();
  return out;
}

v1::GenerateRequest Greedy(const std::string& prompt, int32_t max_tokens) {
  v1::GenerateRequest r;
  r.set_text(prompt);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(max_tokens);
  return r;
}

v1::ServerStatus Status(v1::Paceline::Stub& stub, const std::string& key) {
  v1::ServerStatus status;
  auto ctx = MakeClientContext(key);
  const grpc::Status st = stub.GetServerStatus(ctx.get(), {}, &status);
  EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  return status;
}

// Polls GetServerStatus until `done` holds (the load it reports is the
// engine thread's last publication, one step old at most), failing the test
// with `what` if it does not within `timeout`; returns the last status.
template <typename Pred>
v1::ServerStatus WaitStatus(v1::Paceline::Stub& stub, const std::string& key,
                            Pred done, absl::Duration timeout,
                            absl::string_view what) {
  v1::ServerStatus s;
  EXPECT_TRUE(WaitFor(
      [&] {
        s = Status(stub, key);
        return done(s);
      },
      timeout, what));
  return s;
}

// Polls until no KV block is in use, nothing runs and nothing waits (the
// baseline of an idle server); returns the last status.
v1::ServerStatus WaitKvIdle(v1::Paceline::Stub& stub, const std::string& key,
                            absl::Duration timeout) {
  return WaitStatus(
      stub, key,
      [](const v1::ServerStatus& s) {
        return s.kv_cache().used_blocks() == 0 && s.running_sequences() == 0 &&
               s.waiting_requests() == 0;
      },
      timeout, "an idle server: no KV blocks used, nothing running or waiting");
}

using HealthStatus = grpc::health::v1::HealthCheckResponse;

// The standard health service (no key needed).
HealthStatus::ServingStatus Health(
    const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status st = stub->Check(&ctx, {}, &response);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return response.status();
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  }
  // A failed test shows what the daemon said (a sanitizer's report, too).
  void TearDown() override {
    if (HasFailure()) std::cerr << "pacelined:\n" << daemon_.stderr_text();
  }

  // Starts pacelined on stories260K (or `model`) with tenants alice and bob
  // plus `extra` flags.
  void Start(std::vector<std::string> extra = {},
             const std::string& model = kStories260KPath) {
    std::vector<std::string> args = {
        "--model",     model,
        "--listen",    "127.0.0.1:0",
        "--tenant",    absl::StrCat("alice:", kAliceKey),
        "--tenant",    absl::StrCat("bob:", kBobKey),
        "--allow-root"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(daemon_.Start(args).ok());
    stub_ = v1::Paceline::NewStub(daemon_.Channel());
  }

  // Writes `text` to a config file and returns its path.
  std::string WriteConfig(const std::string& text) {
    return WriteFile("pacelined.textproto", text);
  }

  DaemonProcess daemon_;
  std::unique_ptr<v1::Paceline::Stub> stub_;
};

TEST_F(DaemonTest, StreamedAndUnaryGiveTheOracleContinuation) {
  Start();
  const v1::GenerateRequest request = Greedy("Once upon a time", 64);
  StreamResult streamed = RunGenerate(*stub_, kAliceKey, request);
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
  EXPECT_EQ(streamed.text, kGreedy64Text);
  EXPECT_EQ(streamed.ids, ::paceline::testing::kGreedy64Ids);
  EXPECT_EQ(streamed.accepted.prompt_tokens(), 5);
  EXPECT_GT(streamed.accepted.request_id(), 0u);
  ASSERT_TRUE(streamed.finished);
  EXPECT_EQ(streamed.finish.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(streamed.finish.usage().completion_tokens(), 64);
  EXPECT_EQ(streamed.finish.usage().prompt_tokens(), 5);

  v1::CompleteResponse unary;
  auto ctx = MakeClientContext(kBobKey);
  grpc::Status st = stub_->Complete(ctx.get(), request, &unary);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(unary.text(), streamed.text);
  EXPECT_EQ(
      std::vector<int32_t>(unary.token_ids().begin(), unary.token_ids().end()),
      streamed.ids);
  EXPECT_EQ(unary.finished().reason(), v1::FINISH_REASON_LENGTH);
}

// A 7,000-byte model name is refused with NOT_FOUND and echoed cut short.
TEST_F(DaemonTest, ALongModelNameIsNotEchoedWhole) {
  Start();
  v1::GenerateRequest request = Greedy("Once upon a time", 2);
  request.set_model(std::string(7000, 'm'));
  auto ctx = MakeClientContext(kAliceKey);
  v1::CompleteResponse unary;
  const grpc::Status st = stub_->Complete(ctx.get(), request, &unary);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LT(st.error_message().size(), 300u) << st.error_message();
  EXPECT_NE(st.error_message().find("(7000 bytes)"), std::string::npos)
      << st.error_message();
}

// Text longer than any prompt could be is refused by its size, by
// Tokenize and by Generate, before it is encoded.
TEST_F(DaemonTest, OversizedTextIsRefusedBeforeEncoding) {
  Start();
  const std::string big(100000, 'a');  // stories260K: 512-token context
  v1::TokenizeRequest tokenize;
  tokenize.set_text(big);
  v1::TokenizeResponse tokens;
  auto ctx = MakeClientContext(kAliceKey);
  grpc::Status st = stub_->Tokenize(ctx.get(), tokenize, &tokens);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("text has 100000 bytes, more than"),
            std::string::npos)
      << st.error_message();
  v1::CompleteResponse out;
  auto ctx2 = MakeClientContext(kAliceKey);
  st = stub_->Complete(ctx2.get(), Greedy(big, 2), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("input has 100000 bytes, more than"),
            std::string::npos)
      << st.error_message();
  tokenize.set_text("Once upon a time");
  auto ctx3 = MakeClientContext(kAliceKey);
  EXPECT_TRUE(stub_->Tokenize(ctx3.get(), tokenize, &tokens).ok());
  EXPECT_GT(tokens.token_ids_size(), 1);
}

TEST_F(DaemonTest, SixteenConcurrentStreamsEachMatchTheirSoloRun) {
  Start();
  std::vector<std::string> prompts;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(absl::StrCat(
        i % 2 ? "Once upon a time" : "The little dog", std::string(i % 5, ' '),
        i % 3 ? " saw a bird" : " was happy", i % 4 == 0 ? " and ran" : ""));
  }
  std::vector<std::string> solo(16);
  for (int i = 0; i < 16; ++i) {
    v1::CompleteResponse r;
    auto ctx = MakeClientContext(kAliceKey);
    ASSERT_TRUE(stub_->Complete(ctx.get(), Greedy(prompts[i], 48), &r).ok());
    solo[i] = r.text();
  }
  std::vector<StreamResult> together(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      together[i] = RunGenerate(*stub_, i % 2 ? kAliceKey : kBobKey,
                                Greedy(prompts[i], 48));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    EXPECT_EQ(together[i].text, solo[i])
        << "prompt " << i << ": " << prompts[i];
  }
}

// 40 tokens at 20 tokens/s, one at once (the default burst): token k is
// released no earlier than k / 20 s after the request was queued, so the
// last one reaches the client at least 1.95 s after it, while generation is
// done before delivery ends (the slot and KV were freed at once). Only the
// bounds pacing guarantees are asserted, from the server's own timings and
// the client's receive times; a loaded machine only stretches the rest.
TEST_F(DaemonTest, PacedStreamIsDeliveredAtItsPace) {
  Start();
  v1::GenerateRequest request = Greedy("Once upon a time", 40);
  request.mutable_stopping()->set_ignore_eos(true);
  request.mutable_delivery()->set_pace_tokens_per_s(20);
  StreamResult r = RunGenerate(*stub_, kAliceKey, request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.ids.size(), 40u);
  const v1::Timings& t = r.finish.timings();
  const absl::Duration kPaced = absl::Milliseconds(39 * 50);
  EXPECT_GE(ToTime(t.last_delivered()) - ToTime(t.queued()), kPaced);
  EXPECT_LT(ToTime(t.generation_done()), ToTime(t.last_delivered()));
  EXPECT_LE(ToTime(t.first_delivered()), ToTime(t.last_delivered()));
  // The client saw it paced too: its last token came no sooner, and in
  // many deltas, not one burst (a slow reader's deltas may merge a few).
  ASSERT_GE(r.delta_arrivals.size(), 20u);
  EXPECT_GE(r.delta_arrivals.back() - r.started, kPaced);
  // And nothing is held after the stream ends.
  EXPECT_EQ(
      WaitKvIdle(*stub_, kAliceKey, absl::Seconds(1)).kv_cache().used_blocks(),
      0);
}

TEST_F(DaemonTest, AuthenticationAndOwnership) {
  Start();
  v1::ServerStatus status;
  {
    grpc::ClientContext ctx;  // no key
    EXPECT_EQ(stub_->GetServerStatus(&ctx, {}, &status).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto ctx = MakeClientContext("not-a-key");
    EXPECT_EQ(stub_->GetServerStatus(ctx.get(), {}, &status).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto ctx = MakeClientContext("not-a-key");
    StreamResult r = RunGenerate(*stub_, "", Greedy("Once", 4), ctx.get());
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_FALSE(r.finished);
  }
  // A status call sees only the caller's tenant.
  status = Status(*stub_, kBobKey);
  ASSERT_EQ(status.tenants_size(), 1);
  EXPECT_EQ(status.tenants(0).tenant(), "bob");

  // Alice's paced request cannot be cancelled by bob, only by alice.
  v1::GenerateRequest request = Greedy("Once upon a time", 60);
  request.mutable_stopping()->set_ignore_eos(true);
  request.mutable_delivery()->set_pace_tokens_per_s(10);
  auto ctx = MakeClientContext(kAliceKey);
  auto reader = stub_->Generate(ctx.get(), request);
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  ASSERT_TRUE(first.has_accepted());
  v1::CancelRequest cancel;
  cancel.set_request_id(first.accepted().request_id());
  v1::CancelResponse cancelled;
  {
    auto bob = MakeClientContext(kBobKey);
    EXPECT_EQ(stub_->Cancel(bob.get(), cancel, &cancelled).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    auto alice = MakeClientContext(kAliceKey);
    EXPECT_TRUE(stub_->Cancel(alice.get(), cancel, &cancelled).ok());
  }
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// Each limit answers with its own status before any KV is allocated.
TEST_F(DaemonTest, TenantLimitsAnswerWithTheirStatus) {
  // dummy:stories42m: byte-level tokens, and slow enough that a long
  // request is still generating while the test fills the queue.
  const std::string config =
      WriteConfig(absl::StrCat(R"(
model { path: "dummy:stories42m" }
listen: "127.0.0.1:0"
tenants {
  name: "small"
  api_key_sha256: ")",
                               Sha256Hex("small-key"), R"("
  max_prompt_tokens: 8
  max_tokens_limit: 600
  max_running: 1
  max_queued: 1
}
)"));
  ASSERT_TRUE(daemon_.Start({"--config", config, "--allow-root"}).ok())
      << daemon_.stderr_text();
  stub_ = v1::Paceline::NewStub(daemon_.Channel());
  const std::string key = "small-key";
  v1::CompleteResponse out;
  {
    auto ctx = MakeClientContext(key);
    grpc::Status st = stub_->Complete(
        ctx.get(), Greedy("Once upon a time there was a big dog", 4), &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("max_prompt_tokens"), std::string::npos)
        << st.error_message();
  }
  {
    auto ctx = MakeClientContext(key);
    grpc::Status st = stub_->Complete(ctx.get(), Greedy("Once", 601), &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("max_tokens"), std::string::npos);
  }
  {
    auto ctx = MakeClientContext(key);
    v1::GenerateRequest bad = Greedy("Once", 4);
    bad.mutable_sampling()->set_top_p(0);
    grpc::Status st = stub_->Complete(ctx.get(), bad, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("sampling.top_p"), std::string::npos);
  }
  {
    auto ctx = MakeClientContext(key);
    v1::GenerateRequest none;  // no input
    grpc::Status st = stub_->Complete(ctx.get(), none, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("input"), std::string::npos);
  }
  EXPECT_EQ(Status(*stub_, key).kv_cache().used_blocks(), 0);

  // One running and one queued fill the tenant (max_running 1,
  // max_queued 1); the next is refused with a retry hint.
  v1::GenerateRequest long_run = Greedy("Once", 600);
  long_run.mutable_stopping()->set_ignore_eos(true);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>>
      readers;
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(MakeClientContext(key));
    readers.push_back(stub_->Generate(contexts.back().get(), long_run));
    v1::GenerateResponse accepted;
    ASSERT_TRUE(readers.back()->Read(&accepted)) << "request " << i;
    ASSERT_TRUE(accepted.has_accepted());
    if (i == 0) {
      // Accepted means queued: until the scheduler admits it, it holds
      // the tenant's one queue place, and the second would be refused
      // (seen under ASan on a loaded machine).
      WaitStatus(
          *stub_, key,
          [](const v1::ServerStatus& s) { return s.running_sequences() == 1; },
          absl::Seconds(20), "the first request running");
    }
  }
  const v1::ServerStatus full = WaitStatus(
      *stub_, key,
      [](const v1::ServerStatus& s) { return s.waiting_requests() == 1; },
      absl::Seconds(2), "one waiting request");
  EXPECT_EQ(full.running_sequences(), 1);
  EXPECT_EQ(full.waiting_requests(), 1);
  auto ctx = MakeClientContext(key);
  grpc::Status st = stub_->Complete(ctx.get(), Greedy("Once", 4), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << st.error_message();
  const auto& trailers = ctx->GetServerTrailingMetadata();
  EXPECT_NE(trailers.find("retry-after-ms"), trailers.end());
  for (auto& c : contexts) c->TryCancel();
  EXPECT_EQ(WaitKvIdle(*stub_, key, absl::Seconds(1)).kv_cache().used_blocks(),
            0);
  for (auto& r : readers) {
    v1::GenerateResponse ignored;
    while (r->Read(&ignored)) {
    }
    r->Finish();
  }
}

// A client that goes away mid-stream, or while its request is queued: the
// request is aborted and its blocks come back within a second.
TEST_F(DaemonTest, CancellationReturnsKvBlocks) {
  // A model slow enough that generation is still running when we cancel.
  Start({"--max-batched-tokens", "64"}, "dummy:stories42m");
  const v1::ServerStatus idle = Status(*stub_, kAliceKey);
  ASSERT_EQ(idle.kv_cache().used_blocks(), 0);

  v1::GenerateRequest long_run = Greedy("Once upon a time", 900);
  long_run.mutable_stopping()->set_ignore_eos(true);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>>
      readers;
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(MakeClientContext(kAliceKey));
    readers.push_back(stub_->Generate(contexts.back().get(), long_run));
    v1::GenerateResponse r;
    ASSERT_TRUE(readers.back()->Read(&r));  // accepted
    ASSERT_TRUE(readers.back()->Read(&r));  // a first delta: running
    ASSERT_TRUE(r.has_delta());
  }
  const v1::ServerStatus busy = WaitStatus(
      *stub_, kAliceKey,
      [](const v1::ServerStatus& s) { return s.running_sequences() == 2; },
      absl::Seconds(1), "two running sequences");
  EXPECT_EQ(busy.running_sequences(), 2);
  EXPECT_GT(busy.kv_cache().used_blocks(), 0);

  contexts[0]->TryCancel();
  EXPECT_EQ(
      WaitStatus(
          *stub_, kAliceKey,
          [](const v1::ServerStatus& s) { return s.running_sequences() == 1; },
          absl::Seconds(1), "one running sequence")
          .running_sequences(),
      1);
  contexts[1]->TryCancel();
  const v1::ServerStatus after =
      WaitKvIdle(*stub_, kAliceKey, absl::Seconds(1));
  EXPECT_EQ(after.kv_cache().used_blocks(), 0);
  EXPECT_EQ(after.running_sequences(), 0);
  for (auto& r : readers) {
    v1::GenerateResponse ignored;
    while (r->Read(&ignored)) {
    }
    EXPECT_EQ(r->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
}

TEST_F(DaemonTest, CancellingAQueuedRequestLeavesTheQueue) {
  const std::string config = WriteConfig(absl::StrCat(R"(
model { path: "dummy:stories42m" }
listen: "127.0.0.1:0"
scheduler { max_running: 1 }
tenants { name: "t" api_key_sha256: ")",
                                                      Sha256Hex("k"), R"(" }
)"));
  ASSERT_TRUE(daemon_.Start({"--config", config, "--allow-root"}).ok())
      << daemon_.stderr_text();
  stub_ = v1::Paceline::NewStub(daemon_.Channel());
  v1::GenerateRequest long_run = Greedy("Once upon a time", 900);
  long_run.mutable_stopping()->set_ignore_eos(true);
  auto running_ctx = MakeClientContext("k");
  auto running = stub_->Generate(running_ctx.get(), long_run);
  v1::GenerateResponse r;
  ASSERT_TRUE(running->Read(&r));
  ASSERT_TRUE(running->Read(&r));  // generating
  auto queued_ctx = MakeClientContext("k");
  auto queued = stub_->Generate(queued_ctx.get(), long_run);
  ASSERT_TRUE(queued->Read(&r));
  ASSERT_TRUE(r.has_accepted());
  const v1::ServerStatus s = WaitStatus(
      *stub_, "k",
      [](const v1::ServerStatus& s) { return s.waiting_requests() == 1; },
      absl::Seconds(2), "one waiting request");
  EXPECT_EQ(s.waiting_requests(), 1);
  queued_ctx->TryCancel();
  while (queued->Read(&r)) {
  }
  EXPECT_EQ(queued->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(
      WaitStatus(
          *stub_, "k",
          [](const v1::ServerStatus& s) { return s.waiting_requests() == 0; },
          absl::Seconds(1), "no waiting request")
          .waiting_requests(),
      0);
  running_ctx->TryCancel();
  EXPECT_EQ(WaitKvIdle(*stub_, "k", absl::Seconds(1)).kv_cache().used_blocks(),
            0);
}

// SIGTERM while paced streams are delivering: they complete, new calls
// are refused, and the daemon exits 0.
TEST_F(DaemonTest, SigtermDrainsInFlightStreams) {
  Start();
  v1::GenerateRequest paced = Greedy("Once upon a time", 20);
  paced.mutable_stopping()->set_ignore_eos(true);
  paced.mutable_delivery()->set_pace_tokens_per_s(20);  // ~1 s each
  std::vector<StreamResult> results(3);
  std::atomic<int> accepted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      results[i] = RunGenerate(*stub_, kAliceKey, paced);
      accepted++;
    });
  }
  // Wait until all three are accepted and delivering.
  EXPECT_TRUE(
      WaitFor([&] { return Status(*stub_, kAliceKey).paced_streams() >= 3; },
              absl::Seconds(10), "three paced streams delivering"));
  EXPECT_EQ(Health(daemon_.Channel()), HealthStatus::SERVING);
  ASSERT_TRUE(daemon_.Signal(SIGTERM).ok());
  ASSERT_TRUE(daemon_.WaitForStderr("draining", absl::Seconds(5)));
  EXPECT_EQ(Health(daemon_.Channel()), HealthStatus::NOT_SERVING);
  {
    v1::CompleteResponse out;
    auto ctx = MakeClientContext(kAliceKey);
    EXPECT_EQ(stub_->Complete(ctx.get(), Greedy("Once", 4), &out).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  for (std::thread& t : threads) t.join();
  for (const StreamResult& r : results) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.ids.size(), 20u);
    EXPECT_EQ(r.finish.reason(), v1::FINISH_REASON_LENGTH);
  }
  absl::StatusOr<int> code = daemon_.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << daemon_.stderr_text();
}

// The prefix cache is per tenant: a tenant's repeated prompt finds its
// own cached blocks; another tenant's identical prompt finds none, even
// when its request names the first tenant as cache_salt (ignored).
TEST_F(DaemonTest, PrefixCacheIsIsolatedBetweenTenants) {
  Start();
  // 40 tokens: two full blocks of 16 can be cached.
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to "
      "play outside in the park with her friends.";
  v1::GenerateRequest request = Greedy(prompt, 4);
  StreamResult first = RunGenerate(*stub_, kAliceKey, request);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_GE(first.accepted.prompt_tokens(), 33);
  EXPECT_EQ(first.accepted.cached_prompt_tokens(), 0);
  StreamResult again = RunGenerate(*stub_, kAliceKey, request);
  EXPECT_GE(again.accepted.cached_prompt_tokens(), 32);
  EXPECT_EQ(again.finish.usage().cached_prompt_tokens(),
            again.accepted.cached_prompt_tokens());
  request.set_cache_salt("alice");
  StreamResult other = RunGenerate(*stub_, kBobKey, request);
  EXPECT_EQ(other.accepted.cached_prompt_tokens(), 0);
  EXPECT_EQ(other.finish.usage().cached_prompt_tokens(), 0);
  EXPECT_EQ(other.text, first.text);
}

// A model that cannot be loaded stops start-up with its path and the
// reason, before anything listens.
TEST(DaemonStartupTest, BadModelFailsStartupWithWhatAndWhere) {
  const std::string path =
      WriteFile("not_a_model.gguf", "this is not a GGUF file");
  DaemonProcess daemon;
  absl::Status st = daemon.Start({"--model", path, "--listen", "127.0.0.1:0",
                                  "--tenant", "a:k", "--allow-root"},
                                 absl::Seconds(30));
  EXPECT_FALSE(st.ok());
  absl::StatusOr<int> code = daemon.WaitExit(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 1);
  EXPECT_NE(daemon.stderr_text().find(path), std::string::npos)
      << daemon.stderr_text();
  EXPECT_EQ(daemon.stderr_text().find("listening"), std::string::npos);
}

// A second daemon on an address another one holds stops start-up (gRPC
// would otherwise share the port by SO_REUSEPORT and split the
// connections between them), and so does one on a taken HTTP port.
TEST(DaemonStartupTest, ATakenPortFailsStartup) {
  DaemonProcess first;
  ASSERT_TRUE(first
                  .Start({"--model", "dummy:stories15m", "--listen",
                          "127.0.0.1:0", "--tenant", "a:k", "--allow-root"})
                  .ok())
      << first.stderr_text();
  ASSERT_GT(first.http_port(), 0);
  const struct {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"--listen", first.address()}, "cannot listen on " + first.address()},
      {{"--listen", "127.0.0.1:0", "--http-listen",
        absl::StrCat("127.0.0.1:", first.http_port())},
       absl::StrCat("127.0.0.1:", first.http_port())},
  };
  for (const auto& c : cases) {
    DaemonProcess second;
    std::vector<std::string> args = {"--model", "dummy:stories15m", "--tenant",
                                     "b:k", "--allow-root"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    EXPECT_FALSE(second.Start(args, absl::Seconds(30)).ok());
    EXPECT_EQ(second.WaitExit(absl::Seconds(30)).value_or(-1), 1)
        << second.stderr_text();
    EXPECT_NE(second.stderr_text().find(c.says), std::string::npos)
        << second.stderr_text();
    EXPECT_EQ(second.stderr_text().find("pacelined: ready"), std::string::npos);
  }
  EXPECT_EQ(first.Drain().value_or(-1), 0) << first.stderr_text();
}

// The daemon runs as an unprivileged user without --allow-root (as the
// systemd unit's DynamicUser and the container's non-root user run it):
// under root the test starts it through setpriv as nobody (65534).
TEST(DaemonStartupTest, RunsAsAnUnprivilegedUser) {
  std::vector<std::string> args = {
      "--model",       "dummy:stories15m", "--listen", "127.0.0.1:0",
      "--http-listen", "127.0.0.1:0",      "--tenant", "a:k"};
  std::string binary = ::paceline::testing::PacelinedPath();
  if (geteuid() == 0) {
    const std::string setpriv =
        "setpriv --reuid=65534 --regid=65534 --clear-groups --";
    if (std::system((setpriv + " test -x " + binary).c_str()) != 0) {
      GTEST_SKIP() << "nobody cannot run " << binary
                   << " (a parent folder is private)";
    }
    args.insert(args.begin(), {"--reuid=65534", "--regid=65534",
                               "--clear-groups", "--", binary});
    binary = "/usr/bin/setpriv";
  }
  DaemonProcess daemon(binary);
  ASSERT_TRUE(daemon.Start(args).ok()) << daemon.stderr_text();
  std::ifstream status(absl::StrCat("/proc/", daemon.pid(), "/status"));
  std::string line, uid;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "Uid:")) uid = line;
  }
  EXPECT_NE(uid, "") << "no Uid line";
  EXPECT_EQ(uid.find("\t0\t"), std::string::npos) << uid;  // not root
  auto stub = v1::Paceline::NewStub(daemon.Channel());
  v1::CompleteResponse out;
  auto ctx = MakeClientContext("k");
  EXPECT_TRUE(stub->Complete(ctx.get(), Greedy("Once", 2), &out).ok());
  EXPECT_EQ(daemon.Drain().value_or(-1), 0) << daemon.stderr_text();
}

// Runs a shell command; true when it exits 0.
bool Shell(const std::string& command) {
  return std::system(command.c_str()) == 0;
}

// TLS, then mutual TLS, with certificates made by openssl for the test.
TEST_F(DaemonTest, ServesTlsAndMutualTls) {
  const std::string dir = ::paceline::testing::MakeTempDir("pacelined_tls_");
  ASSERT_FALSE(dir.empty());
  const std::string quiet = " >/dev/null 2>&1";
  // A CA, a server certificate for 127.0.0.1 and a client certificate.
  ASSERT_TRUE(Shell(absl::StrCat(
      "cd ", dir,
      " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-ca "
      "-keyout ca.key -out ca.pem",
      quiet,
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=localhost "
      "-keyout server.key -out server.csr",
      quiet,
      " && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext"
      " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -days 2 -extfile san.ext -out server.pem",
      quiet,
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=client "
      "-keyout client.key -out client.csr",
      quiet,
      " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -days 2 -out client.pem",
      quiet,
      // A client certificate from another CA, which the server must refuse.
      " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
      "-subj /CN=rogue-ca -keyout rogue-ca.key -out rogue-ca.pem",
      quiet,
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=client "
      "-keyout rogue.key -out rogue.csr",
      quiet,
      " && openssl x509 -req -in rogue.csr -CA rogue-ca.pem -CAkey "
      "rogue-ca.key "
      "-CAcreateserial -days 2 -out rogue.pem",
      quiet)))
      << "openssl failed";
  // HTTPS on the daemon's HTTP port (it takes the gRPC `tls` unless
  // http.tls is set): curl's exit status, with the given client files.
  const auto https = [&](int port, const std::string& client) {
    return Shell(absl::StrCat(
        "curl -sf --max-time 10 --cacert ", dir, "/ca.pem ",
        client.empty() ? ""
                       : absl::StrCat("--cert ", dir, "/", client,
                                      ".pem --key ", dir, "/", client, ".key "),
        "https://127.0.0.1:", port, "/health", quiet));
  };
  const auto config = [&](bool mutual) {
    return WriteConfig(absl::StrCat(
        "model { path: \"", kStories260KPath, "\" }\n",
        "listen: \"127.0.0.1:0\"\n", "tls { cert_file: \"", dir,
        "/server.pem\" key_file: \"", dir, "/server.key\"",
        mutual ? absl::StrCat(" client_ca_file: \"", dir, "/ca.pem\"") : "",
        " }\n", "tenants { name: \"t\" api_key_sha256: \"", Sha256Hex("k"),
        "\" }\n"));
  };
  const auto complete = [&](const std::string& address,
                            grpc::SslCredentialsOptions options) {
    options.pem_root_certs = ReadFile(dir + "/ca.pem");
    auto stub = v1::Paceline::NewStub(
        grpc::CreateChannel(address, grpc::SslCredentials(options)));
    v1::CompleteResponse out;
    auto ctx = MakeClientContext("k", absl::Seconds(10));
    grpc::Status st =
        stub->Complete(ctx.get(), Greedy("Once upon a time", 64), &out);
    if (st.ok()) {
      EXPECT_EQ(out.text(), kGreedy64Text);
    }
    return st;
  };
  {
    DaemonProcess tls;
    ASSERT_TRUE(tls.Start({"--config", config(false), "--allow-root"}).ok())
        << tls.stderr_text();
    EXPECT_NE(tls.stderr_text().find("TLS: on"), std::string::npos);
    grpc::Status st = complete(tls.address(), {});
    EXPECT_TRUE(st.ok()) << st.error_message();
    ASSERT_GT(tls.http_port(), 0);
    EXPECT_TRUE(https(tls.http_port(), ""));
    // A plaintext client gets nowhere.
    auto plain = v1::Paceline::NewStub(tls.Channel());
    v1::CompleteResponse out;
    auto ctx = MakeClientContext("k", absl::Seconds(5));
    EXPECT_FALSE(plain->Complete(ctx.get(), Greedy("Once", 4), &out).ok());
  }
  {
    DaemonProcess mtls;
    ASSERT_TRUE(mtls.Start({"--config", config(true), "--allow-root"}).ok())
        << mtls.stderr_text();
    EXPECT_FALSE(complete(mtls.address(), {}).ok());  // no client certificate
    grpc::SslCredentialsOptions with_cert;
    with_cert.pem_private_key = ReadFile(dir + "/client.key");
    with_cert.pem_cert_chain = ReadFile(dir + "/client.pem");
    grpc::Status st = complete(mtls.address(), with_cert);
    EXPECT_TRUE(st.ok()) << st.error_message();
    grpc::SslCredentialsOptions rogue;  // a certificate from another CA
    rogue.pem_private_key = ReadFile(dir + "/rogue.key");
    rogue.pem_cert_chain = ReadFile(dir + "/rogue.pem");
    EXPECT_FALSE(complete(mtls.address(), rogue).ok());
    // HTTPS asks for the client certificate too.
    EXPECT_FALSE(https(mtls.http_port(), ""));
    EXPECT_FALSE(https(mtls.http_port(), "rogue"));
    EXPECT_TRUE(https(mtls.http_port(), "client"));
  }
}

// The backend: unset picks CUDA when there is a device and says when it
// falls back to the CPU; an explicit cuda without a device (or without
// CUDA in the build) stops start-up with the reason.
TEST(DaemonStartupTest, BackendChoiceIsExplicitAboutTheCpuFallback) {
  DaemonProcess chosen;
  ASSERT_TRUE(chosen
                  .Start({"--model", "dummy:stories15m", "--listen",
                          "127.0.0.1:0", "--tenant", "a:k", "--allow-root"})
                  .ok())
      << chosen.stderr_text();
  const std::string log = chosen.stderr_text();
  const bool on_gpu = log.find("backend cuda") != std::string::npos;
  if (!on_gpu) {
    EXPECT_NE(log.find("backend cpu"), std::string::npos) << log;
    EXPECT_TRUE(log.find("no CUDA device found: using the CPU backend") !=
                    std::string::npos ||
                log.find("this build has no CUDA backend: using the CPU") !=
                    std::string::npos)
        << log;
  }
  EXPECT_EQ(chosen.Drain().value_or(-1), 0) << chosen.stderr_text();

  if (on_gpu) return;
  DaemonProcess cuda;
  EXPECT_FALSE(
      cuda.Start({"--model", "dummy:stories15m", "--backend", "cuda",
                  "--listen", "127.0.0.1:0", "--tenant", "a:k", "--allow-root"})
          .ok());
  EXPECT_EQ(cuda.WaitExit(absl::Seconds(30)).value_or(-1), 1);
  EXPECT_NE(cuda.stderr_text().find("model.backend is cuda but"),
            std::string::npos)
      << cuda.stderr_text();
}

// A stream that would outlast the drain timeout is cut with ABORTED, after
// a Finished that says it was cancelled, with its usage; the daemon still
// exits 0.
TEST_F(DaemonTest, DrainTimeoutAbortsWhatIsLeft) {
  Start({"--drain-timeout", "1"});
  v1::GenerateRequest slow = Greedy("Once upon a time", 100);
  slow.mutable_stopping()->set_ignore_eos(true);
  slow.mutable_delivery()->set_pace_tokens_per_s(5);  // 20 s of delivery
  StreamResult result;
  std::thread reader([&] { result = RunGenerate(*stub_, kAliceKey, slow); });
  WaitStatus(
      *stub_, kAliceKey,
      [](const v1::ServerStatus& s) { return s.paced_streams() == 1; },
      absl::Seconds(5), "one paced stream");
  const absl::Time signalled = absl::Now();
  ASSERT_TRUE(daemon_.Signal(SIGTERM).ok());
  reader.join();
  const absl::Duration took = absl::Now() - signalled;
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::ABORTED)
      << result.status.error_message();
  ASSERT_TRUE(result.finished);
  EXPECT_EQ(result.finish.reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_GT(result.finish.usage().prompt_tokens(), 0);
  EXPECT_GE(result.finish.usage().completion_tokens(),
            static_cast<int32_t>(result.ids.size()));
  EXPECT_GE(result.ids.size(), 1u);
  EXPECT_LT(result.ids.size(), 100u);
  // The drain waited out its timeout (1 s) before cutting the stream; that
  // it did not wait for the whole delivery shows in the ids above.
  EXPECT_GE(took, absl::Seconds(1));
  absl::StatusOr<int> code = daemon_.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << daemon_.stderr_text();
}

}  // namespace
}  // namespace paceline::server
