// BuildRequest: every validation branch of server/frontend/request_builder.cc
// as a table row (the request's mutation, the tenant's and model's limits, the
// status and the exact message a client sees), then the successful paths:
// defaults, the tenant's caps, and every field carried into the spec.

#include "server/frontend/request_builder.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "chat/chat_template.h"
#include "chat/model_templates.h"
#include "chat/prompt.h"
#include "engine/sampling/grammar/grammar_cache.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/row_sampling_math.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.pb.h"

namespace paceline::server {
namespace {

constexpr int32_t kVocab = 300;   // the byte-level tokenizer's size too
constexpr int64_t kContext = 64;  // the model's context length
constexpr int32_t kBos = 256;     // engine::MakeByteLevelTokenizer's BOS
constexpr uint64_t kServerSeed = 1234;

std::unique_ptr<engine::Tokenizer> ByteTokenizer() {
  auto tokenizer = engine::MakeByteLevelTokenizer(kVocab);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// A llama (SPM) vocabulary with one token, no byte tokens and no unknown
// token: any other character encodes to nothing.
std::unique_ptr<engine::Tokenizer> DroppingTokenizer() {
  engine::TokenizerVocab vocab;
  vocab.model = "llama";
  vocab.tokens = {"a"};
  auto tokenizer = engine::Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

TenantPolicy Tenant() {
  TenantPolicy t;
  t.name = "acme";
  t.cache_salt = "acme-salt";
  return t;
}

ModelLimits Model() {
  ModelLimits m;
  m.vocab_size = kVocab;
  m.context_length = kContext;
  return m;
}

// Valid as it stands: text, everything else unset.
v1::GenerateRequest Valid() {
  v1::GenerateRequest r;
  r.set_text("hello");
  return r;
}

void SetIds(v1::GenerateRequest& r, std::vector<int32_t> ids) {
  r.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
}

absl::StatusOr<BuiltRequest> Build(
    const v1::GenerateRequest& request, const TenantPolicy& tenant = Tenant(),
    const ModelLimits& model = Model(),
    const engine::Tokenizer* tokenizer = nullptr) {
  static const std::unique_ptr<engine::Tokenizer> bytes = ByteTokenizer();
  return BuildRequest(request, tenant,
                      tokenizer != nullptr ? *tokenizer : *bytes, model,
                      kServerSeed);
}

struct InvalidCase {
  std::string name;
  std::function<void(v1::GenerateRequest&)> mutate;
  std::function<void(TenantPolicy&, ModelLimits&)> limits;  // may be null
  std::string message;  // the whole message; always INVALID_ARGUMENT
};

std::vector<InvalidCase> InvalidCases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  return {
      // --- Input
      {"empty text", [](auto& r) { r.set_text(""); }, nullptr, "text is empty"},
      {"empty token ids", [](auto& r) { r.mutable_token_ids(); }, nullptr,
       "token_ids.ids is empty"},
      {"negative token id",
       [](auto& r) {
         SetIds(r, {5, -1});
       },
       nullptr, "token_ids.ids[1] must be in [0, 300), got -1"},
      {"token id past the vocabulary", [](auto& r) { SetIds(r, {kVocab}); },
       nullptr, "token_ids.ids[0] must be in [0, 300), got 300"},
      {"no input", [](auto& r) { r.clear_input(); }, nullptr,
       "input is missing: set text, token_ids or chat"},
      {"prompt over the tenant's limit",  // "hello" + BOS is 6 tokens
       [](auto&) {}, [](auto& t, auto&) { t.max_prompt_tokens = 5; },
       "input has 6 tokens, over the limit of 5 (tenant max_prompt_tokens)"},
      {"prompt over the model's context",
       [](auto& r) { SetIds(r, std::vector<int32_t>(kContext + 1, 7)); },
       nullptr, "input has 65 tokens, over the limit of 64 (model context)"},
      // --- Sampling (the sampler's fields, under the proto's names)
      {"top_n without logprobs",
       [](auto& r) { r.mutable_logprobs()->set_top_n(3); }, nullptr,
       "logprobs.top_n needs logprobs.enabled"},
      {"temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(-1); }, nullptr,
       "sampling.temperature must be finite and >= 0 (0 = greedy), got -1"},
      {"top_k", [](auto& r) { r.mutable_sampling()->set_top_k(-2); }, nullptr,
       "sampling.top_k must be >= 0 (0 = off), got -2"},
      {"top_p", [](auto& r) { r.mutable_sampling()->set_top_p(0); }, nullptr,
       "sampling.top_p must be in (0, 1], got 0"},
      {"min_p", [](auto& r) { r.mutable_sampling()->set_min_p(2); }, nullptr,
       "sampling.min_p must be in [0, 1], got 2"},
      {"repetition_penalty",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(0); },
       nullptr, "sampling.repetition_penalty must be in [0.1, 10], got 0"},
      {"presence_penalty",
       [](auto& r) { r.mutable_sampling()->set_presence_penalty(3); }, nullptr,
       "sampling.presence_penalty must be in [-2, 2], got 3"},
      {"frequency_penalty",
       [](auto& r) { r.mutable_sampling()->set_frequency_penalty(-3); },
       nullptr, "sampling.frequency_penalty must be in [-2, 2], got -3"},
      {"top_n over the maximum",
       [](auto& r) {
         r.mutable_logprobs()->set_enabled(true);
         r.mutable_logprobs()->set_top_n(21);
       },
       nullptr, "logprobs.top_n must be in [0, 20], got 21"},
      {"negative top_n",
       [](auto& r) {
         r.mutable_logprobs()->set_enabled(true);
         r.mutable_logprobs()->set_top_n(-1);
       },
       nullptr, "logprobs.top_n must be in [0, 20], got -1"},
      {"top_n over the vocabulary",
       [](auto& r) {
         SetIds(r, {1});
         r.mutable_logprobs()->set_enabled(true);
         r.mutable_logprobs()->set_top_n(15);
       },
       [](auto&, auto& m) { m.vocab_size = 10; },
       "logprobs.top_n must be at most the vocabulary size 10, got 15"},
      {"no vocabulary", [](auto&) {}, [](auto&, auto& m) { m.vocab_size = 0; },
       "sampling.vocab_size must be positive, got 0"},
      // --- Stopping
      {"max_tokens zero",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(0); }, nullptr,
       "stopping.max_tokens must be >= 1, got 0"},
      {"max_tokens over the tenant's limit",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(11); },
       [](auto& t, auto&) { t.max_tokens_limit = 10; },
       "stopping.max_tokens is 11, over the limit of 10 (tenant "
       "max_tokens_limit)"},
      {"max_tokens over the model's context",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(kContext + 1); },
       nullptr,
       "stopping.max_tokens is 65, over the limit of 64 (model context)"},
      {"empty stop string",
       [](auto& r) {
         r.mutable_stopping()->add_stop("END");
         r.mutable_stopping()->add_stop("");
       },
       nullptr, "stopping.stop[1] is empty"},
      {"too many stop strings",
       [](auto& r) {
         for (int i = 0; i < 17; ++i) r.mutable_stopping()->add_stop("x");
       },
       nullptr,
       "stopping.stop has 17 strings, over the limit of 16 (tenant "
       "max_stop_strings)"},
      {"stop strings over the tenant's own limit",
       [](auto& r) { r.mutable_stopping()->add_stop("x"); },
       [](auto& t, auto&) { t.max_stop_strings = 0; },
       "stopping.stop has 1 strings, over the limit of 0 (tenant "
       "max_stop_strings)"},
      {"a stop string over its byte limit",
       [](auto& r) {
         r.mutable_stopping()->add_stop("END");
         r.mutable_stopping()->add_stop(std::string(257, 's'));
       },
       nullptr,
       "stopping.stop[1] has 257 bytes, over the limit of 256 (tenant "
       "max_stop_string_bytes)"},
      {"too many stop token ids",
       [](auto& r) {
         for (int i = 0; i < 65; ++i) {
           r.mutable_stopping()->add_stop_token_ids(1);
         }
       },
       nullptr,
       "stopping.stop_token_ids has 65 ids, over the limit of 64 (tenant "
       "max_stop_token_ids)"},
      {"negative stop token id",
       [](auto& r) { r.mutable_stopping()->add_stop_token_ids(-1); }, nullptr,
       "stopping.stop_token_ids[0] must be in [0, 300), got -1"},
      {"stop token id past the vocabulary",
       [](auto& r) {
         r.mutable_stopping()->add_stop_token_ids(2);
         r.mutable_stopping()->add_stop_token_ids(kVocab);
       },
       nullptr, "stopping.stop_token_ids[1] must be in [0, 300), got 300"},
      // --- Priority and delivery
      {"unknown priority",
       [](auto& r) { r.set_priority(static_cast<v1::Priority>(7)); }, nullptr,
       "priority is not a known value: 7"},
      {"negative pace",
       [](auto& r) { r.mutable_delivery()->set_pace_tokens_per_s(-1); },
       nullptr, "delivery.pace_tokens_per_s must be >= 0, got -1"},
      {"NaN pace",
       [nan](auto& r) { r.mutable_delivery()->set_pace_tokens_per_s(nan); },
       nullptr, "delivery.pace_tokens_per_s must be >= 0, got nan"},
      {"infinite pace",
       [inf](auto& r) { r.mutable_delivery()->set_pace_tokens_per_s(inf); },
       nullptr, "delivery.pace_tokens_per_s must be >= 0, got inf"},
      {"burst zero", [](auto& r) { r.mutable_delivery()->set_burst_tokens(0); },
       nullptr, "delivery.burst_tokens must be >= 1, got 0"},
      // --- The first failure, in the order input, sampling, stopping,
      // priority, delivery, is the one reported.
      {"input before everything",
       [](auto& r) {
         r.set_text("");
         r.mutable_sampling()->set_top_p(0);
         r.mutable_delivery()->set_burst_tokens(0);
       },
       nullptr, "text is empty"},
      {"sampling before stopping",
       [](auto& r) {
         r.mutable_sampling()->set_top_p(0);
         r.mutable_stopping()->set_max_tokens(0);
       },
       nullptr, "sampling.top_p must be in (0, 1], got 0"},
      {"stopping before priority and delivery",
       [](auto& r) {
         r.mutable_stopping()->add_stop("");
         r.set_priority(static_cast<v1::Priority>(9));
         r.mutable_delivery()->set_burst_tokens(0);
       },
       nullptr, "stopping.stop[0] is empty"},
  };
}

TEST(RequestBuilderTest, EveryInvalidFieldIsNamed) {
  for (const InvalidCase& c : InvalidCases()) {
    v1::GenerateRequest request = Valid();
    c.mutate(request);
    TenantPolicy tenant = Tenant();
    ModelLimits model = Model();
    if (c.limits) c.limits(tenant, model);
    const absl::StatusOr<BuiltRequest> built = Build(request, tenant, model);
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << built.status();
    EXPECT_EQ(built.status().message(), c.message) << c.name;
  }
}

// Text longer than the prompt limit could hold at the tokenizer's longest
// token is refused by its size, before it is encoded (a 3 MB text used to
// be tokenized on the RPC thread first); at the bound it is encoded and
// counted as before.
TEST(RequestBuilderTest, TextOverThePromptLimitIsRefusedByItsSize) {
  const std::unique_ptr<engine::Tokenizer> bytes = ByteTokenizer();
  ASSERT_NE(bytes, nullptr);
  const size_t per_token = bytes->max_token_bytes();
  ASSERT_GE(per_token, 1u);
  TenantPolicy tenant = Tenant();
  tenant.max_prompt_tokens = 5;
  v1::GenerateRequest request;
  request.set_text(std::string(5 * per_token + 1, 'a'));
  absl::StatusOr<BuiltRequest> built = Build(request, tenant, Model(), &*bytes);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      built.status().message(),
      absl::StrCat("input has ", 5 * per_token + 1,
                   " bytes, more than the limit of 5 tokens can hold (at "
                   "most ",
                   per_token, " bytes per token) (tenant max_prompt_tokens)"));
  request.set_text(std::string(5 * per_token, 'a'));
  built = Build(request, tenant, Model(), &*bytes);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(built.status().message(),
                               absl::StrCat("input has ", 5 * per_token + 1,
                                            " tokens, over the limit of 5")))
      << built.status();  // each byte a token, plus BOS
}

TEST(RequestBuilderTest, TextThatEncodesToNothingIsInvalid) {
  const std::unique_ptr<engine::Tokenizer> dropping = DroppingTokenizer();
  ASSERT_NE(dropping, nullptr);
  v1::GenerateRequest request;
  request.set_text("zzz");
  const absl::StatusOr<BuiltRequest> built =
      Build(request, Tenant(), Model(), dropping.get());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(built.status().message(), "text encodes to no tokens");
  request.set_text("a");
  EXPECT_TRUE(Build(request, Tenant(), Model(), dropping.get()).ok());
}

TEST(RequestBuilderTest, DefaultsComeFromTheTenantAndTheServer) {
  TenantPolicy tenant = Tenant();
  tenant.default_pace = 12.5;
  tenant.default_burst = 4;
  tenant.default_max_tokens = 20;
  v1::GenerateRequest request = Valid();
  request.set_cache_salt("ignored");
  const absl::StatusOr<BuiltRequest> built = Build(request, tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  const scheduler::RequestSpec& spec = built->spec;
  EXPECT_EQ(spec.tenant, "acme");
  EXPECT_EQ(spec.cache_salt, "acme-salt");
  EXPECT_EQ(spec.prompt, (std::vector<int32_t>{kBos, 'h', 'e', 'l', 'l', 'o'}));
  const engine::SamplingParams defaults;
  EXPECT_EQ(spec.sampling.temperature, defaults.temperature);
  EXPECT_EQ(spec.sampling.top_k, defaults.top_k);
  EXPECT_EQ(spec.sampling.top_p, defaults.top_p);
  EXPECT_EQ(spec.sampling.min_p, defaults.min_p);
  EXPECT_EQ(spec.sampling.repetition_penalty, defaults.repetition_penalty);
  EXPECT_EQ(spec.sampling.presence_penalty, defaults.presence_penalty);
  EXPECT_EQ(spec.sampling.frequency_penalty, defaults.frequency_penalty);
  EXPECT_EQ(spec.sampling.seed, kServerSeed);
  EXPECT_FALSE(spec.sampling.logprobs);
  EXPECT_EQ(spec.sampling.top_logprobs, 0);
  EXPECT_EQ(spec.stop.max_tokens, 20);
  EXPECT_FALSE(spec.stop.ignore_eos);
  EXPECT_FALSE(built->delivery.stop.include);
  EXPECT_TRUE(built->delivery.stop.strings.empty());
  EXPECT_TRUE(spec.stop.stop_token_ids.empty());
  EXPECT_EQ(spec.priority, scheduler::PriorityClass::kStandard);
  EXPECT_EQ(spec.pace_tokens_per_s, 12.5);
  EXPECT_EQ(built->delivery.pace_tokens_per_s, 12.5);
  EXPECT_EQ(built->delivery.burst_tokens, 4);
  EXPECT_EQ(spec.sink, nullptr);
}

TEST(RequestBuilderTest, SpeculationComesFromTheRequestOrTheTenant) {
  TenantPolicy tenant = Tenant();
  v1::GenerateRequest request = Valid();
  absl::StatusOr<BuiltRequest> built = Build(request, tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.max_draft_tokens, 0);  // off by default
  tenant.default_max_draft_tokens = 4;
  built = Build(request, tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.max_draft_tokens, 4);
  // A request's own value wins, 0 included.
  request.mutable_speculation()->set_max_draft_tokens(0);
  built = Build(request, tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.max_draft_tokens, 0);
  request.mutable_speculation()->set_max_draft_tokens(16);
  built = Build(request, tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.max_draft_tokens, 16);
  request.mutable_speculation()->set_max_draft_tokens(17);
  built = Build(request, tenant);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(built.status().message().find("speculation.max_draft_tokens"),
            std::string::npos)
      << built.status();
}

TEST(RequestBuilderTest, DefaultMaxTokensIsCappedByTheLimit) {
  TenantPolicy tenant = Tenant();  // default_max_tokens 256
  absl::StatusOr<BuiltRequest> built = Build(Valid(), tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.stop.max_tokens, kContext);  // the model's context
  tenant.max_tokens_limit = 30;
  built = Build(Valid(), tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.stop.max_tokens, 30);
}

TEST(RequestBuilderTest, LimitsAreInclusive) {
  TenantPolicy tenant = Tenant();
  tenant.max_prompt_tokens = 6;  // "hello" + BOS
  tenant.max_tokens_limit = 10;
  v1::GenerateRequest request = Valid();
  request.mutable_stopping()->set_max_tokens(10);
  absl::StatusOr<BuiltRequest> built = Build(request, tenant);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.stop.max_tokens, 10);

  v1::GenerateRequest at_context;
  SetIds(at_context, std::vector<int32_t>(kContext, 7));
  at_context.mutable_stopping()->set_max_tokens(kContext);
  built = Build(at_context);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.prompt.size(), static_cast<size_t>(kContext));
}

TEST(RequestBuilderTest, InputIsEncodedOrTakenAsGiven) {
  v1::GenerateRequest request = Valid();
  request.set_add_special_tokens(false);
  absl::StatusOr<BuiltRequest> built = Build(request);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.prompt,
            (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o'}));
  request.set_add_special_tokens(true);
  built = Build(request);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.prompt.front(), kBos);

  v1::GenerateRequest ids;
  SetIds(ids, {0, 7, kVocab - 1});
  ids.set_add_special_tokens(true);  // ignored for token_ids
  built = Build(ids);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.prompt, (std::vector<int32_t>{0, 7, kVocab - 1}));
}

TEST(RequestBuilderTest, SamplingAndStoppingAreCarriedOver) {
  v1::GenerateRequest request = Valid();
  v1::SamplingOptions& s = *request.mutable_sampling();
  s.set_temperature(0.5f);
  s.set_top_k(40);
  s.set_top_p(0.9f);
  s.set_min_p(0.05f);
  s.set_repetition_penalty(1.1f);
  s.set_presence_penalty(-0.5f);
  s.set_frequency_penalty(0.25f);
  s.set_seed(99);
  request.mutable_logprobs()->set_enabled(true);
  request.mutable_logprobs()->set_top_n(5);
  v1::StoppingOptions& stop = *request.mutable_stopping();
  stop.set_max_tokens(8);
  stop.add_stop("END");
  stop.add_stop("\n\n");
  stop.add_stop_token_ids(0);
  stop.add_stop_token_ids(kVocab - 1);
  stop.set_ignore_eos(true);
  stop.set_include_stop_str(true);
  const absl::StatusOr<BuiltRequest> built = Build(request);
  ASSERT_TRUE(built.ok()) << built.status();
  const engine::SamplingParams& p = built->spec.sampling;
  EXPECT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.presence_penalty, -0.5f);
  EXPECT_EQ(p.frequency_penalty, 0.25f);
  EXPECT_EQ(p.seed, 99u);
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 5);
  const scheduler::StopConditions& st = built->spec.stop;
  EXPECT_EQ(st.max_tokens, 8);
  EXPECT_EQ(built->delivery.stop.strings,
            (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_EQ(st.stop_token_ids, (std::vector<int32_t>{0, kVocab - 1}));
  EXPECT_TRUE(st.ignore_eos);
  EXPECT_TRUE(built->delivery.stop.include);
}

TEST(RequestBuilderTest, PrioritiesMapToClasses) {
  const std::vector<std::pair<v1::Priority, scheduler::PriorityClass>> cases = {
      {v1::PRIORITY_UNSPECIFIED, scheduler::PriorityClass::kStandard},
      {v1::PRIORITY_INTERACTIVE, scheduler::PriorityClass::kInteractive},
      {v1::PRIORITY_STANDARD, scheduler::PriorityClass::kStandard},
      {v1::PRIORITY_BATCH, scheduler::PriorityClass::kBatch}};
  for (const auto& [priority, expected] : cases) {
    v1::GenerateRequest request = Valid();
    request.set_priority(priority);
    const absl::StatusOr<BuiltRequest> built = Build(request);
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ(built->spec.priority, expected) << priority;
  }
}

// A tenant's max_priority lowers a higher class to it and leaves lower
// ones as asked.
TEST(RequestBuilderTest, MaxPriorityLowersHigherClasses) {
  using scheduler::PriorityClass;
  struct Case {
    PriorityClass max;
    v1::Priority asked;
    PriorityClass expected;
  };
  const Case cases[] = {
      {PriorityClass::kStandard, v1::PRIORITY_INTERACTIVE,
       PriorityClass::kStandard},
      {PriorityClass::kStandard, v1::PRIORITY_UNSPECIFIED,
       PriorityClass::kStandard},
      {PriorityClass::kStandard, v1::PRIORITY_BATCH, PriorityClass::kBatch},
      {PriorityClass::kBatch, v1::PRIORITY_INTERACTIVE, PriorityClass::kBatch},
      {PriorityClass::kBatch, v1::PRIORITY_STANDARD, PriorityClass::kBatch},
      {PriorityClass::kInteractive, v1::PRIORITY_INTERACTIVE,
       PriorityClass::kInteractive},
  };
  for (const Case& c : cases) {
    TenantPolicy tenant = Tenant();
    tenant.max_priority = c.max;
    v1::GenerateRequest request = Valid();
    request.set_priority(c.asked);
    const absl::StatusOr<BuiltRequest> built = Build(request, tenant);
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ(built->spec.priority, c.expected)
        << scheduler::PriorityClassName(c.max) << " " << c.asked;
  }
}

// A positive pace below the tenant's minimum (default 1 token/s) is
// refused: 1e-300 tokens/s would hold its stream and buffer forever.
TEST(RequestBuilderTest, PaceBelowTheTenantMinimumIsRefused) {
  TenantPolicy tenant = Tenant();
  ASSERT_EQ(tenant.min_pace, 1);
  for (double pace : {1e-300, 0.5, 0.999}) {
    v1::GenerateRequest request = Valid();
    request.mutable_delivery()->set_pace_tokens_per_s(pace);
    const absl::StatusOr<BuiltRequest> built = Build(request, tenant);
    ASSERT_FALSE(built.ok()) << pace;
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(built.status().message(),
              absl::StrCat("delivery.pace_tokens_per_s must be 0 (unpaced) or "
                           "at least 1 (tenant min_pace_tokens_per_s), got ",
                           pace));
  }
  for (double pace : {0.0, 1.0, 30.0}) {
    v1::GenerateRequest request = Valid();
    request.mutable_delivery()->set_pace_tokens_per_s(pace);
    const absl::StatusOr<BuiltRequest> built = Build(request, tenant);
    ASSERT_TRUE(built.ok()) << pace << ": " << built.status();
    EXPECT_EQ(built->delivery.pace_tokens_per_s, pace);
  }
  tenant.min_pace = 0.25;
  v1::GenerateRequest slow = Valid();
  slow.mutable_delivery()->set_pace_tokens_per_s(0.5);
  EXPECT_TRUE(Build(slow, tenant).ok());
}

TEST(RequestBuilderTest, PaceIsCappedByTheTenant) {
  TenantPolicy tenant = Tenant();
  tenant.max_pace = 10;
  struct Case {
    std::optional<double> requested;  // unset: the tenant's default (0)
    double expected;
  };
  const std::vector<Case> cases = {
      {std::nullopt, 10},  // the default is unpaced, the fastest: capped
      {0, 10},             // unpaced counts as fastest
      {25, 10},
      {10, 10},
      {4.5, 4.5},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = Valid();
    if (c.requested) {
      request.mutable_delivery()->set_pace_tokens_per_s(*c.requested);
    }
    const absl::StatusOr<BuiltRequest> built = Build(request, tenant);
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ(built->delivery.pace_tokens_per_s, c.expected)
        << c.requested.value_or(-1);
    EXPECT_EQ(built->spec.pace_tokens_per_s, c.expected);
  }

  // Without a cap, unpaced stays unpaced and any pace is kept.
  v1::GenerateRequest fast = Valid();
  fast.mutable_delivery()->set_pace_tokens_per_s(1000);
  fast.mutable_delivery()->set_burst_tokens(7);
  absl::StatusOr<BuiltRequest> built = Build(fast);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->delivery.pace_tokens_per_s, 1000);
  EXPECT_EQ(built->delivery.burst_tokens, 7);
  built = Build(Valid());
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->delivery.pace_tokens_per_s, 0);
  EXPECT_EQ(built->delivery.burst_tokens, 1);
}

// --- Chat ------------------------------------------------------------------

v1::GenerateRequest ChatRequest(std::string content) {
  v1::GenerateRequest r;
  v1::ChatMessage* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content(std::move(content));
  return r;
}

TEST(RequestBuilderTest, ChatWithoutATemplateIsAFailedPrecondition) {
  const auto tokenizer = ByteTokenizer();
  const chat::ChatPromptEncoder encoder(tokenizer.get());
  const chat::ModelChatTemplates none;
  for (const ChatInput& chat : {ChatInput{}, ChatInput{&none, &encoder, {}}}) {
    auto built = BuildRequest(ChatRequest("hi"), Tenant(), *tokenizer, Model(),
                              kServerSeed, chat);
    ASSERT_FALSE(built.ok());
    EXPECT_EQ(built.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(built.status().message(),
              "the model has no chat template; set model.chat_template_file "
              "or send text");
  }
}

// A model with templates parsed from `main` (and `tool_use`).
struct ChatModel {
  std::unique_ptr<engine::Tokenizer> tokenizer = ByteTokenizer();
  chat::ChatPromptEncoder encoder{tokenizer.get()};
  chat::ModelChatTemplates templates;

  ChatModel(const std::string& main, const std::string& tool_use = "") {
    auto parsed = chat::ChatTemplatesFromSource("test", main);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (parsed.ok()) templates = *std::move(parsed);
    if (!tool_use.empty()) {
      auto t = chat::ChatTemplate::Parse(tool_use);
      EXPECT_TRUE(t.ok()) << t.status();
      if (t.ok()) templates.tool_use = *std::move(t);
    }
  }
  absl::StatusOr<BuiltRequest> Build(const v1::GenerateRequest& r,
                                     const TenantPolicy& tenant = Tenant()) {
    return BuildRequest(r, tenant, *tokenizer, Model(), kServerSeed,
                        ChatInput{&templates, &encoder, absl::UnixEpoch()});
  }
};

TEST(RequestBuilderTest, ChatIsRenderedAndTokenized) {
  ChatModel model(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}"
      "{% endfor %}{{ eos_token }}",
      "tools:{{ tools | length }}");
  // bos_token and eos_token are the vocabulary's; the one BOS is the
  // template's; the request's "<|eos|>" is plain text.
  auto built = model.Build(ChatRequest("a<|eos|>"));
  ASSERT_TRUE(built.ok()) << built.status();
  std::vector<int32_t> want = {kBos};
  for (char c : std::string("user:a<|eos|>")) want.push_back(c);
  want.push_back(257);  // the template's eos_token
  EXPECT_EQ(built->spec.prompt, want);
  // With tools: the tool_use variant.
  v1::GenerateRequest with_tools = ChatRequest("a");
  with_tools.mutable_chat()->add_tools()->mutable_function()->set_name("f");
  built = model.Build(with_tools);
  ASSERT_TRUE(built.ok()) << built.status();
  want = {kBos};
  for (char c : std::string("tools:1")) want.push_back(c);
  EXPECT_EQ(built->spec.prompt, want);
  // The prompt limit applies as to text.
  TenantPolicy tenant = Tenant();
  tenant.max_prompt_tokens = 3;
  built = model.Build(ChatRequest("a"), tenant);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(),
            "input has 8 tokens, over the limit of 3 (tenant "
            "max_prompt_tokens)");
}

TEST(RequestBuilderTest, ChatTemplateErrorsAreInvalidArgument) {
  ChatModel model(
      "{% if messages[0].role != 'system' %}"
      "{{ raise_exception('Conversation roles must alternate') }}{% endif %}");
  auto built = model.Build(ChatRequest("a"));
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(built.status().message(),
                                "Conversation roles must alternate"))
      << built.status();
  // Request errors name their field.
  v1::GenerateRequest bad = ChatRequest("a");
  bad.mutable_chat()->mutable_messages(0)->set_role("");
  built = model.Build(bad);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(), "chat.messages[0].role is empty");
}

}  // namespace
}  // namespace paceline::server

namespace paceline::server {
namespace {

// sampling.constraint: compiled through the model's grammar cache into the
// sampler's mask prototype, or refused naming the constraint.
TEST(RequestBuilderConstraintTest, CompiledRefusedOrUnavailable) {
  static const std::unique_ptr<engine::Tokenizer> bytes = ByteTokenizer();
  engine::grammar::GrammarCache grammars(
      engine::grammar::TokenTrie::FromTokenizer(*bytes));
  v1::GenerateRequest r = Valid();
  r.mutable_sampling()->mutable_constraint()->set_json_schema(
      R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  auto built =
      BuildRequest(r, Tenant(), *bytes, Model(), kServerSeed, {}, &grammars);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_NE(built->spec.sampling.mask, nullptr);
  // The mask allows exactly '{' (byte token 123) first.
  std::vector<uint32_t> allowed(engine::MaskWords(kVocab));
  built->spec.sampling.mask->Clone()->Fill(absl::MakeSpan(allowed));
  for (int32_t id = 0; id < kVocab; ++id) {
    EXPECT_EQ(engine::MaskAllows(allowed.data(), id), id == '{') << id;
  }

  // No cache: structured output is not available.
  auto unavailable = BuildRequest(r, Tenant(), *bytes, Model(), kServerSeed);
  EXPECT_EQ(unavailable.status().code(), absl::StatusCode::kFailedPrecondition);

  const std::pair<std::string, std::string> refused[] = {
      {R"({"type":"array","contains":{}})", "'contains'"},
      {R"({"type":)", "not valid JSON"},
  };
  for (const auto& [schema, says] : refused) {
    r.mutable_sampling()->mutable_constraint()->set_json_schema(schema);
    auto bad =
        BuildRequest(r, Tenant(), *bytes, Model(), kServerSeed, {}, &grammars);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("sampling.constraint.json_schema"),
              std::string::npos)
        << bad.status();
    EXPECT_NE(bad.status().message().find(says), std::string::npos)
        << bad.status();
  }
  r.mutable_sampling()->mutable_constraint()->set_regex("a+");
  r.mutable_stopping()->set_ignore_eos(true);
  EXPECT_EQ(
      BuildRequest(r, Tenant(), *bytes, Model(), kServerSeed, {}, &grammars)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paceline::server
