#include "engine/cpu/kernel_choice.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/cpu/kernel_choice_cache.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/quantize.h"

namespace paceline::engine::cpu {
namespace {

// What one type's choice is made on.
struct TypeShape {
  GgmlType type = GgmlType::kF32;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  uint64_t total_bytes = 0;  // the model's matrices of the type
  uint64_t largest = 0;      // bytes of its largest matrix
};

std::map<GgmlType, TypeShape> ShapesByType(
    absl::Span<const WeightView> matrices) {
  std::map<GgmlType, TypeShape> shapes;
  for (const WeightView& w : matrices) {
    if (w.rows <= 0) continue;
    TypeShape& s = shapes[w.type];
    s.type = w.type;
    s.total_bytes += w.bytes();
    if (w.bytes() > s.largest || (w.bytes() == s.largest && w.cols > s.cols)) {
      s.largest = w.bytes();
      s.cols = w.cols;
      s.row_bytes = w.row_bytes;
    }
  }
  return shapes;
}

// Rows of the measured matrix: the type's bytes, within [16 rows,
// max_bytes], a multiple of 16.
int64_t MeasuredRows(const TypeShape& s, uint64_t max_bytes) {
  const uint64_t bytes = std::min(s.total_bytes, max_bytes);
  const int64_t rows = static_cast<int64_t>(bytes / s.row_bytes);
  return std::max<int64_t>(16, rows / 16 * 16);
}

std::string CacheKey(const KernelChoice& c, int threads,
                     const std::vector<IsaLevel>& candidates) {
  std::vector<std::string> names;
  for (IsaLevel l : candidates) names.emplace_back(IsaLevelName(l));
  return absl::StrCat(GetGgmlTypeTraits(c.type).name, " cols=", c.cols,
                      " rows=", c.rows, " threads=", threads,
                      " candidates=", absl::StrJoin(names, ","));
}

// A (rows, cols) matrix of `type`: one row quantized from random values,
// repeated (the kernels' speed does not depend on the values).
absl::StatusOr<std::vector<uint8_t>> SyntheticRows(GgmlType type, int64_t rows,
                                                   int64_t cols,
                                                   uint64_t row_bytes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(cols));
  for (float& v : values) v = normal(rng);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * row_bytes);
  RETURN_IF_ERROR(QuantizeRow(type, values.data(), cols, bytes.data()));
  for (int64_t r = 1; r < rows; ++r) {
    std::memcpy(bytes.data() + r * row_bytes, bytes.data(), row_bytes);
  }
  return bytes;
}

double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Times the candidates on one synthetic matrix, in alternating rounds.
class Measurement {
 public:
  Measurement(const KernelChoice& c, std::vector<uint8_t> rows,
              ThreadPool& pool)
      : rows_(std::move(rows)), pool_(pool) {
    row_view_ = {.type = c.type,
                 .rows = c.rows,
                 .cols = c.cols,
                 .data = rows_.data(),
                 .row_bytes = rows_.size() / static_cast<size_t>(c.rows)};
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    x_.resize(static_cast<size_t>(kBatchTokens * c.cols));
    for (float& v : x_) v = uniform(rng);
    y_.resize(static_cast<size_t>(kBatchTokens * c.rows));
  }

  // The view the kernels of `level` read fastest (packed once, when one
  // level wants panels).
  absl::StatusOr<WeightView> ViewFor(GgmlType type, IsaLevel level) {
    SetMatMulLevel(type, level);
    if (!MatMulPrefersPanels(type, row_view_.cols)) return row_view_;
    if (!packed_.has_value()) {
      ASSIGN_OR_RETURN(PackedMatrix packed, PackForMatMul(row_view_));
      packed_ = std::move(packed);
    }
    return packed_->view();
  }

  // Milliseconds of one MatMul of `tokens` tokens at `level`.
  absl::StatusOr<double> Time(GgmlType type, IsaLevel level, int64_t tokens) {
    ASSIGN_OR_RETURN(const WeightView w, ViewFor(type, level));
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(MatMul(w, x_.data(), tokens, y_.data(), pool_, scratch_));
    return Milliseconds(std::chrono::steady_clock::now() - start);
  }

 private:
  std::vector<uint8_t> rows_;
  ThreadPool& pool_;
  WeightView row_view_;
  std::optional<PackedMatrix> packed_;
  std::vector<float> x_, y_;
  MatMulScratch scratch_;
};

absl::Status Measure(KernelChoice& c, const std::vector<IsaLevel>& levels,
                     uint64_t row_bytes, const KernelChoiceOptions& options,
                     ThreadPool& pool) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> rows,
                   SyntheticRows(c.type, c.rows, c.cols, row_bytes));
  Measurement m(c, std::move(rows), pool);
  std::vector<std::vector<LevelTiming>> rounds;
  for (int round = 0; round <= options.rounds; ++round) {
    std::vector<LevelTiming> timings;
    for (IsaLevel l : levels) {
      ASSIGN_OR_RETURN(const double one, m.Time(c.type, l, 1));
      ASSIGN_OR_RETURN(const double batch, m.Time(c.type, l, kBatchTokens));
      timings.push_back({l, one, batch});
    }
    // Round 0 warms up caches, pages and the pool.
    if (round > 0) rounds.push_back(std::move(timings));
  }
  const LevelDecision d =
      DecideLevel(rounds, MatMulSameBitsAtEveryLevel(c.type) ? 0.0 : kMinGain);
  c.timings = d.timings;
  c.level = d.level;
  c.steady = d.steady;
  c.how = d.steady ? "measured" : "measured; rounds disagreed, not cached";
  return absl::OkStatus();
}

std::string TimingNote(const KernelChoice& c) {
  std::vector<std::string> one, batch;
  for (const LevelTiming& t : c.timings) {
    one.push_back(
        absl::StrFormat("%s %.3f ms", IsaLevelName(t.level), t.one_ms));
    batch.push_back(
        absl::StrFormat("%s %.3f ms", IsaLevelName(t.level), t.batch_ms));
  }
  return absl::StrCat("1 token ", absl::StrJoin(one, ", "), "; ", kBatchTokens,
                      " tokens ", absl::StrJoin(batch, ", "));
}

// The cache's entries, or none (with a warning) when it cannot be read.
KernelCacheEntries LoadCache(KernelChoices& out) {
  absl::StatusOr<KernelCacheEntries> entries = ReadKernelCache(out.cache_file);
  if (entries.ok()) return *std::move(entries);
  if (!absl::IsNotFound(entries.status())) {
    out.warnings.push_back(
        absl::StrCat(entries.status().message(), "; measuring again"));
  }
  return {};
}

}  // namespace

LevelDecision DecideLevel(absl::Span<const std::vector<LevelTiming>> rounds,
                          double min_gain) {
  LevelDecision d;
  if (rounds.empty() || rounds[0].empty()) return d;
  auto score = [](const LevelTiming& t) { return t.one_ms * t.batch_ms; };
  d.timings = rounds[0];
  for (const std::vector<LevelTiming>& round : rounds) {
    for (size_t i = 0; i < round.size() && i < d.timings.size(); ++i) {
      d.timings[i].one_ms = std::min(d.timings[i].one_ms, round[i].one_ms);
      d.timings[i].batch_ms =
          std::min(d.timings[i].batch_ms, round[i].batch_ms);
    }
  }
  // The highest level unless a lower one beats it by the margin.
  const double bar = score(d.timings.front()) * (1 - min_gain) * (1 - min_gain);
  const LevelTiming* best = &d.timings.front();
  for (const LevelTiming& t : d.timings) {
    if (score(t) < bar && score(t) < score(*best)) best = &t;
  }
  d.level = best->level;
  // Steady: every round alone finds the same level fastest as the minima.
  auto fastest = [&](const std::vector<LevelTiming>& ts) {
    return std::min_element(ts.begin(), ts.end(),
                            [&](const LevelTiming& a, const LevelTiming& b) {
                              return score(a) < score(b);
                            })
        ->level;
  };
  const IsaLevel overall = fastest(d.timings);
  for (const std::vector<LevelTiming>& round : rounds) {
    if (round.empty() || fastest(round) != overall) d.steady = false;
  }
  return d;
}

absl::StatusOr<KernelChoices> ChooseKernels(
    absl::Span<const WeightView> matrices, const KernelChoiceOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  KernelChoices out;
  ThreadPool pool(options.threads);
  KernelCacheEntries cache;
  if (!options.cache_dir.empty()) {
    out.cache_file = KernelCacheFile(options.cache_dir);
    cache = LoadCache(out);
  }
  bool measured = false;
  for (const auto& [type, shape] : ShapesByType(matrices)) {
    KernelChoice c;
    c.type = type;
    c.cols = shape.cols;
    c.rows = MeasuredRows(shape, options.max_bytes);
    const std::vector<IsaLevel> levels = MatMulCandidateLevels(type);
    c.level = levels.empty() ? MatMulLevel(type) : levels.front();
    const std::string key = CacheKey(c, pool.num_threads(), levels);
    IsaLevel cached;
    if (levels.size() < 2) {
      c.how = "one candidate";
    } else if (shape.total_bytes < options.min_bytes) {
      c.how = "too small to measure";
    } else if (auto it = cache.find(key);
               it != cache.end() && ParseIsaLevel(it->second.level, &cached) &&
               std::find(levels.begin(), levels.end(), cached) !=
                   levels.end()) {
      c.level = cached;
      c.how = "cached";
    } else {
      RETURN_IF_ERROR(Measure(c, levels, shape.row_bytes, options, pool));
      if (c.steady) {
        cache[key] = {std::string(IsaLevelName(c.level)), TimingNote(c)};
        measured = true;
      }
    }
    SetMatMulLevel(type, c.level);
    out.types.push_back(std::move(c));
  }
  if (measured && !out.cache_file.empty()) {
    if (absl::Status s = WriteKernelCache(out.cache_file, cache); !s.ok()) {
      out.warnings.push_back(
          absl::StrCat(s.message(), "; the choices will be measured again"));
    }
  }
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return out;
}

std::string KernelChoicesLine(const KernelChoices& choices) {
  std::vector<std::string> parts;
  for (const KernelChoice& c : choices.types) {
    std::string part = absl::StrCat(GetGgmlTypeTraits(c.type).name, " ",
                                    IsaLevelName(c.level), " (", c.how);
    if (!c.timings.empty()) {
      absl::StrAppend(&part, " on ", c.rows, " x ", c.cols, ": ",
                      TimingNote(c));
    }
    parts.push_back(absl::StrCat(part, ")"));
  }
  std::string line = absl::StrFormat(
      "kernel levels chosen in %.2f s: %s", choices.seconds,
      parts.empty() ? "no matrices" : absl::StrJoin(parts, "; "));
  if (!choices.cache_file.empty()) {
    absl::StrAppend(&line, " (cache ", choices.cache_file, ")");
  }
  return line;
}

}  // namespace paceline::engine::cpu
