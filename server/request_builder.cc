#include "server/request_builder.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/sampler.h"

namespace paceline::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

scheduler::PriorityClass ToPriority(v1::Priority p) {
  switch (p) {
    case v1::PRIORITY_INTERACTIVE:
      return scheduler::PriorityClass::kInteractive;
    case v1::PRIORITY_BATCH:
      return scheduler::PriorityClass::kBatch;
    default:
      return scheduler::PriorityClass::kStandard;
  }
}

// The sampler's own validation names its fields without the proto's
// message prefix; add it.
absl::Status Prefixed(absl::string_view prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace

absl::StatusOr<BuiltRequest> BuildRequest(const v1::GenerateRequest& request,
                                          const TenantPolicy& tenant,
                                          const engine::Tokenizer& tokenizer,
                                          const ModelLimits& model,
                                          uint64_t seed) {
  BuiltRequest out;
  scheduler::RequestSpec& spec = out.spec;
  spec.tenant = tenant.name;
  spec.cache_salt = tenant.cache_salt;  // request.cache_salt is ignored

  // Input.
  switch (request.input_case()) {
    case v1::GenerateRequest::kText: {
      if (request.text().empty()) return Invalid("text", "is empty");
      engine::EncodeOptions encode;
      encode.add_bos =
          request.has_add_special_tokens() ? request.add_special_tokens() &&
                                                 tokenizer.add_bos()
                                           : tokenizer.add_bos();
      spec.prompt = tokenizer.Encode(request.text(), encode);
      if (spec.prompt.empty()) return Invalid("text", "encodes to no tokens");
      break;
    }
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) return Invalid("token_ids.ids", "is empty");
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= model.vocab_size) {
          return Invalid(absl::StrCat("token_ids.ids[", i, "]"),
                         absl::StrCat("must be in [0, ", model.vocab_size,
                                      "), got ", ids[i]));
        }
      }
      spec.prompt.assign(ids.begin(), ids.end());
      break;
    }
    default:
      return Invalid("input", "is missing: set text or token_ids");
  }
  const int64_t max_prompt =
      tenant.max_prompt_tokens > 0 ? tenant.max_prompt_tokens
                                   : model.context_length;
  if (static_cast<int64_t>(spec.prompt.size()) > max_prompt) {
    return Invalid("input", absl::StrCat("has ", spec.prompt.size(),
                                         " tokens, over the limit of ",
                                         max_prompt,
                                         tenant.max_prompt_tokens > 0
                                             ? " (tenant max_prompt_tokens)"
                                             : " (model context)"));
  }

  // Sampling.
  const v1::SamplingOptions& s = request.sampling();
  engine::SamplingParams& p = spec.sampling;
  if (s.has_temperature()) p.temperature = s.temperature();
  if (s.has_top_k()) p.top_k = s.top_k();
  if (s.has_top_p()) p.top_p = s.top_p();
  if (s.has_min_p()) p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) p.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) p.frequency_penalty = s.frequency_penalty();
  p.seed = s.has_seed() ? s.seed() : seed;
  p.logprobs = request.logprobs().enabled();
  p.top_logprobs = request.logprobs().top_n();
  if (p.top_logprobs != 0 && !p.logprobs) {
    return Invalid("logprobs.top_n", "needs logprobs.enabled");
  }
  if (absl::Status st = engine::Validate(p, model.vocab_size); !st.ok()) {
    constexpr absl::string_view kTopLogprobs = "top_logprobs";
    if (absl::StartsWith(st.message(), kTopLogprobs)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logprobs.top_n", st.message().substr(kTopLogprobs.size())));
    }
    return Prefixed("sampling.", st);
  }

  // Stopping.
  const v1::StoppingOptions& stop = request.stopping();
  const int64_t max_tokens_cap =
      tenant.max_tokens_limit > 0 ? tenant.max_tokens_limit
                                  : model.context_length;
  if (stop.has_max_tokens()) {
    if (stop.max_tokens() < 1) {
      return Invalid("stopping.max_tokens",
                     absl::StrCat("must be >= 1, got ", stop.max_tokens()));
    }
    if (stop.max_tokens() > max_tokens_cap) {
      return Invalid("stopping.max_tokens",
                     absl::StrCat("is ", stop.max_tokens(),
                                  ", over the limit of ", max_tokens_cap,
                                  tenant.max_tokens_limit > 0
                                      ? " (tenant max_tokens_limit)"
                                      : " (model context)"));
    }
    spec.stop.max_tokens = stop.max_tokens();
  } else {
    spec.stop.max_tokens = static_cast<int32_t>(
        std::min<int64_t>(tenant.default_max_tokens, max_tokens_cap));
  }
  spec.stop.ignore_eos = stop.ignore_eos();
  spec.stop.include_stop_str = stop.include_stop_str();
  for (int i = 0; i < stop.stop_size(); ++i) {
    if (stop.stop(i).empty()) {
      return Invalid(absl::StrCat("stopping.stop[", i, "]"), "is empty");
    }
    spec.stop.stop_strings.push_back(stop.stop(i));
  }
  for (int i = 0; i < stop.stop_token_ids_size(); ++i) {
    const int32_t id = stop.stop_token_ids(i);
    if (id < 0 || id >= model.vocab_size) {
      return Invalid(absl::StrCat("stopping.stop_token_ids[", i, "]"),
                     absl::StrCat("must be in [0, ", model.vocab_size,
                                  "), got ", id));
    }
    spec.stop.stop_token_ids.push_back(id);
  }

  // Priority and delivery.
  if (!v1::Priority_IsValid(request.priority())) {
    return Invalid("priority", absl::StrCat("is not a known value: ",
                                            static_cast<int>(request.priority())));
  }
  spec.priority = ToPriority(request.priority());
  const v1::DeliveryOptions& d = request.delivery();
  double pace = tenant.default_pace;
  if (d.has_pace_tokens_per_s()) {
    pace = d.pace_tokens_per_s();
    if (!std::isfinite(pace) || pace < 0) {
      return Invalid("delivery.pace_tokens_per_s",
                     absl::StrCat("must be >= 0, got ", pace));
    }
  }
  if (tenant.max_pace > 0 && (pace == 0 || pace > tenant.max_pace)) {
    pace = tenant.max_pace;  // the tenant's cap (unpaced counts as fastest)
  }
  int32_t burst = tenant.default_burst;
  if (d.has_burst_tokens()) {
    burst = d.burst_tokens();
    if (burst < 1) {
      return Invalid("delivery.burst_tokens",
                     absl::StrCat("must be >= 1, got ", burst));
    }
  }
  out.delivery.pace_tokens_per_s = pace;
  out.delivery.burst_tokens = burst;
  spec.pace_tokens_per_s = pace;
  return out;
}

}  // namespace paceline::server
