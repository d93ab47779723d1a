// Paged causal attention: a per-token kernel (decode, and any step) with an
// optional split over the context and a merge kernel, and a tiled kernel
// for prefill chunks (paged_attention.h).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/kv_dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/paged_attention.h"

namespace paceline::engine::cuda {
namespace {

constexpr int kWarps = 4;
// Below this many (token, head) blocks a step splits its contexts.
constexpr int64_t kTargetBlocks = 512;
constexpr int64_t kMinSplitLen = 256;
constexpr int kMaxSplits = 64;

// Row `which` (0 = K, 1 = V) of position `slot` of a block for one KV
// head: (num_blocks, 2, n_kv_heads, block_size) rows of row_bytes.
__device__ __forceinline__ const uint8_t* KvRow(const uint8_t* kv,
                                                int64_t row_bytes,
                                                int64_t n_kv_heads,
                                                int64_t block_size,
                                                int64_t block, int64_t which,
                                                int64_t kv_head, int64_t slot) {
  return kv +
         (((block * 2 + which) * n_kv_heads + kv_head) * block_size + slot) *
             row_bytes;
}

// The first position a token at `pos` attends to (paged_attention.h).
__device__ __forceinline__ int64_t WindowFirst(int64_t pos, int64_t window) {
  return window > 0 ? max(int64_t{0}, pos - window + 1) : 0;
}

// A softmax denominator `l` (relative to max `m`, finite) with the sink
// logit joined, as llama.cpp's flash attention joins it after the last
// position; *c: the factor the accumulators take first (e^(m - sink) when
// the sink is the larger, else 1).
__device__ __forceinline__ float JoinSink(float sink, float m, float l,
                                          float* c) {
  if (sink > m) {
    *c = expf(m - sink);
    return l * *c + 1.0f;
  }
  *c = 1.0f;
  return l + expf(sink - m);
}

// Lane `lane` holds elements lane + 32 i, i < kPerLane, of a head. T: the
// output's type; K: the cache's (kv_dtype.cuh). Split `split` covers
// [first + split * split_len, ...) of the token's window.
template <typename T, typename K, int kPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    PagedAttentionKernel(PagedAttentionParams p, const uint8_t* kv,
                         int num_splits, int64_t split_len) {
  __shared__ float s_m[kWarps];
  __shared__ float s_l[kWarps];
  __shared__ float s_acc[kWarps][kPerLane * 32];
  const int64_t h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int64_t split = blockIdx.z;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t hd = p.head_dim;
  const int64_t bs = p.block_size;
  const int64_t kv_head = h / (p.n_heads / p.n_kv_heads);
  const int64_t row_bytes = KvRowBytesOf<K>(hd);
  const int64_t n_ctx = static_cast<int64_t>(p.positions[t]) + 1;
  const int64_t begin = WindowFirst(n_ctx - 1, p.window) + split * split_len;
  const int64_t end = min(n_ctx, begin + split_len);
  const float* q = p.q + t * p.q_stride + h * hd;
  const int32_t* table = p.block_tables + p.table_offsets[t];

  float qr[kPerLane];
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    qr[i] = d < hd ? q[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY;
  float l = 0.0f;
  for (int64_t pos = begin + warp; pos < end; pos += kWarps) {
    const int64_t block = table[pos / bs];
    const int64_t slot = pos - (pos / bs) * bs;
    const uint8_t* k =
        KvRow(kv, row_bytes, p.n_kv_heads, bs, block, 0, kv_head, slot);
    const uint8_t* v =
        KvRow(kv, row_bytes, p.n_kv_heads, bs, block, 1, kv_head, slot);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < hd) dot += qr[i] * LoadKv<K>(k, d);
    }
    const float score = WarpSum(dot) * p.scale;
    const float m_new = fmaxf(m, score);
    const float c = expf(m - m_new);  // 0 on the first position
    const float e = expf(score - m_new);
    l = l * c + e;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < hd) acc[i] = acc[i] * c + e * LoadKv<K>(v, d);
    }
    m = m_new;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    if (d < hd) s_acc[warp][d] = acc[i];
  }
  __syncthreads();
  float big_m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) {
    if (s_l[w] > 0.0f) big_m = fmaxf(big_m, s_m[w]);
  }
  float weight[kWarps];
  float big_l = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = s_l[w] > 0.0f ? expf(s_m[w] - big_m) : 0.0f;
    big_l += s_l[w] * weight[w];
  }
  const int64_t row = t * p.n_heads + h;
  if (num_splits == 1) {
    T* out = static_cast<T*>(p.out) + row * hd;
    float c = 1.0f;
    if (p.sinks != nullptr) big_l = JoinSink(p.sinks[h], big_m, big_l, &c);
    const float inv = c * (1.0f / big_l);  // 1 / big_l without a sink
    for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
      float a = 0.0f;
      for (int w = 0; w < kWarps; ++w) a += s_acc[w][d] * weight[w];
      out[d] = FromFloat<T>(a * inv);
    }
    return;
  }
  float* part = p.partial + (row * num_splits + split) * (hd + 2);
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) a += s_acc[w][d] * weight[w];
    part[d] = a;
  }
  if (threadIdx.x == 0) {
    part[hd] = big_m;
    part[hd + 1] = big_l;
  }
}

// The tiled kernel: one block of kTileThreads per (head, tile). Thread
// (r, j) = (tid / 8, tid % 8) owns query row r of the tile, the chunk's
// positions j, j + 8, ... for scores, and output elements j, j + 8, ...;
// the 8 threads of a row sit in one warp and reduce with shuffles.
constexpr int kTileThreads = kAttentionTileTokens * 8;

template <int kHd>
constexpr int TileChunk() {  // K/V positions per shared-memory chunk
  return kHd <= 64 ? 64 : kHd <= 128 ? 32 : 8;
}

__device__ __forceinline__ float RowMax8(float x) {
  for (int off = 1; off < 8; off <<= 1) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  }
  return x;
}

__device__ __forceinline__ float RowSum8(float x) {
  for (int off = 1; off < 8; off <<= 1) {
    x += __shfl_xor_sync(0xffffffffu, x, off);
  }
  return x;
}

template <typename T, typename K, int kHd>
__global__ void __launch_bounds__(kTileThreads)
    TiledAttentionKernel(PagedAttentionParams p, const uint8_t* kv) {
  constexpr int kQ = kAttentionTileTokens;
  constexpr int kChunk = TileChunk<kHd>();
  constexpr int kPerRow = kChunk / 8;  // scores per thread per chunk
  constexpr int kOut = kHd / 8;        // output elements per thread
  // Rows padded by one float: the rows a warp reads at once fall in
  // different banks.
  __shared__ float sq[kQ][kHd + 1];
  __shared__ float sk[kChunk][kHd + 1];
  __shared__ float sv[kChunk][kHd + 1];
  __shared__ float sp[kQ][kChunk + 1];

  const int tile = blockIdx.y;
  if (tile >= p.tiles[0]) return;
  const int64_t h = blockIdx.x;
  const int32_t t0 = p.tiles[1 + 2 * tile];
  const int count = p.tiles[2 + 2 * tile];
  const int tid = threadIdx.x;
  const int r = tid / 8;
  const int j = tid % 8;
  const int64_t hd = p.head_dim;
  const int64_t bs = p.block_size;
  const int64_t kv_head = h / (p.n_heads / p.n_kv_heads);
  const int64_t row_bytes = KvRowBytesOf<K>(hd);
  const int64_t pos0 = p.positions[t0];
  const int64_t n_ctx = pos0 + count;  // the tile's last query sees all
  // The first position of the tile's windows: the first row's.
  const int64_t first0 = WindowFirst(pos0, p.window);
  const int32_t* table = p.block_tables + p.table_offsets[t0];

  for (int e = tid; e < kQ * hd; e += kTileThreads) {
    const int rr = e / static_cast<int>(hd);
    const int d = e - rr * static_cast<int>(hd);
    sq[rr][d] =
        rr < count ? p.q[(t0 + rr) * p.q_stride + h * hd + d] * p.scale : 0.0f;
  }
  const int64_t my_pos = pos0 + r;
  const int64_t my_first = WindowFirst(my_pos, p.window);
  const bool valid = r < count;
  float m = -INFINITY;
  float l = 0.0f;
  float acc[kOut];
#pragma unroll
  for (int i = 0; i < kOut; ++i) acc[i] = 0.0f;

  for (int64_t c0 = first0 / kChunk * kChunk; c0 < n_ctx; c0 += kChunk) {
    __syncthreads();  // the previous chunk is consumed (and sq written)
    for (int e = tid; e < kChunk * hd; e += kTileThreads) {
      const int pp = e / static_cast<int>(hd);
      const int d = e - pp * static_cast<int>(hd);
      const int64_t pos = c0 + pp;
      float k = 0.0f;
      float v = 0.0f;
      if (pos < n_ctx && pos >= first0) {
        const int64_t block = table[pos / bs];
        const int64_t slot = pos - (pos / bs) * bs;
        k = LoadKv<K>(
            KvRow(kv, row_bytes, p.n_kv_heads, bs, block, 0, kv_head, slot), d);
        v = LoadKv<K>(
            KvRow(kv, row_bytes, p.n_kv_heads, bs, block, 1, kv_head, slot), d);
      }
      sk[pp][d] = k;
      sv[pp][d] = v;
    }
    __syncthreads();

    float s[kPerRow];
    float chunk_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPerRow; ++i) {
      const int pp = j + 8 * i;
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dot += sq[r][d] * sk[pp][d];
      const int64_t pos = c0 + pp;
      s[i] = valid && pos <= my_pos && pos >= my_first ? dot : -INFINITY;
      chunk_max = fmaxf(chunk_max, s[i]);
    }
    const float m_new = fmaxf(m, RowMax8(chunk_max));
    // Rows with nothing visible yet (only padding rows) keep m = -inf.
    const float c = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerRow; ++i) {
      const float e = s[i] == -INFINITY ? 0.0f : expf(s[i] - m_new);
      sp[r][j + 8 * i] = e;
      sum += e;
    }
    l = l * c + RowSum8(sum);
    m = m_new;
    __syncwarp();  // row r's probabilities come from its own warp
#pragma unroll
    for (int i = 0; i < kOut; ++i) acc[i] *= c;
    for (int pp = 0; pp < kChunk; ++pp) {
      const float e = sp[r][pp];
#pragma unroll
      for (int i = 0; i < kOut; ++i) {
        const int d = j + 8 * i;
        if (d < hd) acc[i] += e * sv[pp][d];
      }
    }
  }
  if (!valid) return;
  T* out = static_cast<T*>(p.out) + ((t0 + r) * p.n_heads + h) * hd;
  float c = 1.0f;
  if (p.sinks != nullptr) l = JoinSink(p.sinks[h], m, l, &c);
  const float inv = c * (1.0f / l);  // 1 / l without a sink
#pragma unroll
  for (int i = 0; i < kOut; ++i) {
    const int d = j + 8 * i;
    if (d < hd) out[d] = FromFloat<T>(acc[i] * inv);
  }
}

// Merges the splits of one (head, token): out = sum_s acc_s e^(m_s - M) /
// sum_s l_s e^(m_s - M), the sink joined to the denominator last. Empty
// splits have l = 0.
template <typename T>
__global__ void MergeSplitsKernel(PagedAttentionParams p, int num_splits) {
  const int64_t row = static_cast<int64_t>(blockIdx.y) * p.n_heads + blockIdx.x;
  const int64_t hd = p.head_dim;
  const float* part = p.partial + row * num_splits * (hd + 2);
  float big_m = -INFINITY;
  for (int s = 0; s < num_splits; ++s) {
    const float* ps = part + s * (hd + 2);
    if (ps[hd + 1] > 0.0f) big_m = fmaxf(big_m, ps[hd]);
  }
  float big_l = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const float* ps = part + s * (hd + 2);
    if (ps[hd + 1] > 0.0f) big_l += ps[hd + 1] * expf(ps[hd] - big_m);
  }
  float c = 1.0f;
  if (p.sinks != nullptr)
    big_l = JoinSink(p.sinks[blockIdx.x], big_m, big_l, &c);
  const float inv = c * (1.0f / big_l);  // 1 / big_l without a sink
  T* out = static_cast<T*>(p.out) + row * hd;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0.0f;
    for (int s = 0; s < num_splits; ++s) {
      const float* ps = part + s * (hd + 2);
      if (ps[hd + 1] > 0.0f) a += ps[d] * expf(ps[hd] - big_m);
    }
    out[d] = FromFloat<T>(a * inv);
  }
}

template <typename T, typename K, int kPerLane>
cudaError_t Launch(const PagedAttentionParams& p, int num_splits,
                   int64_t split_len, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_heads),
                  static_cast<unsigned>(p.n_tokens),
                  static_cast<unsigned>(num_splits));
  LaunchKernel(PagedAttentionKernel<T, K, kPerLane>, grid, kWarps * 32, stream,
               p, static_cast<const uint8_t*>(p.kv_layer), num_splits,
               split_len);
  if (num_splits > 1) {
    const dim3 merge_grid(static_cast<unsigned>(p.n_heads),
                          static_cast<unsigned>(p.n_tokens));
    LaunchKernel(MergeSplitsKernel<T>, merge_grid, 128, stream, p, num_splits);
  }
  return cudaGetLastError();
}

template <typename T, typename K, int kHd>
cudaError_t LaunchTiled(const PagedAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_heads),
                  static_cast<unsigned>(p.n_tokens));
  LaunchKernel(TiledAttentionKernel<T, K, kHd>, grid, kTileThreads, stream, p,
               static_cast<const uint8_t*>(p.kv_layer));
  return cudaGetLastError();
}

template <typename T, typename K>
cudaError_t LaunchTyped(const PagedAttentionParams& p,
                        const PagedAttentionPlan& plan, cudaStream_t stream) {
  if constexpr (std::is_same_v<K, __nv_bfloat16> &&
                !std::is_same_v<T, __nv_bfloat16>) {
    // BF16 K/V only beside BF16 activations (the engine's rule), so the
    // other pairings are never compiled.
    return cudaErrorInvalidValue;
  } else {
    if (plan.tiled) {
      if (p.head_dim <= 64) return LaunchTiled<T, K, 64>(p, stream);
      if (p.head_dim <= 128) return LaunchTiled<T, K, 128>(p, stream);
      return LaunchTiled<T, K, 256>(p, stream);
    }
    const int splits = plan.splits;
    const int64_t len = plan.split_len;
    if (p.head_dim <= 32) return Launch<T, K, 1>(p, splits, len, stream);
    if (p.head_dim <= 64) return Launch<T, K, 2>(p, splits, len, stream);
    if (p.head_dim <= 128) return Launch<T, K, 4>(p, splits, len, stream);
    if (p.head_dim <= 256) return Launch<T, K, 8>(p, splits, len, stream);
    return Launch<T, K, 16>(p, splits, len, stream);
  }
}

}  // namespace

namespace {

// The most positions one token attends to: max_context, capped at the
// window.
int64_t PlanContext(const PagedAttentionParams& p) {
  return p.window > 0 ? std::min(p.max_context, p.window) : p.max_context;
}

int ChooseSplits(const PagedAttentionParams& p) {
  const int64_t context = PlanContext(p);
  const int64_t pairs = p.n_tokens * p.n_heads;
  if (pairs <= 0) return 1;
  const int64_t capacity = p.partial == nullptr ? 0 : p.partial_rows / pairs;
  if (p.force_splits > 0) {
    return p.force_splits <= capacity && p.force_splits <= context
               ? p.force_splits
               : 1;
  }
  if (pairs >= kTargetBlocks) return 1;
  int64_t splits = (context + kMinSplitLen - 1) / kMinSplitLen;
  splits = std::min(splits, (kTargetBlocks * 2 + pairs - 1) / pairs);
  splits = std::min<int64_t>(splits, kMaxSplits);
  splits = std::min(splits, capacity);
  return splits > 1 ? static_cast<int>(splits) : 1;
}

}  // namespace

PagedAttentionPlan PlanPagedAttention(const PagedAttentionParams& p) {
  PagedAttentionPlan plan;
  if (p.tiles != nullptr && p.head_dim <= kMaxTiledHeadDim) {
    plan.tiled = true;
    plan.split_len = int64_t{1} << 40;
    return plan;
  }
  plan.splits = ChooseSplits(p);
  if (plan.splits == 1) {
    // Unbounded: the whole context, whatever it grows to.
    plan.split_len = int64_t{1} << 40;
    return plan;
  }
  const int64_t len = (PlanContext(p) + plan.splits - 1) / plan.splits;
  plan.split_len = p.force_splits > 0
                       ? len
                       : (len + kMinSplitLen - 1) / kMinSplitLen * kMinSplitLen;
  return plan;
}

int PagedAttentionSplits(const PagedAttentionParams& p) {
  return PlanPagedAttention(p).splits;
}

cudaError_t LaunchPagedAttention(GgmlType dtype, GgmlType kv_dtype,
                                 const PagedAttentionParams& p,
                                 cudaStream_t stream) {
  if (p.n_tokens <= 0) return cudaSuccess;
  if (p.head_dim > kMaxAttentionHeadDim || p.n_tokens > 65535 ||
      p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 ||
      p.max_context <= 0 || p.window < 0 ||
      (kv_dtype == GgmlType::kQ8_0 &&
       p.head_dim % GgmlBlockElems(GgmlType::kQ8_0) != 0)) {
    return cudaErrorInvalidValue;
  }
  const PagedAttentionPlan plan = PlanPagedAttention(p);
  cudaError_t err = cudaSuccess;
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      PACELINE_DISPATCH_KV(kv_dtype, K,
                           err = LaunchTyped<T, K>(p, plan, stream)));
  return err;
}

}  // namespace paceline::engine::cuda
