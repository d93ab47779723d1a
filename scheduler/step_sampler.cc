#include "scheduler/step_sampler.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace paceline::scheduler {

StepSampler::StepSampler(const engine::Engine& engine, EngineSampling mode,
                         int mask_threads)
    : vocab_size_(static_cast<int32_t>(engine.config().n_vocab)),
      engine_samples_(
          mode == EngineSampling::kAlways ||
          (mode == EngineSampling::kAuto && engine.samples_on_device())),
      pool_(mask_threads) {}

bool StepSampler::InEngine(Request& request) const {
  return engine_samples_ && request.sampler().EngineCanSample();
}

absl::Span<const engine::RowSampling> StepSampler::EngineRows(
    const StepPlan& plan) {
  rows_.clear();
  if (!engine_samples_) {
    StartMasks(plan);
    return {};
  }
  bool any = false;
  rows_.resize(static_cast<size_t>(plan.num_logit_rows));
  // Sized before any row points into it, and only for a step with masks.
  const size_t words = static_cast<size_t>(engine::MaskWords(vocab_size_));
  const bool masked = std::any_of(plan.scheduled.begin(), plan.scheduled.end(),
                                  [](const ScheduledRequest& s) {
                                    return s.request->sampler().has_mask();
                                  });
  if (masked && masks_.size() < rows_.size() * words) {
    masks_.resize(rows_.size() * words);
  }
  for (const ScheduledRequest& s : plan.scheduled) {
    // A draft's rows are sampled in order, each after the last matched.
    if (s.logits_row < 0 || s.num_draft > 0 || !InEngine(*s.request)) {
      continue;
    }
    engine::SequenceSampler& sampler = s.request->sampler();
    engine::RowSampling& row = rows_[s.logits_row];
    row = sampler.EngineRow();
    if (sampler.has_mask()) {
      row.allowed = masks_.data() + s.logits_row * words;  // StartMasks
    }
    any = true;
  }
  if (!any) rows_.clear();
  StartMasks(plan);
  return rows_;
}

void StepSampler::StartMasks(const StepPlan& plan) {
  const size_t words = static_cast<size_t>(engine::MaskWords(vocab_size_));
  std::vector<std::function<void()>> jobs;
  for (const ScheduledRequest& s : plan.scheduled) {
    engine::SequenceSampler& sampler = s.request->sampler();
    if (s.logits_row < 0 || !sampler.has_mask()) continue;
    const size_t j = static_cast<size_t>(s.logits_row);
    if (!rows_.empty() && rows_[j].in_engine) {
      const absl::Span<uint32_t> allowed =
          absl::MakeSpan(masks_).subspan(j * words, words);
      jobs.push_back([&sampler, allowed] { sampler.FillMask(allowed); });
    } else {
      jobs.push_back([&sampler] { sampler.PrefillMask(); });
    }
  }
  pool_.Start(std::move(jobs));
}

absl::Status StepSampler::CheckOutput(
    const StepPlan& plan, const absl::StatusOr<EngineOutput>& output) const {
  if (!output.ok()) return output.status();
  const size_t rows = static_cast<size_t>(plan.num_logit_rows);
  if (output->logits.size() < rows * vocab_size_) {
    return absl::InternalError(
        absl::StrCat("the engine returned ", output->logits.size(),
                     " logits for ", rows, " rows of ", vocab_size_));
  }
  if (!rows_.empty() && output->tokens.size() < rows) {
    return absl::InternalError(absl::StrCat("the engine returned ",
                                            output->tokens.size(),
                                            " tokens for ", rows, " rows"));
  }
  return absl::OkStatus();
}

const StepTokens& StepSampler::Sample(
    const StepPlan& plan, const absl::StatusOr<EngineOutput>& output) {
  pool_.Wait();  // the masks EngineRows started
  tokens_.status = CheckOutput(plan, output);
  if (!tokens_.status.ok()) {
    tokens_.rows.clear();
    return tokens_;
  }
  tokens_.rows.resize(static_cast<size_t>(plan.num_logit_rows));
  for (const ScheduledRequest& s : plan.scheduled) {
    if (s.logits_row < 0) continue;
    const size_t j = static_cast<size_t>(s.logits_row);
    engine::SequenceSampler& sampler = s.request->sampler();
    if (s.num_draft > 0) {
      SampleDraftRows(s, output->logits);
      continue;
    }
    // The decision EngineRows made for this plan, not a second one.
    if (!rows_.empty() && rows_[j].in_engine) {
      TakeEngineToken(sampler, output->tokens[j], &tokens_.rows[j]);
    } else {
      SampleOnHost(sampler,
                   output->logits.subspan(j * vocab_size_, vocab_size_),
                   &tokens_.rows[j]);
    }
  }
  return tokens_;
}

void StepSampler::SampleDraftRows(const ScheduledRequest& s,
                                  absl::Span<const float> logits) {
  // The request's next token from its first row; while it equals the draft
  // token fed after it, that token's row is valid too and gives the next.
  // Rows past the first mismatch are left unsampled (Update reads no
  // further), so the sampler steps once per token Update appends (unless a
  // stop ends the request first; its sampler is not used again).
  const absl::Span<const int32_t> draft = s.request->draft();
  for (int32_t i = 0; i <= s.num_draft; ++i) {
    const size_t j = static_cast<size_t>(s.logits_row + i);
    SampledRow* row = &tokens_.rows[j];
    SampleOnHost(s.request->sampler(),
                 logits.subspan(j * vocab_size_, vocab_size_), row);
    if (!row->status.ok() || i == s.num_draft ||
        row->sample.token != draft[i]) {
      return;
    }
  }
}

void StepSampler::SampleOnHost(engine::SequenceSampler& sampler,
                               absl::Span<const float> logits,
                               SampledRow* row) {
  absl::StatusOr<engine::SampleResult> sample =
      sampler.Sample(logits, &scratch_);
  if (!sample.ok()) {
    row->status = sample.status();
    return;
  }
  row->status = absl::OkStatus();
  row->sample = *std::move(sample);
}

void StepSampler::TakeEngineToken(engine::SequenceSampler& sampler,
                                  int32_t token, SampledRow* row) const {
  if (token == engine::kNoAllowedToken) {
    row->status = absl::InternalError(
        absl::StrCat("the token mask allows no token at step ", sampler.step(),
                     " (sampled in the engine)"));
    return;
  }
  if (token < 0) {
    row->status = absl::InternalError(absl::StrCat(
        "logit of token ", engine::NonFiniteLogitId(token),
        " is not finite at step ", sampler.step(), " (sampled in the engine)"));
    return;
  }
  if (token >= vocab_size_) {
    row->status = absl::InternalError(
        absl::StrCat("the engine sampled token ", token,
                     ", outside the vocabulary of ", vocab_size_));
    return;
  }
  // In range (checked above); the mask refuses only a token the engine
  // sampled against it.
  const absl::Status accepted = sampler.AcceptGenerated(token);
  if (!accepted.ok()) {
    row->status = absl::InternalError(absl::StrCat(
        "the engine sampled token ", token, ": ", accepted.message()));
    return;
  }
  row->status = absl::OkStatus();
  row->sample.token = token;
  row->sample.logprob = 0.0f;
  row->sample.top_logprobs.clear();
}

}  // namespace paceline::scheduler
