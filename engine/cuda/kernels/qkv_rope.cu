// Bias, per-head norm and RoPE of Q/K, and the K/V write into paged slots:
// one block per (head of Q|K|V, token), the head staged in shared memory.
#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/kv_dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/qkv_rope.h"

namespace paceline::engine::cuda {
namespace {

template <typename K>
__global__ void QkvRopeKernel(QkvRopeParams p, uint8_t* kv_layer) {
  __shared__ float v[kMaxQkvHeadDim];  // (head_dim) this head
  __shared__ double scratch[32];
  const int64_t head = blockIdx.x;  // [0, n_heads + 2 n_kv_heads)
  const int64_t t = blockIdx.y;
  const int64_t hd = p.head_dim;
  const int64_t width = (p.n_heads + 2 * p.n_kv_heads) * hd;
  float* src = p.qkv + t * width + head * hd;
  const bool is_q = head < p.n_heads;
  const bool is_k = !is_q && head < p.n_heads + p.n_kv_heads;
  const bool is_v = !is_q && !is_k;

  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float x = src[i];
    if (p.bias != nullptr) x += p.bias[head * hd + i];
    v[i] = x;
  }
  __syncthreads();
  if (!is_v) {
    const float* norm = is_q ? p.q_norm : p.k_norm;
    if (norm != nullptr) {
      double sum = 0;
      for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
        sum += static_cast<double>(v[i]) * v[i];
      }
      sum = BlockSum(sum, scratch);
      const float scale =
          static_cast<float>(1.0 / sqrt(sum / static_cast<double>(hd) +
                                        static_cast<double>(p.eps)));
      for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
        v[i] = v[i] * scale * norm[i];
      }
      __syncthreads();
    }
    const int64_t half = p.rope_dim / 2;
    const int64_t stride = p.neox ? 1 : 2;
    const int64_t offset = p.neox ? half : 1;
    const double pos = static_cast<double>(p.positions[t]);
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const double theta = pos * p.inv_freq[i];
      const float c = static_cast<float>(p.mscale * cos(theta));
      const float s = static_cast<float>(p.mscale * sin(theta));
      const float a = v[i * stride];
      const float b = v[i * stride + offset];
      v[i * stride] = a * c - b * s;
      v[i * stride + offset] = a * s + b * c;
    }
    __syncthreads();
  }
  if (is_q) {
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) src[i] = v[i];
    return;
  }
  const int64_t kv_head = head - p.n_heads - (is_v ? p.n_kv_heads : 0);
  const int64_t slot = p.slot_mapping[t];
  const int64_t block = slot / p.block_size;
  const int64_t in_block = slot - block * p.block_size;
  const int64_t row =
      ((block * 2 + (is_v ? 1 : 0)) * p.n_kv_heads + kv_head) * p.block_size +
      in_block;
  StoreKvRow<K>(v, hd, kv_layer + row * KvRowBytesOf<K>(hd));
}

}  // namespace

cudaError_t LaunchQkvRope(GgmlType kv_dtype, const QkvRopeParams& p,
                          cudaStream_t stream) {
  if (p.n_tokens <= 0) return cudaSuccess;
  if (p.head_dim > kMaxQkvHeadDim || p.n_tokens > 65535 ||
      (kv_dtype == GgmlType::kQ8_0 &&
       p.head_dim % GgmlBlockElems(GgmlType::kQ8_0) != 0)) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>(p.n_heads + 2 * p.n_kv_heads),
                  static_cast<unsigned>(p.n_tokens));
  const int threads = p.head_dim > 64 ? 128 : 64;
  // A multiple of 32 threads: StoreKvRow<KvQ8_0>'s warps hold whole blocks.
  PACELINE_DISPATCH_KV(kv_dtype, K,
                       LaunchKernel(QkvRopeKernel<K>, grid, threads, stream, p,
                                    static_cast<uint8_t*>(p.kv_layer)));
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
