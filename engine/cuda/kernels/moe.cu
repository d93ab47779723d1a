// Mixture-of-experts routing, gather and combine (moe.h).
#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/moe.h"

namespace paceline::engine::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Sane(float x) {
  return x != x ? -INFINITY : x;  // NaN
}

// Whether (la, a) comes before (lb, b): higher logit, then lower index.
__device__ __forceinline__ bool Before(float la, int64_t a, float lb,
                                       int64_t b) {
  return la > lb || (la == lb && a < b);
}

__global__ void MoeRouteKernel(const float* logits,  // (n_tokens, n_expert)
                               int64_t n_tokens, int64_t n_expert, int64_t k,
                               int32_t* experts,  // (n_tokens, k)
                               float* weights) {  // (n_tokens, k)
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n_tokens) return;
  const float* l = logits + t * n_expert;
  int32_t* ex = experts + t * k;
  // k passes: the j-th pick is the first of those after the (j-1)-th.
  float prev_l = INFINITY;
  int64_t prev = -1;
  for (int64_t j = 0; j < k; ++j) {
    float best_l = 0;
    int64_t best = -1;
    for (int64_t e = 0; e < n_expert; ++e) {
      const float le = Sane(l[e]);
      if (j > 0 && !Before(prev_l, prev, le, e)) continue;
      if (best < 0 || Before(le, e, best_l, best)) {
        best_l = le;
        best = e;
      }
    }
    ex[j] = static_cast<int32_t>(best);
    prev_l = best_l;
    prev = best;
  }
  const double top = Sane(l[ex[0]]);
  const bool finite = top > -INFINITY && top < INFINITY;
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    sum += finite ? exp(static_cast<double>(Sane(l[ex[j]])) - top) : 1.0;
  }
  for (int64_t j = 0; j < k; ++j) {
    const double v =
        finite ? exp(static_cast<double>(Sane(l[ex[j]])) - top) : 1.0;
    weights[t * k + j] = static_cast<float>(v / sum);
  }
}

template <typename T>
__global__ void MoeGatherKernel(const T* x,                // (n_tokens, dim)
                                const int32_t* row_token,  // (rows)
                                int64_t rows, int64_t dim,
                                T* out) {  // (rows, dim)
  const int64_t total = rows * dim;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / dim;
    out[i] = x[static_cast<int64_t>(row_token[r]) * dim + (i - r * dim)];
  }
}

__global__ void MoeCombineKernel(const float* y,         // (rows, dim)
                                 const int32_t* row_of,  // (n_tokens, k)
                                 const float* weights,   // (n_tokens, k)
                                 int64_t n_tokens, int64_t k, int64_t dim,
                                 float* x) {  // (n_tokens, dim)
  const int64_t total = n_tokens * dim;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / dim;
    const int64_t d = i - t * dim;
    float acc = 0;
    for (int64_t j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      const float v = y[static_cast<int64_t>(row_of[t * k + j]) * dim + d];
      acc = j == 0 ? w * v : acc + w * v;
    }
    x[i] += acc;
  }
}

unsigned Blocks(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks > 65535 ? 65535 : blocks);
}

}  // namespace

cudaError_t LaunchMoeRoute(const float* logits, int64_t n_tokens,
                           int64_t n_expert, int64_t k, int32_t* experts,
                           float* weights, cudaStream_t stream) {
  if (n_tokens <= 0) return cudaSuccess;
  LaunchKernel(MoeRouteKernel, Blocks(n_tokens), kThreads, stream, logits,
               n_tokens, n_expert, k, experts, weights);
  return cudaGetLastError();
}

cudaError_t LaunchMoeGather(GgmlType dtype, const void* x,
                            const int32_t* row_token, int64_t rows, int64_t dim,
                            void* out, cudaStream_t stream) {
  if (rows * dim <= 0) return cudaSuccess;
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(MoeGatherKernel<T>, Blocks(rows * dim), kThreads, stream,
                   static_cast<const T*>(x), row_token, rows, dim,
                   static_cast<T*>(out)));
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombine(const float* y, const int32_t* row_of,
                             const float* weights, int64_t n_tokens, int64_t k,
                             int64_t dim, float* x, cudaStream_t stream) {
  if (n_tokens * dim <= 0) return cudaSuccess;
  LaunchKernel(MoeCombineKernel, Blocks(n_tokens * dim), kThreads, stream, y,
               row_of, weights, n_tokens, k, dim, x);
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
