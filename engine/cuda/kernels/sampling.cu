// Engine-side sampling on the device: one block of kThreads per logits row,
// the rule of engine/row_sampling.h in passes over the row (which stays in
// L2 between them):
//   1. first non-finite id, largest allowed logit (the token mask,
//      RowSampling::allowed) and its lowest id (block reduce); greedy rows
//      end here;
//   2. top-k: radix selection of the k-th rank key by counts, a digit per
//      pass (row_sampling_math.h, KeySelect; most rows finish in 2–4);
//   3. top-p: the survivors' mass, then radix selection by mass;
//   4. draw: each warp owns a contiguous range of ids and sums its
//      survivors' mass; thread 0 finds the warp the target falls in, and
//      that warp walks its range 32 ids at a time with a warp scan.
// Masses are integers (2^-40 units), so every sum is exact whatever order
// the threads add in, and the result equals the host's SampleRow.
// Histograms are built with warp-aggregated shared-memory atomics (one
// atomic per distinct bin per warp), so the first digits, where most ids
// share a few bins, do not serialize on one address.
#include <climits>
#include <cstdint>

#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/sampling.h"
#include "engine/sampling/row_sampling_math.h"

namespace paceline::engine::cuda {
namespace {

using sampling::kBins;
using sampling::KeySelect;
using sampling::Mass;
using sampling::RankKey;
using sampling::Weight;

// 512 threads: ptxas keeps the kernel in 64 registers without spilling (at
// 1024 it is held to 32 and spills).
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
static_assert(kWarps <= 32, "ScanRow reduces the warps' results in one warp");
constexpr unsigned kFull = 0xffffffffu;

using u64 = unsigned long long;  // the atomics' and shuffles' type
static_assert(sizeof(u64) == sizeof(uint64_t));

struct Shared {
  uint32_t count[kBins];
  u64 sum[kBins];
  u64 max_key[kBins];
  KeySelect select;
  u64 warp_sum[kWarps];
  int32_t warp_a[kWarps];
  int32_t warp_b[kWarps];
  float warp_max[kWarps];
  float max;
  int32_t argmax;
  int32_t bad;
  int32_t draw_warp;
  u64 draw_base;
  u64 t;
  int32_t token;
};

// The row as every thread sees it. A masked id has key 0 (below every
// floor) and weight 0, as on the host.
struct Row {
  const float* z;
  int32_t v;
  float max;
  float temperature;
  float min_p;
  const uint32_t* allowed;

  __device__ bool Allows(int32_t id) const { return MaskAllows(allowed, id); }
  __device__ uint64_t Key(int32_t id) const {
    return Allows(id) ? RankKey(z[id], id) : 0;
  }
  __device__ float W(int32_t id) const {
    return Allows(id) ? Weight(z[id], max, temperature) : 0.0f;
  }
  // The draw's mass of `id` given the surviving keys (>= floor).
  __device__ uint64_t SurvivorMass(int32_t id, uint64_t floor) const {
    if (Key(id) < floor) return 0;
    const float w = W(id);
    return w >= min_p ? Mass(w) : 0;
  }
};

__device__ u64 WarpSum(u64 x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(kFull, x, off);
  return x;
}

__device__ u64 WarpMax(u64 x) {
  for (int off = 16; off > 0; off >>= 1) {
    const u64 o = __shfl_xor_sync(kFull, x, off);
    x = o > x ? o : x;
  }
  return x;
}

__device__ int32_t WarpMaxInt(int32_t x) {
  for (int off = 16; off > 0; off >>= 1)
    x = max(x, __shfl_xor_sync(kFull, x, off));
  return x;
}

__device__ int32_t WarpMinInt(int32_t x) {
  for (int off = 16; off > 0; off >>= 1)
    x = min(x, __shfl_xor_sync(kFull, x, off));
  return x;
}

// The better of two (logit, id) pairs: larger logit, then lower id.
__device__ void WarpArgMax(float* value, int32_t* id) {
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(kFull, *value, off);
    const int32_t oi = __shfl_xor_sync(kFull, *id, off);
    if (ov > *value || (ov == *value && oi < *id)) {
      *value = ov;
      *id = oi;
    }
  }
}

// Pass 1 into sh.bad (INT_MAX when every logit is finite), sh.max and
// sh.argmax (INT_MAX when the mask allows no id).
__device__ void ScanRow(const float* z, int32_t v, const uint32_t* allowed,
                        Shared& sh) {
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  int32_t bad = INT_MAX;
  float best = -INFINITY;
  int32_t best_id = INT_MAX;
  for (int32_t id = tid; id < v; id += kThreads) {
    const float x = z[id];
    if (!sampling::IsFinite(x)) {
      bad = min(bad, id);
    } else if (x > best && MaskAllows(allowed, id)) {
      // ids rise, so the first of equals stays
      best = x;
      best_id = id;
    }
  }
  bad = WarpMinInt(bad);
  WarpArgMax(&best, &best_id);
  if (lane == 0) {
    sh.warp_a[warp] = bad;
    sh.warp_b[warp] = best_id;
    sh.warp_max[warp] = best;
  }
  __syncthreads();
  if (warp == 0) {
    const bool has = lane < kWarps;
    bad = has ? sh.warp_a[lane] : INT_MAX;
    best = has ? sh.warp_max[lane] : -INFINITY;
    best_id = has ? sh.warp_b[lane] : INT_MAX;
    bad = WarpMinInt(bad);
    WarpArgMax(&best, &best_id);
    if (lane == 0) {
      sh.bad = bad;
      sh.max = best;
      sh.argmax = best_id;
    }
  }
  __syncthreads();
}

// One level of the radix selection: histograms the candidates (key >=
// floor, matching the chosen digits) into sh.count / sum / max_key.
__device__ void Histogram(const Row& row, uint64_t floor, bool by_mass,
                          Shared& sh) {
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  for (int b = tid; b < kBins; b += kThreads) {
    sh.count[b] = 0;
    sh.sum[b] = 0;
    sh.max_key[b] = 0;
  }
  __syncthreads();
  const KeySelect select = sh.select;
  for (int32_t begin = 0; begin < row.v; begin += kThreads) {
    const int32_t id = begin + tid;
    bool has = id < row.v;
    uint64_t key = 0;
    if (has) {
      key = row.Key(id);
      has = key >= floor && select.Matches(key);
    }
    const int bin = has ? select.Bin(key) : -1;
    const u64 f = has ? (by_mass ? Mass(row.W(id)) : 1) : 0;
    // One atomic per distinct bin of the warp.
    unsigned pending = __ballot_sync(kFull, has);
    while (pending != 0) {
      const int leader = __ffs(pending) - 1;
      const int leader_bin = __shfl_sync(kFull, bin, leader);
      const bool mine = has && bin == leader_bin;
      const unsigned group = __ballot_sync(kFull, mine);
      const u64 sum = WarpSum(mine ? f : 0);
      const u64 max_key = WarpMax(mine ? key : 0);
      if (lane == leader) {
        atomicAdd(&sh.count[leader_bin], static_cast<uint32_t>(__popc(group)));
        atomicAdd(&sh.sum[leader_bin], sum);
        atomicMax(&sh.max_key[leader_bin], max_key);
      }
      pending &= ~group;
    }
  }
  __syncthreads();
}

// KeySelect over the row: see row_sampling_math.h.
__device__ uint64_t SelectKey(const Row& row, uint64_t floor, bool by_mass,
                              double target, Shared& sh) {
  if (threadIdx.x == 0) sh.select = KeySelect();
  __syncthreads();
  while (!sh.select.done) {
    Histogram(row, floor, by_mass, sh);
    if (threadIdx.x == 0) {
      sh.select.Next(sh.count, reinterpret_cast<const uint64_t*>(sh.sum),
                     reinterpret_cast<const uint64_t*>(sh.max_key), target);
    }
    __syncthreads();
  }
  return sh.select.key;
}

// The mass of the keys >= floor, on every thread.
__device__ uint64_t KeptMass(const Row& row, uint64_t floor, Shared& sh) {
  const int tid = threadIdx.x;
  u64 sum = 0;
  for (int32_t id = tid; id < row.v; id += kThreads) {
    if (row.Key(id) >= floor) sum += Mass(row.W(id));
  }
  sum = WarpSum(sum);
  if ((tid & 31) == 0) sh.warp_sum[tid >> 5] = sum;
  __syncthreads();
  u64 total = 0;
  for (int w = 0; w < kWarps; ++w) total += sh.warp_sum[w];
  __syncthreads();  // warp_sum is reused
  return total;
}

// Pass 4: the draw, into sh.token.
__device__ void Draw(const Row& row, uint64_t floor, double uniform,
                     Shared& sh) {
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // Warp w owns ids [w * span, (w + 1) * span), a multiple of 32 ids.
  const int32_t span = ((row.v + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int32_t begin = warp * span;
  const int32_t end = min(row.v, begin + span);
  u64 sum = 0;
  int32_t last = -1;
  for (int32_t id = begin + lane; id < end; id += 32) {
    const uint64_t m = row.SurvivorMass(id, floor);
    sum += m;
    if (m > 0) last = id;
  }
  sum = WarpSum(sum);
  last = WarpMaxInt(last);
  if (lane == 0) {
    sh.warp_sum[warp] = sum;
    sh.warp_a[warp] = last;
  }
  __syncthreads();
  if (tid == 0) {
    u64 total = 0;
    int32_t last_any = -1;
    for (int w = 0; w < kWarps; ++w) {
      total += sh.warp_sum[w];
      last_any = max(last_any, sh.warp_a[w]);
    }
    const auto t = static_cast<u64>(uniform * static_cast<double>(total));
    sh.t = t;
    sh.draw_warp = -1;
    sh.token = last_any;  // rounding put t at the total
    u64 base = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (t < base + sh.warp_sum[w]) {
        sh.draw_warp = w;
        sh.draw_base = base;
        break;
      }
      base += sh.warp_sum[w];
    }
  }
  __syncthreads();
  if (warp != sh.draw_warp) return;
  const u64 t = sh.t;
  u64 running = sh.draw_base;
  for (int32_t tile = begin; tile < end; tile += 32) {
    const int32_t id = tile + lane;
    const u64 m = id < end ? row.SurvivorMass(id, floor) : 0;
    u64 scan = m;  // inclusive warp scan
    for (int off = 1; off < 32; off <<= 1) {
      const u64 o = __shfl_up_sync(kFull, scan, off);
      if (lane >= off) scan += o;
    }
    const unsigned hit = __ballot_sync(kFull, running + scan > t);
    if (hit != 0) {
      if (lane == __ffs(hit) - 1) sh.token = id;
      return;
    }
    running += __shfl_sync(kFull, scan, 31);
  }
}

__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* logits, int64_t vocab,
                     const RowSampling* params, int32_t* tokens) {
  alignas(16) __shared__ unsigned char storage[sizeof(Shared)];
  Shared& sh = *reinterpret_cast<Shared*>(storage);
  const RowSampling s = params[blockIdx.x];
  if (!s.in_engine) return;
  const float* z = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const int32_t v = static_cast<int32_t>(vocab);
  ScanRow(z, v, s.allowed, sh);
  if (sh.bad != INT_MAX || sh.argmax == INT_MAX || s.temperature == 0.0f) {
    if (threadIdx.x == 0) {
      tokens[blockIdx.x] = sh.bad != INT_MAX      ? -1 - sh.bad
                           : sh.argmax == INT_MAX ? kNoAllowedToken
                                                  : sh.argmax;
    }
    return;
  }
  const Row row{z, v, sh.max, s.temperature, s.min_p, s.allowed};
  uint64_t floor = sampling::kFirstFloor;
  if (s.top_k > 0 && s.top_k < v) {
    floor = SelectKey(row, floor, /*by_mass=*/false,
                      static_cast<double>(s.top_k), sh);
  }
  if (s.top_p < 1.0f) {
    const uint64_t kept = KeptMass(row, floor, sh);
    const double target =
        static_cast<double>(s.top_p) * static_cast<double>(kept);
    floor = SelectKey(row, floor, /*by_mass=*/true, target, sh);
  }
  Draw(row, floor, s.uniform, sh);
  __syncthreads();
  if (threadIdx.x == 0) tokens[blockIdx.x] = sh.token;
}

}  // namespace

cudaError_t LaunchSampleRows(const float* logits, int64_t rows, int64_t vocab,
                             const RowSampling* params, int32_t* tokens,
                             cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (vocab <= 0 || vocab > INT_MAX || rows > INT_MAX) {
    return cudaErrorInvalidValue;
  }
  LaunchKernel(SampleRowsKernel, static_cast<unsigned>(rows), kThreads, stream,
               logits, vocab, params, tokens);
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
