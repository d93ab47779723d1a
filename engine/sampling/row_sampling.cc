#include "engine/sampling/row_sampling.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "absl/types/span.h"
#include "engine/sampling/row_sampling_math.h"

namespace paceline::engine {
namespace {

using sampling::kBins;
using sampling::KeySelect;
using sampling::Mass;
using sampling::RankKey;
using sampling::Weight;

// The row with its largest logit and temperature: every per-id quantity of
// the rule, computed the way the CUDA kernel computes it.
// A masked id has key 0, below every allowed id's (and below kFirstFloor),
// and weight 0.
struct Row {
  absl::Span<const float> z;
  float max = 0.0f;
  float temperature = 1.0f;
  const uint32_t* allowed = nullptr;

  int32_t size() const { return static_cast<int32_t>(z.size()); }
  bool Allows(int32_t id) const { return MaskAllows(allowed, id); }
  uint64_t Key(int32_t id) const { return Allows(id) ? RankKey(z[id], id) : 0; }
  float W(int32_t id) const {
    return Allows(id) ? Weight(z[id], max, temperature) : 0.0f;
  }
};

// The largest key K among the keys >= `floor` with sum of f (1, or the
// mass when `by_mass`) over keys >= K reaching `target`: one pass over the
// row per digit, as the kernel does (row_sampling_math.h, KeySelect).
uint64_t SelectKey(const Row& row, uint64_t floor, bool by_mass,
                   double target) {
  KeySelect select;
  uint32_t count[kBins];
  uint64_t sum[kBins];
  uint64_t max_key[kBins];
  while (!select.done) {
    std::fill(count, count + kBins, 0u);
    std::fill(sum, sum + kBins, uint64_t{0});
    std::fill(max_key, max_key + kBins, uint64_t{0});
    for (int32_t id = 0; id < row.size(); ++id) {
      const uint64_t key = row.Key(id);
      if (key < floor || !select.Matches(key)) continue;
      const int b = select.Bin(key);
      ++count[b];
      sum[b] += by_mass ? Mass(row.W(id)) : 1;
      max_key[b] = std::max(max_key[b], key);
    }
    select.Next(count, sum, max_key, target);
  }
  return select.key;
}

}  // namespace

int32_t SampleRow(absl::Span<const float> z, const RowSampling& s) {
  assert(!z.empty());
  const int32_t v = static_cast<int32_t>(z.size());
  // 1–2: the first non-finite logit, and the largest allowed (lowest id on
  // ties).
  int32_t argmax = -1;
  for (int32_t id = 0; id < v; ++id) {
    if (!sampling::IsFinite(z[id])) return -1 - id;
    if (MaskAllows(s.allowed, id) && (argmax < 0 || z[id] > z[argmax])) {
      argmax = id;
    }
  }
  if (argmax < 0) return kNoAllowedToken;
  if (s.temperature == 0.0f) return argmax;
  const Row row{z, z[argmax], s.temperature, s.allowed};

  // 4–5: survivors are the ids whose key is >= floor.
  uint64_t floor = sampling::kFirstFloor;
  if (s.top_k > 0 && s.top_k < v) {
    floor = SelectKey(row, floor, /*by_mass=*/false, s.top_k);
  }
  if (s.top_p < 1.0f) {
    uint64_t kept = 0;
    for (int32_t id = 0; id < v; ++id) {
      if (row.Key(id) >= floor) kept += Mass(row.W(id));
    }
    const double target =
        static_cast<double>(s.top_p) * static_cast<double>(kept);
    floor = SelectKey(row, floor, /*by_mass=*/true, target);
  }

  // 6–7: the draw, in id order.
  auto survivor_mass = [&](int32_t id) -> uint64_t {
    if (row.Key(id) < floor) return 0;
    const float w = row.W(id);
    return w >= s.min_p ? Mass(w) : 0;
  };
  uint64_t total = 0;
  for (int32_t id = 0; id < v; ++id) total += survivor_mass(id);
  const auto t = static_cast<uint64_t>(s.uniform * static_cast<double>(total));
  uint64_t running = 0;
  int32_t last = argmax;  // the last survivor with mass
  for (int32_t id = 0; id < v; ++id) {
    const uint64_t m = survivor_mass(id);
    if (m == 0) continue;
    running += m;
    last = id;
    if (running > t) return id;
  }
  return last;
}

}  // namespace paceline::engine
