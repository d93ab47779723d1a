#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/status_macros.h"

namespace paceline::engine {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// Without top-k, top-p first looks for its nucleus among the ids whose
// weight (probability relative to the most likely token) is at least this:
// a peaked distribution's nucleus is found without partitioning the whole
// vocabulary.
constexpr float kLikely = 1e-3f;

// SplitMix64's output function (Steele, Lea and Flood, 2014).
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The index of the first non-finite value of z[0, n), or -1. Checks the
// exponent bits a block at a time, branch-free, so the common case
// vectorizes.
int32_t FirstNonFinite(const float* z, int32_t n) {
  constexpr int32_t kBlock = 1024;
  for (int32_t begin = 0; begin < n; begin += kBlock) {
    const int32_t end = std::min(n, begin + kBlock);
    uint32_t bad = 0;
    for (int32_t i = begin; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &z[i], sizeof(bits));
      bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (bad != 0) {
      for (int32_t i = begin; i < end; ++i) {
        if (!std::isfinite(z[i])) return i;
      }
    }
  }
  return -1;
}

// The first index of the largest of z[0, n), n > 0, each finite or -inf
// (masked) and not all -inf. Eight independent running maxima, so the loop
// is not one long dependency chain.
int32_t ArgMax(const float* z, int32_t n) {
  constexpr int32_t kLanes = 8;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, z[0]);
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int32_t j = 0; j < kLanes; ++j) {
      lane[j] = z[i + j] > lane[j] ? z[i + j] : lane[j];
    }
  }
  float max = *std::max_element(lane, lane + kLanes);
  for (; i < n; ++i) max = z[i] > max ? z[i] : max;
  int32_t first = 0;
  while (z[first] != max) ++first;
  return first;
}

// The candidates' rank order: larger logit first, then lower id. The logits
// are finite here, so this is a total order and every selection below has
// one answer, whatever the standard library's algorithms do.
struct RanksBefore {
  const float* z;
  bool operator()(int32_t a, int32_t b) const {
    return z[a] > z[b] || (z[a] == z[b] && a < b);
  }
};

// Sets *out to the n first-ranked ids of [0, v), in no particular order;
// 0 < n <= v. A heap of the best n so far, its front the worst of them:
// most ids are turned away by one comparison.
void HeapTop(const RanksBefore& before, int32_t v, int32_t n,
             std::vector<int32_t>* out) {
  out->clear();
  for (int32_t i = 0; i < v; ++i) {
    if (out->size() < static_cast<size_t>(n)) {
      out->push_back(i);
      std::push_heap(out->begin(), out->end(), before);
    } else if (before(i, out->front())) {
      std::pop_heap(out->begin(), out->end(), before);
      out->back() = i;
      std::push_heap(out->begin(), out->end(), before);
    }
  }
}

// Sets *ids to every id of [0, v) that ranks no lower than `last`, in id
// order.
void KeepThrough(const RanksBefore& before, int32_t v, int32_t last,
                 std::vector<int32_t>* ids) {
  ids->clear();
  for (int32_t i = 0; i < v; ++i) {
    if (!before(last, i)) ids->push_back(i);
  }
}

// Sets *ids to the k first-ranked ids of [0, v) in id order; 0 < k < v.
void TopKInIdOrder(const RanksBefore& before, int32_t v, int32_t k,
                   std::vector<int32_t>* ids) {
  if (int64_t{k} * 16 <= v) {
    HeapTop(before, v, k, ids);
    std::sort(ids->begin(), ids->end());
    return;
  }
  ids->resize(v);
  std::iota(ids->begin(), ids->end(), 0);
  std::nth_element(ids->begin(), ids->begin() + (k - 1), ids->end(), before);
  KeepThrough(before, v, (*ids)[k - 1], ids);
}

// Moves the fewest first-ranked of `ids` whose weights (w, by id) sum to at
// least `target` to the front, and returns how many. A quickselect that
// carries the mass of each side: expected linear time, so a flat
// distribution's nucleus of most of the vocabulary is never sorted. Masses
// are summed in partition order, so an id whose cumulative mass lands
// within rounding of the target may fall either way; the partitioning is
// this code's own, so the answer is the same on every platform.
size_t TakeNucleus(const RanksBefore& before, const float* w, double target,
                   absl::Span<int32_t> ids) {
  size_t lo = 0;
  size_t hi = ids.size();
  double kept = 0.0;  // the mass of ids[0, lo), all in; below target
  while (lo < hi) {
    // The median (by rank) of the first, middle and last, parked at hi - 1.
    const size_t mid = lo + (hi - lo) / 2;
    if (before(ids[mid], ids[lo])) std::swap(ids[mid], ids[lo]);
    if (before(ids[hi - 1], ids[mid])) std::swap(ids[hi - 1], ids[mid]);
    if (before(ids[mid], ids[lo])) std::swap(ids[mid], ids[lo]);
    std::swap(ids[mid], ids[hi - 1]);
    const int32_t pivot = ids[hi - 1];

    size_t split = lo;
    double mass = 0.0;  // of the ids that rank before the pivot
    for (size_t i = lo; i + 1 < hi; ++i) {
      if (before(ids[i], pivot)) {
        mass += w[ids[i]];
        std::swap(ids[i], ids[split++]);
      }
    }
    std::swap(ids[split], ids[hi - 1]);
    if (kept + mass >= target) {
      hi = split;
    } else if (kept + mass + w[pivot] >= target) {
      return split + 1;
    } else {
      kept += mass + w[pivot];
      lo = split + 1;
    }
  }
  return lo;  // rounding left everything just short: all of it
}

// Keeps the first n of *ids (a rank prefix of [0, v)) in id order.
void PrefixInIdOrder(const RanksBefore& before, int32_t v, size_t n,
                     std::vector<int32_t>* ids) {
  if (n * 16 <= static_cast<size_t>(v)) {
    ids->resize(n);
    std::sort(ids->begin(), ids->end());
    return;
  }
  int32_t last = (*ids)[0];
  for (size_t j = 1; j < n; ++j) {
    if (before(last, (*ids)[j])) last = (*ids)[j];
  }
  KeepThrough(before, v, last, ids);
}

absl::Status NonFinite(absl::Span<const float> raw, const float* z,
                       int32_t token, uint64_t step) {
  if (std::isfinite(raw[token])) {
    return absl::InternalError(absl::StrFormat(
        "logit of token %d is %g after penalties and bias (raw %g) at step %d",
        token, z[token], raw[token], step));
  }
  return absl::InternalError(absl::StrFormat(
      "logit of token %d is %g at step %d", token, raw[token], step));
}

std::optional<SamplingParamError> Bad(SamplingField field, std::string reason) {
  return SamplingParamError{field, std::move(reason)};
}

// Comparisons in the Check* helpers are written so that NaN fails them.

// temperature, top_k, top_p, min_p.
std::optional<SamplingParamError> CheckFilters(const SamplingParams& p) {
  if (!(std::isfinite(p.temperature) && p.temperature >= 0.0f)) {
    return Bad(SamplingField::kTemperature,
               absl::StrFormat("must be finite and >= 0 (0 = greedy), got %g",
                               p.temperature));
  }
  if (p.top_k < 0) {
    return Bad(SamplingField::kTopK,
               absl::StrFormat("must be >= 0 (0 = off), got %d", p.top_k));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return Bad(SamplingField::kTopP,
               absl::StrFormat("must be in (0, 1], got %g", p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return Bad(SamplingField::kMinP,
               absl::StrFormat("must be in [0, 1], got %g", p.min_p));
  }
  return std::nullopt;
}

// repetition_penalty, presence_penalty, frequency_penalty.
std::optional<SamplingParamError> CheckPenalties(const SamplingParams& p) {
  if (!(p.repetition_penalty >= kMinRepetitionPenalty &&
        p.repetition_penalty <= kMaxRepetitionPenalty)) {
    return Bad(
        SamplingField::kRepetitionPenalty,
        absl::StrFormat("must be in [%g, %g], got %g", kMinRepetitionPenalty,
                        kMaxRepetitionPenalty, p.repetition_penalty));
  }
  if (!(std::fabs(p.presence_penalty) <= kMaxPresencePenalty)) {
    return Bad(
        SamplingField::kPresencePenalty,
        absl::StrFormat("must be in [-%g, %g], got %g", kMaxPresencePenalty,
                        kMaxPresencePenalty, p.presence_penalty));
  }
  if (!(std::fabs(p.frequency_penalty) <= kMaxFrequencyPenalty)) {
    return Bad(
        SamplingField::kFrequencyPenalty,
        absl::StrFormat("must be in [-%g, %g], got %g", kMaxFrequencyPenalty,
                        kMaxFrequencyPenalty, p.frequency_penalty));
  }
  return std::nullopt;
}

// top_logprobs (with logprobs).
std::optional<SamplingParamError> CheckLogprobs(const SamplingParams& p,
                                                int32_t vocab_size) {
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs) {
    return Bad(SamplingField::kTopLogprobs,
               absl::StrFormat("must be in [0, %d], got %d", kMaxTopLogprobs,
                               p.top_logprobs));
  }
  if (p.top_logprobs > vocab_size) {
    return Bad(SamplingField::kTopLogprobs,
               absl::StrFormat("must be at most the vocabulary size %d, got %d",
                               vocab_size, p.top_logprobs));
  }
  if (p.top_logprobs > 0 && !p.logprobs) {
    return Bad(SamplingField::kTopLogprobs, "requires logprobs to be set");
  }
  return std::nullopt;
}

// logit_bias: tokens in the vocabulary, once each; biases in range.
std::optional<SamplingParamError> CheckLogitBias(const SamplingParams& p,
                                                 int32_t vocab_size) {
  std::vector<int32_t> seen;
  seen.reserve(p.logit_bias.size());
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || token >= vocab_size) {
      return Bad(SamplingField::kLogitBias,
                 absl::StrFormat("names token %d, outside the vocabulary "
                                 "[0, %d)",
                                 token, vocab_size));
    }
    if (!(std::fabs(bias) <= kMaxLogitBias)) {
      return Bad(SamplingField::kLogitBias,
                 absl::StrFormat("for token %d must be in [-%g, %g], got %g",
                                 token, kMaxLogitBias, kMaxLogitBias, bias));
    }
    seen.push_back(token);
  }
  std::sort(seen.begin(), seen.end());
  const auto twice = std::adjacent_find(seen.begin(), seen.end());
  if (twice != seen.end()) {
    return Bad(SamplingField::kLogitBias,
               absl::StrFormat("names token %d twice", *twice));
  }
  return std::nullopt;
}

}  // namespace

absl::string_view SamplingFieldName(SamplingField field) {
  switch (field) {
    case SamplingField::kVocabSize:
      return "vocab_size";
    case SamplingField::kTemperature:
      return "temperature";
    case SamplingField::kTopK:
      return "top_k";
    case SamplingField::kTopP:
      return "top_p";
    case SamplingField::kMinP:
      return "min_p";
    case SamplingField::kRepetitionPenalty:
      return "repetition_penalty";
    case SamplingField::kPresencePenalty:
      return "presence_penalty";
    case SamplingField::kFrequencyPenalty:
      return "frequency_penalty";
    case SamplingField::kTopLogprobs:
      return "top_logprobs";
    case SamplingField::kLogitBias:
      return "logit_bias";
  }
  return "unknown";
}

std::optional<SamplingParamError> CheckSamplingParams(const SamplingParams& p,
                                                      int32_t vocab_size) {
  if (vocab_size <= 0) {
    return Bad(SamplingField::kVocabSize,
               absl::StrFormat("must be positive, got %d", vocab_size));
  }
  if (auto error = CheckFilters(p)) return error;
  if (auto error = CheckPenalties(p)) return error;
  if (auto error = CheckLogprobs(p, vocab_size)) return error;
  return CheckLogitBias(p, vocab_size);
}

absl::Status Validate(const SamplingParams& params, int32_t vocab_size) {
  const std::optional<SamplingParamError> error =
      CheckSamplingParams(params, vocab_size);
  if (!error.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(SamplingFieldName(error->field), " ", error->reason));
}

uint64_t SamplingRandomBits(uint64_t seed, uint64_t step) {
  const uint64_t key = Mix(seed + kGolden);
  return Mix(key + (step + 1) * kGolden);
}

double SamplingUniform(uint64_t seed, uint64_t step) {
  return static_cast<double>(SamplingRandomBits(seed, step) >> 11) * 0x1p-53;
}

SequenceSampler::SequenceSampler(const SamplingParams& params,
                                 int32_t vocab_size)
    : params_(params), vocab_size_(vocab_size) {}

absl::StatusOr<SequenceSampler> SequenceSampler::Create(
    const SamplingParams& params, int32_t vocab_size,
    absl::Span<const int32_t> prompt) {
  RETURN_IF_ERROR(Validate(params, vocab_size));
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "prompt token %d is %d, outside the vocabulary [0, %d)", i, prompt[i],
          vocab_size));
    }
  }
  SequenceSampler sampler(params, vocab_size);
  sampler.processors_ = MakeLogitsProcessors(params, prompt);
  if (params.mask != nullptr) sampler.mask_ = params.mask->Clone();
  return sampler;
}

bool SequenceSampler::EngineCanSample() const {
  return processors_.empty() && !params_.logprobs;
}

RowSampling SequenceSampler::EngineRow() const {
  RowSampling row;
  row.in_engine = true;
  row.temperature = params_.temperature;
  row.top_k = params_.top_k;
  row.top_p = params_.top_p;
  row.min_p = params_.min_p;
  row.uniform = SamplingUniform(params_.seed, step_);
  return row;
}

void SequenceSampler::ApplyProcessors(absl::Span<float> logits) const {
  assert(logits.size() == static_cast<size_t>(vocab_size_));
  for (const std::unique_ptr<LogitsProcessor>& p : processors_) {
    p->Apply(logits);
  }
}

void SequenceSampler::FillMask(absl::Span<uint32_t> allowed) {
  if (prefilled_valid_) {
    std::copy(prefilled_.begin(), prefilled_.end(), allowed.begin());
    return;
  }
  mask_->Fill(allowed);
}

void SequenceSampler::PrefillMask() {
  if (mask_ == nullptr || prefilled_valid_) return;
  prefilled_.resize(static_cast<size_t>(MaskWords(vocab_size_)));
  mask_->Fill(absl::MakeSpan(prefilled_));
  prefilled_valid_ = true;
}

bool SequenceSampler::ApplyMask(absl::Span<float> z, SamplerScratch* scratch) {
  std::vector<uint32_t>& allowed =
      prefilled_valid_ ? prefilled_ : scratch->mask_;
  if (!prefilled_valid_) {
    allowed.resize(static_cast<size_t>(MaskWords(vocab_size_)));
    mask_->Fill(absl::MakeSpan(allowed));
  }
  bool any = false;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (MaskAllows(allowed.data(), id)) {
      any = true;
    } else {
      z[id] = -std::numeric_limits<float>::infinity();
    }
  }
  return any;
}

// The mask has accepted `token` already (or has none).
void SequenceSampler::Record(int32_t token) {
  ++step_;
  for (std::unique_ptr<LogitsProcessor>& p : processors_) p->Accept(token);
}

void SequenceSampler::ForcedTokens(int32_t max,
                                   std::vector<int32_t>* out) const {
  if (mask_ != nullptr) mask_->ForcedTokens(max, out);
}

int32_t SequenceSampler::AllowedPrefix(absl::Span<const int32_t> tokens) const {
  if (mask_ == nullptr) return static_cast<int32_t>(tokens.size());
  return engine::AllowedPrefix(*mask_, tokens);
}

absl::Status SequenceSampler::AcceptGenerated(int32_t token) {
  if (token < 0 || token >= vocab_size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token %d is outside the vocabulary [0, %d)", token, vocab_size_));
  }
  if (mask_ != nullptr) {
    RETURN_IF_ERROR(mask_->Accept(token));
    prefilled_valid_ = false;
  }
  Record(token);
  return absl::OkStatus();
}

absl::StatusOr<SampleResult> SequenceSampler::Sample(
    absl::Span<const float> logits, SamplerScratch* scratch) {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("logits row has %d entries, vocabulary has %d",
                        logits.size(), vocab_size_));
  }
  const float* z = logits.data();
  if (!processors_.empty() || mask_ != nullptr) {
    scratch->logits_.assign(logits.begin(), logits.end());
    ApplyProcessors(absl::MakeSpan(scratch->logits_));
    z = scratch->logits_.data();
  }
  const int32_t bad = FirstNonFinite(z, vocab_size_);
  if (bad >= 0) return NonFinite(logits, z, bad, step_);
  if (mask_ != nullptr &&
      !ApplyMask(absl::MakeSpan(scratch->logits_), scratch)) {
    return absl::InternalError(
        absl::StrFormat("the token mask allows no token at step %d", step_));
  }
  const int32_t argmax = ArgMax(z, vocab_size_);

  SampleResult result;
  result.token =
      params_.temperature == 0.0f ? argmax : Draw(z, z[argmax], scratch);
  if (params_.logprobs) FillLogprobs(logits, &result, scratch);
  if (mask_ != nullptr) {
    // A token the mask allowed: its state advances with it.
    const absl::Status accepted = mask_->Accept(result.token);
    if (!accepted.ok()) {
      return absl::InternalError(absl::StrCat(
          "the token mask refused the token it allowed: ", accepted.message()));
    }
    prefilled_valid_ = false;
  }
  Record(result.token);
  return result;
}

// Steps 4–8 of the header on the finite row z whose largest value is max.
int32_t SequenceSampler::Draw(const float* z, float max,
                              SamplerScratch* scratch) const {
  const int32_t v = vocab_size_;
  const RanksBefore before{z};
  std::vector<int32_t>& ids = scratch->ids_;
  std::vector<float>& w = scratch->weights_;
  w.resize(v);

  // The survivors: every id when `all`, else `ids`, always in id order, so
  // the float sums below run in one canonical order.
  bool all = true;
  if (params_.top_k > 0 && params_.top_k < v) {
    TopKInIdOrder(before, v, params_.top_k, &ids);
    all = false;
  }
  const size_t count_k = all ? static_cast<size_t>(v) : ids.size();
  auto id_at = [&](size_t j) { return all ? static_cast<int32_t>(j) : ids[j]; };

  // w = exp((z - max) / T): the probability relative to the most likely
  // token, whose weight is exactly 1 and which survives every filter.
  double total = 0.0;
  double likely = 0.0;  // the mass of the weights >= kLikely
  for (size_t j = 0; j < count_k; ++j) {
    const int32_t id = id_at(j);
    w[id] = std::exp((z[id] - max) / params_.temperature);
    total += w[id];
    if (w[id] >= kLikely) likely += w[id];
  }

  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    if (all) {
      // Weights fall with rank, so the likely ids are a rank prefix; when
      // they reach the target the nucleus lies among them.
      ids.clear();
      for (int32_t id = 0; id < v; ++id) {
        if (likely < target || w[id] >= kLikely) ids.push_back(id);
      }
      all = false;
    }
    const size_t n = TakeNucleus(before, w.data(), target, absl::MakeSpan(ids));
    PrefixInIdOrder(before, v, n, &ids);
  }

  if (params_.min_p > 0.0f) {
    const float floor = params_.min_p;
    if (all) {
      ids.clear();
      for (int32_t id = 0; id < v; ++id) {
        if (w[id] >= floor) ids.push_back(id);
      }
      all = false;
    } else {
      std::erase_if(ids, [&](int32_t id) { return w[id] < floor; });
    }
  }

  // Inverse CDF over the survivors in ascending id order.
  const size_t count = all ? static_cast<size_t>(v) : ids.size();
  // Every id survived: the same sum as `total`, term for term in the same
  // order, already taken (a second pass over the vocabulary saved).
  double sum = all ? total : 0.0;
  for (size_t j = 0; !all && j < count; ++j) sum += w[id_at(j)];
  const double target = SamplingUniform(params_.seed, step_) * sum;
  double cumulative = 0.0;
  size_t last = 0;  // the last survivor with a non-zero weight
  for (size_t j = 0; j < count; ++j) {
    const float weight = w[id_at(j)];
    cumulative += weight;
    if (weight > 0.0f) last = j;
    if (cumulative > target) return id_at(j);
  }
  return id_at(last);  // u * sum rounded up to sum
}

void SequenceSampler::FillLogprobs(absl::Span<const float> logits,
                                   SampleResult* result,
                                   SamplerScratch* scratch) const {
  const float max = logits[ArgMax(logits.data(), vocab_size_)];
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - max);
  const double log_normalizer = max + std::log(sum);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(logits[id] - log_normalizer);
  };
  result->logprob = logprob(result->token);
  const int32_t n = params_.top_logprobs;
  if (n == 0) return;
  const RanksBefore before{logits.data()};
  HeapTop(before, vocab_size_, n, &scratch->ids_);
  std::sort(scratch->ids_.begin(), scratch->ids_.end(), before);
  result->top_logprobs.reserve(n);
  for (int32_t id : scratch->ids_) {
    result->top_logprobs.push_back({id, logprob(id)});
  }
}

}  // namespace paceline::engine
