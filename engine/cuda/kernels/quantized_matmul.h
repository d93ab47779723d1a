#ifndef PACELINE_ENGINE_CUDA_KERNELS_QUANTIZED_MATMUL_H_
#define PACELINE_ENGINE_CUDA_KERNELS_QUANTIZED_MATMUL_H_

// Weights kept in GGML's block formats on the device, byte for byte as in
// the file: the kBlockMatMulTypes of engine/gguf/ggml_type_layout.h and
// MXFP4 (IsDeviceBlockType; engine/gguf/ggml_type.cc documents each
// layout):
//   Q8_0: 32 elements in 34 bytes, w = d * q
//   Q4_0: 32 elements in 18 bytes, w = d * (q - 8)
//   MXFP4: 32 elements in 17 bytes, w = 2^(e - 128) * kMxfp4Levels[q]
//         (gpt-oss's experts; E8M0HalfToFloat's scale)
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: 256-element super-blocks of 84, 110, 144,
//         176 and 210 bytes (2.625 to 6.5625 bits per weight)
// Row r of a (rows, cols) matrix is cols / GgmlBlockElems consecutive
// blocks. Decode (a few tokens) multiplies them directly, reading each
// weight byte once per step: the step is memory-bound, so 4-bit weights
// run ~4x faster than F16. Larger steps dequantize to a dense scratch
// matrix and use cuBLAS (compute-bound there, the dequantization is cheap
// beside it).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// The block types these kernels read: the CPU's (kBlockMatMulTypes) and
// MXFP4.
constexpr bool IsDeviceBlockType(GgmlType type) {
  return IsBlockMatMulType(type) || type == GgmlType::kMXFP4;
}

// The most tokens LaunchQuantizedGemv takes.
inline constexpr int64_t kMaxGemvTokens = 8;

// y[t, r] = beta * y[t, r] + sum_c w[r, c] * x[t, c] for t < n_tokens
// (1 .. kMaxGemvTokens); beta is 0 (y is not read) or 1. One warp per
// output row, each lane 32 weights at a time, float accumulation.
// cudaErrorInvalidValue when cols is not a multiple of GgmlBlockElems(q),
// n_tokens is over kMaxGemvTokens or ldy < rows.
//   w: (rows, cols) of `q`
//   x: (n_tokens, cols) of `x_dtype`
//   y: (n_tokens, ldy) float; columns [0, rows) are written
cudaError_t LaunchQuantizedGemv(GgmlType q, const void* w, int64_t rows,
                                int64_t cols, GgmlType x_dtype, const void* x,
                                int64_t n_tokens, float beta, float* y,
                                int64_t ldy, cudaStream_t stream);

// out[r, c] = w[r, c], converted to `out_dtype`; the values are
// DequantizeRow's (engine/gguf/ggml_type.h) exactly, before that rounding.
// cudaErrorInvalidValue when cols is not a multiple of GgmlBlockElems(q).
//   w:   (rows, cols) of `q`
//   out: (rows, cols) of `out_dtype`
cudaError_t LaunchDequantize(GgmlType q, const void* w, int64_t rows,
                             int64_t cols, GgmlType out_dtype, void* out,
                             cudaStream_t stream);

// out[t, :] = table[tokens[t], :] for t in [0, n_tokens), the row's values
// as DequantizeRow gives them. Token ids must be in [0, n_vocab) (the
// engine checks them on the host). cudaErrorInvalidValue when dim is not a
// multiple of GgmlBlockElems(q).
//   table:  (n_vocab, dim) of `q`
//   tokens: (n_tokens) int32
//   out:    (n_tokens, dim) float
cudaError_t LaunchQuantizedEmbedding(GgmlType q, const void* table,
                                     const int32_t* tokens, int64_t n_tokens,
                                     int64_t dim, float* out,
                                     cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_QUANTIZED_MATMUL_H_
