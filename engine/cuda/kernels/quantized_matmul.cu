// GEMV straight from quantized blocks (Q8_0, Q4_0, the K-quants, MXFP4),
// dequantization to a dense matrix, and the embedding gather. Both decode 32
// elements at a time (quant_blocks.cuh's LoadChunk).
#include <algorithm>

#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/quant_blocks.cuh"
#include "engine/cuda/kernels/quantized_matmul.h"

// Runs the statements with `kQ` bound to `q` as a constant: every
// IsDeviceBlockType type; cudaErrorInvalidValue for any other.
#define PACELINE_DISPATCH_QUANT(q, kQ, ...)     \
  switch (q) {                                  \
    case GgmlType::kQ8_0: {                     \
      constexpr GgmlType kQ = GgmlType::kQ8_0;  \
      __VA_ARGS__;                              \
    } break;                                    \
    case GgmlType::kQ4_0: {                     \
      constexpr GgmlType kQ = GgmlType::kQ4_0;  \
      __VA_ARGS__;                              \
    } break;                                    \
    case GgmlType::kQ2_K: {                     \
      constexpr GgmlType kQ = GgmlType::kQ2_K;  \
      __VA_ARGS__;                              \
    } break;                                    \
    case GgmlType::kQ3_K: {                     \
      constexpr GgmlType kQ = GgmlType::kQ3_K;  \
      __VA_ARGS__;                              \
    } break;                                    \
    case GgmlType::kQ4_K: {                     \
      constexpr GgmlType kQ = GgmlType::kQ4_K;  \
      __VA_ARGS__;                              \
    } break;                                    \
    case GgmlType::kQ5_K: {                     \
      constexpr GgmlType kQ = GgmlType::kQ5_K;  \
      __VA_ARGS__;                              \
    } break;                                    \
    case GgmlType::kQ6_K: {                     \
      constexpr GgmlType kQ = GgmlType::kQ6_K;  \
      __VA_ARGS__;                              \
    } break;                                    \
    case GgmlType::kMXFP4: {                    \
      constexpr GgmlType kQ = GgmlType::kMXFP4; \
      __VA_ARGS__;                              \
    } break;                                    \
    default:                                    \
      return cudaErrorInvalidValue;             \
  }

namespace paceline::engine::cuda {
namespace {

constexpr int kWarps = 4;  // rows per CUDA block

template <GgmlType kQ>
constexpr int64_t RowBytes(int64_t cols) {
  return cols / QuantTraits<kQ>::kElems * QuantTraits<kQ>::kBytes;
}

template <GgmlType kQ, typename T, int kN>
__global__ void __launch_bounds__(kWarps * 32)
    QuantizedGemvKernel(const uint8_t* w,  // (rows, cols) blocks
                        int64_t rows, int64_t cols,
                        const T* x,  // (n, cols)
                        int n, float beta,
                        float* y,  // (n, ldy)
                        int64_t ldy) {
  const int lane = threadIdx.x % 32;
  const int64_t r =
      static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int64_t n_chunks = cols / 32;
  const uint8_t* row = w + r * RowBytes<kQ>(cols);
  float acc[kN];
#pragma unroll
  for (int t = 0; t < kN; ++t) acc[t] = 0.0f;
  // Lane i takes chunks i, i + 32, ...: a warp reads 32 consecutive
  // chunks (a contiguous run of blocks) per iteration.
  for (int64_t c = lane; c < n_chunks; c += 32) {
    float wq[32];
    const float d = LoadChunk<kQ>(row, c, wq);
#pragma unroll
    for (int t = 0; t < kN; ++t) {
      if (t < n) {
        const T* xc = x + t * cols + c * 32;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) s += wq[j] * ToFloat(xc[j]);
        acc[t] += d * s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kN; ++t) {
    if (t < n) {
      const float sum = WarpSum(acc[t]);
      if (lane == 0) {
        float* out = y + t * ldy + r;
        *out = beta == 0.0f ? sum : beta * *out + sum;
      }
    }
  }
}

// One thread per chunk of 32 elements; a row's chunks are contiguous in
// `out` too, so chunk c of the matrix is out[32c, 32c + 32).
template <GgmlType kQ, typename T>
__global__ void DequantizeKernel(const uint8_t* w, int64_t chunks_per_row,
                                 int64_t n_chunks, T* out) {
  const int64_t row_bytes = RowBytes<kQ>(chunks_per_row * 32);
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       c < n_chunks; c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = c / chunks_per_row;
    float wq[32];
    const float d = LoadChunk<kQ>(w + r * row_bytes, c % chunks_per_row, wq);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      // The K-quants' d is 1: their values are exact as decoded.
      out[c * 32 + j] = FromFloat<T>(d * wq[j]);
    }
  }
}

// One CUDA block per token, one thread per chunk of its row.
template <GgmlType kQ>
__global__ void QuantizedEmbeddingKernel(
    const uint8_t* table,   // (n_vocab, dim)
    const int32_t* tokens,  // (n_tokens)
    int64_t dim,
    float* out) {  // (n_tokens, dim)
  const int64_t t = blockIdx.x;
  const uint8_t* row =
      table + static_cast<int64_t>(tokens[t]) * RowBytes<kQ>(dim);
  for (int64_t c = threadIdx.x; c < dim / 32; c += blockDim.x) {
    float wq[32];
    const float d = LoadChunk<kQ>(row, c, wq);
#pragma unroll
    for (int j = 0; j < 32; ++j) out[t * dim + c * 32 + j] = d * wq[j];
  }
}

template <GgmlType kQ, typename T>
void Gemv(const void* w, int64_t rows, int64_t cols, const void* x, int64_t n,
          float beta, float* y, int64_t ldy, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const auto* wb = static_cast<const uint8_t*>(w);
  const T* xt = static_cast<const T*>(x);
  const int ni = static_cast<int>(n);
  if (n == 1) {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 1>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y, ldy);
  } else if (n == 2) {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 2>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y, ldy);
  } else if (n <= 4) {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 4>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y, ldy);
  } else {
    LaunchKernel(QuantizedGemvKernel<kQ, T, 8>, grid, kWarps * 32, stream, wb,
                 rows, cols, xt, ni, beta, y, ldy);
  }
}

}  // namespace

cudaError_t LaunchQuantizedGemv(GgmlType q, const void* w, int64_t rows,
                                int64_t cols, GgmlType x_dtype, const void* x,
                                int64_t n_tokens, float beta, float* y,
                                int64_t ldy, cudaStream_t stream) {
  if (rows <= 0 || n_tokens <= 0) return cudaSuccess;
  if (cols % GgmlBlockElems(q) != 0 || n_tokens > kMaxGemvTokens ||
      ldy < rows) {
    return cudaErrorInvalidValue;
  }
  PACELINE_DISPATCH_QUANT(
      q, kQ,
      PACELINE_DISPATCH_DTYPE(
          x_dtype, T,
          (Gemv<kQ, T>(w, rows, cols, x, n_tokens, beta, y, ldy, stream))));
  return cudaGetLastError();
}

cudaError_t LaunchDequantize(GgmlType q, const void* w, int64_t rows,
                             int64_t cols, GgmlType out_dtype, void* out,
                             cudaStream_t stream) {
  if (cols % GgmlBlockElems(q) != 0) return cudaErrorInvalidValue;
  const int64_t per_row = cols / 32;
  const int64_t total = rows * per_row;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const unsigned grid = static_cast<unsigned>(
      std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  const auto* wb = static_cast<const uint8_t*>(w);
  PACELINE_DISPATCH_QUANT(
      q, kQ,
      PACELINE_DISPATCH_DTYPE(
          out_dtype, T,
          LaunchKernel(DequantizeKernel<kQ, T>, grid, kThreads, stream, wb,
                       per_row, total, static_cast<T*>(out))));
  return cudaGetLastError();
}

cudaError_t LaunchQuantizedEmbedding(GgmlType q, const void* table,
                                     const int32_t* tokens, int64_t n_tokens,
                                     int64_t dim, float* out,
                                     cudaStream_t stream) {
  if (dim % GgmlBlockElems(q) != 0) return cudaErrorInvalidValue;
  if (n_tokens <= 0) return cudaSuccess;
  const auto* tb = static_cast<const uint8_t*>(table);
  PACELINE_DISPATCH_QUANT(q, kQ,
                          LaunchKernel(QuantizedEmbeddingKernel<kQ>,
                                       static_cast<unsigned>(n_tokens), 64,
                                       stream, tb, tokens, dim, out));
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
