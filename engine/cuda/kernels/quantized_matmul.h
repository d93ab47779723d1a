#ifndef PACELINE_ENGINE_CUDA_KERNELS_QUANTIZED_MATMUL_H_
#define PACELINE_ENGINE_CUDA_KERNELS_QUANTIZED_MATMUL_H_

// Weights kept in GGML's 32-element block formats on the device:
//   Q8_0: 34 bytes per block, half d then 32 int8 q; w = d * q
//   Q4_0: 18 bytes per block, half d then 16 bytes; element j < 16 is the
//         low nibble of byte j, element j + 16 its high nibble; w = d * (q - 8)
// Row r of a (rows, cols) matrix is cols / 32 consecutive blocks.
// Decode (a few tokens) multiplies them directly, reading each weight byte
// once: the step is memory-bound, so 4- and 8-bit weights run ~4x and ~2x
// faster than F16. Larger steps dequantize to a dense scratch matrix and use
// cuBLAS (compute-bound there, the dequantization is cheap beside it).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/cuda/kernels/device_dtype.h"

namespace paceline::engine::cuda {

enum class QuantType { kQ8_0, kQ4_0 };

inline int64_t QuantBlockBytes(QuantType q) {
  return q == QuantType::kQ8_0 ? 34 : 18;
}

// The most tokens LaunchQuantizedGemv takes.
inline constexpr int64_t kMaxGemvTokens = 8;

// y[t, r] = beta * y[t, r] + sum_c w[r, c] * x[t, c] for t < n_tokens
// (1 .. kMaxGemvTokens); beta is 0 (y is not read) or 1. One warp per
// output row, float accumulation.
//   w: (rows, cols) of `q`, cols a multiple of 32
//   x: (n_tokens, cols) of `x_dtype`
//   y: (n_tokens, rows) float
cudaError_t LaunchQuantizedGemv(QuantType q, const void* w, int64_t rows,
                                int64_t cols, DeviceDtype x_dtype,
                                const void* x, int64_t n_tokens, float beta,
                                float* y, cudaStream_t stream);

// out[r, c] = w[r, c], converted to `out_dtype`.
//   w:   (rows, cols) of `q`
//   out: (rows, cols) of `out_dtype`
cudaError_t LaunchDequantize(QuantType q, const void* w, int64_t rows,
                             int64_t cols, DeviceDtype out_dtype, void* out,
                             cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_QUANTIZED_MATMUL_H_
