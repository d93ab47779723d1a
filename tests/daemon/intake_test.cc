// The intake pool end to end (issue 18, "work before limits"): what a
// request costs before it queues (here: rendering a chat template the
// request makes expensive) runs on the pool, one thread here, charged to
// its tenant. Another tenant's request is served next, not after the
// backlog; a tenant's backlog past intake.max_queued_per_tenant is refused
// with a retry hint on gRPC and HTTP; a Tokenize answer over the message
// limit (4 KiB here) is refused with INVALID_ARGUMENT naming it.
//
// The template's cost comes from the request (chat.template_kwargs
// "work": work × 1000 loop iterations), so one tenant's calls are heavy
// and the other's are not, through the same real renderer. Orders are
// asserted, never durations.
//
// They skip without ../shared/models.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "server/frontend/sha256.h"
#include "tests/daemon/storm_harness.h"
#include "tests/testing/files.h"
#include "tests/testing/http_post.h"
#include "tests/testing/sanitizers.h"

namespace paceline::server {
namespace {

using ::paceline::testing::HttpPost;
using ::paceline::testing::HttpResponse;
using ::paceline::testing::MakeClientContext;
using ::paceline::testing::WriteFile;
using storm::Idle;
using storm::kKey;
using storm::StormTest;

constexpr char kQuietKey[] = "quiet-key";

// `work` × 1000 iterations (the renderer's limit is 1,000,000), then the
// messages' text.
constexpr char kTemplate[] =
    "{%- for i in range(work | default(0)) -%}"
    "{%- for j in range(1000) -%}{%- set x = j ~ i -%}{%- endfor -%}"
    "{%- endfor -%}"
    "{%- for m in messages -%}{{ m['content'] }}{%- endfor -%}";
// About 250 ms of rendering in the plain build; the sanitizer builds run
// the renderer at -O0 (some 20x slower), where a fifth is plenty.
constexpr int kHeavyWork = ::paceline::testing::kAddressSanitizer ||
                                   ::paceline::testing::kThreadSanitizer
                               ? 100
                               : 490;

v1::GenerateRequest ChatRequest(int work) {
  v1::GenerateRequest r;
  v1::ChatMessage* user = r.mutable_chat()->add_messages();
  user->set_role("user");
  user->set_content("Once upon a time");
  (*r.mutable_chat()->mutable_template_kwargs())["work"] = absl::StrCat(work);
  r.mutable_stopping()->set_max_tokens(1);
  return r;
}

// Complete calls in flight on the callback API; records the order they
// ended in.
class Calls {
 public:
  struct Call {
    v1::GenerateRequest request;
    grpc::ClientContext context;
    v1::CompleteResponse response;
    grpc::Status status;
    bool retry_hint = false;
    int order = -1;  // 0 for the first call to end
  };

  Call* Send(v1::Paceline::Stub* stub, v1::GenerateRequest request,
             const std::string& key) {
    auto call = std::make_unique<Call>();
    call->request = std::move(request);
    paceline::testing::AddApiKey(&call->context, key);
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(300));
    Call* c = call.get();
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back(std::move(call));
    }
    stub->async()->Complete(
        &c->context, &c->request, &c->response, [this, c](grpc::Status s) {
          const auto& trailers = c->context.GetServerTrailingMetadata();
          absl::MutexLock lock(&mu_);
          c->status = std::move(s);
          c->retry_hint = trailers.find("retry-after-ms") != trailers.end();
          c->order = ended_++;
        });
    return c;
  }

  // Waits until `n` calls have ended; false at the deadline.
  bool WaitEnded(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&] { return ended_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  // Waits until one of `of` has ended with `code`.
  bool WaitCode(const std::vector<Call*>& of, grpc::StatusCode code,
                absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&] {
      for (const Call* c : of) {
        if (c->order >= 0 && c->status.error_code() == code) return true;
      }
      return false;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  int ended_ ABSL_GUARDED_BY(mu_) = 0;
};

class IntakeTest : public StormTest {
 protected:
  void SetUp() override {
    StormTest::SetUp();
    if (IsSkipped()) return;
    const std::string chat_template = WriteFile("work.jinja", kTemplate);
    Start(paceline::testing::kStories260KPath, "",
          absl::StrCat("intake { threads: 1 max_queued_per_tenant: 2 }\n"
                       "grpc { max_message_bytes: 4096 }\n"
                       "tenants { name: \"quiet\" api_key_sha256: \"",
                       Sha256Hex(kQuietKey), "\" }\n"),
          "", {"--chat-template-file", chat_template});
  }
};

TEST_F(IntakeTest, AnotherTenantIsServedNextNotAfterTheBacklog) {
  Calls calls;
  // The storm tenant sends six heavy chat calls at once: one renders, two
  // wait, the rest are refused at once.
  std::vector<Calls::Call*> heavy;
  for (int i = 0; i < 6; ++i) {
    heavy.push_back(calls.Send(stub_.get(), ChatRequest(kHeavyWork), kKey));
  }
  // A refusal means its backlog was full when it came.
  ASSERT_TRUE(calls.WaitCode(heavy, grpc::StatusCode::RESOURCE_EXHAUSTED,
                             absl::Seconds(60)));
  // Now the quiet tenant: a text call and a cheap chat call.
  v1::GenerateRequest text;
  text.set_text("Once upon a time");
  text.mutable_stopping()->set_max_tokens(1);
  Calls::Call* quiet_text = calls.Send(stub_.get(), text, kQuietKey);
  Calls::Call* quiet_chat = calls.Send(stub_.get(), ChatRequest(0), kQuietKey);
  ASSERT_TRUE(calls.WaitEnded(8, absl::Seconds(120)));

  int refused = 0;
  int last_heavy = -1;
  for (const Calls::Call* c : heavy) {
    if (c->status.ok()) {
      last_heavy = std::max(last_heavy, c->order);
      continue;
    }
    ++refused;
    EXPECT_EQ(c->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << c->status.error_message();
    EXPECT_TRUE(absl::StrContains(c->status.error_message(),
                                  "intake.max_queued_per_tenant"))
        << c->status.error_message();
    EXPECT_TRUE(c->retry_hint) << "a full backlog is retryable";
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(refused, 5) << "the running call and the backlog are served";
  ASSERT_GE(last_heavy, 0);
  for (const Calls::Call* q : {quiet_text, quiet_chat}) {
    ASSERT_TRUE(q->status.ok()) << q->status.error_message();
    EXPECT_LT(q->order, last_heavy)
        << "the quiet tenant waited for the whole backlog";
  }
  WaitStatus(Idle, absl::Seconds(30), "idle after the calls");
}

TEST_F(IntakeTest, ABacklogIsRefusedWith429AndRetryAfterOverHttp) {
  const std::string body =
      absl::StrCat(R"({"messages": [{"role": "user", "content": "Once"}], )",
                   R"("max_tokens": 1, "chat_template_kwargs": {"work": )",
                   kHeavyWork, "}}");
  std::vector<HttpResponse> answers(6);
  std::vector<std::thread> clients;
  for (HttpResponse& answer : answers) {
    clients.emplace_back([&, port = daemon_.http_port()] {
      answer = HttpPost(port, "/v1/chat/completions", body, kKey);
    });
  }
  for (std::thread& t : clients) t.join();
  int refused = 0;
  for (const HttpResponse& a : answers) {
    if (a.status == 200) continue;
    ++refused;
    EXPECT_EQ(a.status, 429) << a.body;
    EXPECT_TRUE(
        absl::StrContains(absl::AsciiStrToLower(a.headers), "retry-after-ms:"))
        << a.headers;
    EXPECT_TRUE(absl::StrContains(a.body, "intake.max_queued_per_tenant"))
        << a.body;
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(refused, 5);
  // The quiet tenant's tokenize is not refused for the other's backlog.
  const HttpResponse quiet = HttpPost(daemon_.http_port(), "/tokenize",
                                      R"({"prompt": "Once"})", kQuietKey);
  EXPECT_EQ(quiet.status, 200) << quiet.body;
  WaitStatus(Idle, absl::Seconds(30), "idle after the calls");
}

TEST_F(IntakeTest, ATokenizeAnswerOverTheMessageLimitIsRefused) {
  // Bytes the vocabulary has no token for encode one byte-fallback token
  // each, whose piece ("<0xE4>") is six bytes: 600 bytes of text make an
  // answer over the 4 KiB limit from a request well under it.
  v1::TokenizeRequest request;
  for (int i = 0; i < 200; ++i) request.mutable_text()->append("\xe4\xb8\x96");
  v1::TokenizeResponse response;
  auto ctx = MakeClientContext(kKey);
  const grpc::Status st = stub_->Tokenize(ctx.get(), request, &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "grpc.max_message_bytes"))
      << st.error_message();
  // A short text still tokenizes.
  request.set_text("Once upon a time");
  auto ok_ctx = MakeClientContext(kKey);
  ASSERT_TRUE(stub_->Tokenize(ok_ctx.get(), request, &response).ok());
  EXPECT_GT(response.token_ids_size(), 0);
}

}  // namespace
}  // namespace paceline::server
