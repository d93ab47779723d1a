// GEMV straight from Q8_0 / Q4_0 blocks, and dequantization to a dense
// matrix.
#include <algorithm>

#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/quantized_matmul.h"

namespace paceline::engine::cuda {
namespace {

constexpr int kWarps = 4;  // rows per CUDA block

// The 32 weights of block `b` of a row (without the scale) and its scale.
template <QuantType kQ>
__device__ __forceinline__ float LoadBlock(const uint8_t* row, int64_t b,
                                           float (&w)[32]) {
  const uint8_t* blk = row + b * (kQ == QuantType::kQ8_0 ? 34 : 18);
  const float d = __half2float(
      __ushort_as_half(static_cast<unsigned short>(blk[0] | (blk[1] << 8))));
  const uint8_t* qs = blk + 2;
  if constexpr (kQ == QuantType::kQ8_0) {
#pragma unroll
    for (int j = 0; j < 32; ++j)
      w[j] = static_cast<float>(static_cast<int8_t>(qs[j]));
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      w[j] = static_cast<float>((qs[j] & 0x0f) - 8);
      w[j + 16] = static_cast<float>((qs[j] >> 4) - 8);
    }
  }
  return d;
}

template <QuantType kQ, typename T, int kN>
__global__ void __launch_bounds__(kWarps * 32)
    QuantizedGemvKernel(const uint8_t* w,  // (rows, cols) blocks
                        int64_t rows, int64_t cols,
                        const T* x,  // (n, cols)
                        int n, float beta,
                        float* y) {  // (n, rows)
  const int lane = threadIdx.x % 32;
  const int64_t r =
      static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int64_t n_blocks = cols / 32;
  const uint8_t* row = w + r * n_blocks * (kQ == QuantType::kQ8_0 ? 34 : 18);
  float acc[kN];
#pragma unroll
  for (int t = 0; t < kN; ++t) acc[t] = 0.0f;
  for (int64_t b = lane; b < n_blocks; b += 32) {
    float wq[32];
    const float d = LoadBlock<kQ>(row, b, wq);
#pragma unroll
    for (int t = 0; t < kN; ++t) {
      if (t < n) {
        const T* xb = x + t * cols + b * 32;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) s += wq[j] * ToFloat(xb[j]);
        acc[t] += d * s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kN; ++t) {
    if (t < n) {
      const float sum = WarpSum(acc[t]);
      if (lane == 0) {
        float* out = y + t * rows + r;
        *out = beta == 0.0f ? sum : beta * *out + sum;
      }
    }
  }
}

template <QuantType kQ, typename T>
__global__ void DequantizeKernel(const uint8_t* w, int64_t n_blocks_total,
                                 T* out) {
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       b < n_blocks_total; b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float wq[32];
    const float d = LoadBlock<kQ>(w, b, wq);
#pragma unroll
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = FromFloat<T>(d * wq[j]);
  }
}

template <QuantType kQ, typename T>
cudaError_t Gemv(const void* w, int64_t rows, int64_t cols, const void* x,
                 int64_t n, float beta, float* y, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const auto* wb = static_cast<const uint8_t*>(w);
  const T* xt = static_cast<const T*>(x);
  const int ni = static_cast<int>(n);
  if (n == 1) {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 1>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y);
  } else if (n == 2) {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 2>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y);
  } else if (n <= 4) {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 4>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y);
  } else {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 8>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchQuantizedGemv(QuantType q, const void* w, int64_t rows,
                                int64_t cols, DeviceDtype x_dtype,
                                const void* x, int64_t n_tokens, float beta,
                                float* y, cudaStream_t stream) {
  if (rows <= 0 || n_tokens <= 0) return cudaSuccess;
  if (cols % 32 != 0 || n_tokens > kMaxGemvTokens) return cudaErrorInvalidValue;
  cudaError_t err = cudaSuccess;
  if (q == QuantType::kQ8_0) {
    PACELINE_DISPATCH_DTYPE(x_dtype, T,
                            err = (Gemv<QuantType::kQ8_0, T>(
                                w, rows, cols, x, n_tokens, beta, y, stream)));
  } else {
    PACELINE_DISPATCH_DTYPE(x_dtype, T,
                            err = (Gemv<QuantType::kQ4_0, T>(
                                w, rows, cols, x, n_tokens, beta, y, stream)));
  }
  return err;
}

cudaError_t LaunchDequantize(QuantType q, const void* w, int64_t rows,
                             int64_t cols, DeviceDtype out_dtype, void* out,
                             cudaStream_t stream) {
  if (cols % 32 != 0) return cudaErrorInvalidValue;
  const int64_t total = rows * (cols / 32);
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const unsigned grid = static_cast<unsigned>(
      std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  const auto* wb = static_cast<const uint8_t*>(w);
  if (q == QuantType::kQ8_0) {
    PACELINE_DISPATCH_DTYPE(
        out_dtype, T,
        LaunchKernel(DequantizeKernel<QuantType::kQ8_0, T>, grid, kThreads,
                     stream, wb, total, static_cast<T*>(out)));
  } else {
    PACELINE_DISPATCH_DTYPE(
        out_dtype, T,
        LaunchKernel(DequantizeKernel<QuantType::kQ4_0, T>, grid, kThreads,
                     stream, wb, total, static_cast<T*>(out)));
  }
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
