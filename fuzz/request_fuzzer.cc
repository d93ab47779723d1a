// libFuzzer target for what clients send before anything runs: OpenAI
// request bodies (POST /v1/completions and /v1/chat/completions, mapped
// onto v1::GenerateRequest) and raw v1::GenerateRequest bytes (the gRPC
// API), each then built into a scheduler request against a byte-level
// tokenizer and a tenant with small limits. Any bytes must be refused with
// a status or give a request within the limits, without a crash, a hang or
// an unbounded allocation.
//
// Replayed by ctest (request_fuzz_replay) over its seeds and regressions;
// no libFuzzer build yet (fuzz/CMakeLists.txt says why).
//
// Input framing: byte 0 picks the entry (0: completions body, 1: chat
// body, 2: GenerateRequest protobuf); the rest is the body.
//
// Checks beyond the sanitizers': a refusal has a message and a code the
// API maps (never OK, UNKNOWN or INTERNAL); a parsed OpenAI request has 1
// to kMaxBatchPrompts prompts and n in [1, kMaxChoices]; a built request
// keeps its prompt within the tenant's limit and its stop conditions
// within the tenant's bounds.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tokenizer/byte_level.h"
#include "google/protobuf/stubs/logging.h"
#include "engine/tokenizer/tokenizer.h"
#include "paceline/v1/paceline.pb.h"
#include "server/openai/openai_request.h"
#include "server/frontend/request_builder.h"
#include "server/frontend/tenant_policy.h"

namespace {

namespace openai = ::paceline::server::openai;
using ::paceline::server::BuildRequest;
using ::paceline::server::BuiltRequest;
using ::paceline::server::ModelLimits;
using ::paceline::server::TenantPolicy;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "request_fuzzer invariant violated: %s\n", what);
    std::abort();
  }
}

void CheckRefusal(const absl::Status& status) {
  Check(!status.ok(), "a refusal is not OK");
  Check(!status.message().empty(), "a refusal says why");
  Check(status.code() != absl::StatusCode::kUnknown &&
            status.code() != absl::StatusCode::kInternal,
        "a refusal is the client's error, not the server's");
}

const paceline::engine::Tokenizer& Bytes() {
  static const auto* tokenizer = [] {
    auto t = paceline::engine::MakeByteLevelTokenizer(300);
    Check(t.ok(), "byte-level tokenizer");
    return t->release();
  }();
  return *tokenizer;
}

TenantPolicy Tenant() {
  TenantPolicy t;
  t.name = "fuzz";
  t.cache_salt = "fuzz";
  t.max_prompt_tokens = 256;
  t.max_tokens_limit = 128;
  t.default_max_tokens = 16;
  return t;
}

void Build(const paceline::v1::GenerateRequest& request) {
  const TenantPolicy tenant = Tenant();
  ModelLimits model;
  model.vocab_size = Bytes().vocab_size();
  model.context_length = 512;
  const absl::StatusOr<BuiltRequest> built =
      BuildRequest(request, tenant, Bytes(), model, /*seed=*/1);
  if (!built.ok()) return CheckRefusal(built.status());
  Check(!built->spec.prompt.empty() &&
            static_cast<int64_t>(built->spec.prompt.size()) <=
                tenant.max_prompt_tokens,
        "the prompt within the tenant's limit");
  Check(built->spec.stop.max_tokens >= 1 &&
            built->spec.stop.max_tokens <= tenant.max_tokens_limit,
        "max_tokens within the tenant's limit");
  Check(static_cast<int32_t>(built->delivery.stop.strings.size()) <=
            tenant.max_stop_strings,
        "stop strings within the tenant's bound");
}

void OpenAiBody(absl::string_view body, bool chat) {
  const absl::StatusOr<openai::OpenAiRequest> parsed =
      chat ? openai::ParseChatCompletionRequest(body)
           : openai::ParseCompletionRequest(body);
  if (!parsed.ok()) return CheckRefusal(parsed.status());
  Check(!parsed->prompts.empty() &&
            parsed->prompts.size() <=
                static_cast<size_t>(openai::kMaxBatchPrompts),
        "1 to kMaxBatchPrompts prompts");
  Check(parsed->n >= 1 && parsed->n <= openai::kMaxChoices, "n in range");
  for (const paceline::v1::GenerateRequest& prompt : parsed->prompts) {
    Build(prompt);
  }
}

}  // namespace

// libprotobuf logs an error for each message with invalid UTF-8 in a
// string field (most mutated inputs): ParseFromString's false is what the
// target checks, so those lines are dropped.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::string_view body(reinterpret_cast<const char*>(data + 1),
                               size - 1);
  switch (data[0] % 3) {
    case 0:
      OpenAiBody(body, /*chat=*/false);
      break;
    case 1:
      OpenAiBody(body, /*chat=*/true);
      break;
    default: {
      paceline::v1::GenerateRequest request;
      if (request.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        Build(request);
      }
      break;
    }
  }
  return 0;
}
