#ifndef PACELINE_ENGINE_GGUF_QUANTIZE_H_
#define PACELINE_ENGINE_GGUF_QUANTIZE_H_

// Float rows to the storage types the CPU matmul has kernels for: F32, F16,
// BF16, Q8_0 and Q4_0 (ggml's block layouts, see ggml_type.h). Used by the
// dummy model source and by load-time conversion of types without a
// kernel. DequantizeRow() is the inverse (exact for F32; within the type's
// rounding otherwise).

#include <cstdint>

#include "absl/status/status.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine {

// Whether QuantizeRow() can write `type`.
bool CanQuantize(GgmlType type);

// Encodes src[0..n) as `type` into dst, which must hold GgmlRowBytes(type, n)
// bytes (no alignment needed). `n` must be a multiple of the type's block
// size. Rounding: F16 and BF16 round to nearest even (NaN stays NaN);
// Q8_0 uses d = max|x| / 127, q = round(x / d); Q4_0 uses d = m / -8 with m
// the element of largest magnitude, q = clamp(floor(x / d + 8.5), 0, 15).
// InvalidArgument for other types or a bad `n`.
absl::Status QuantizeRow(GgmlType type, const float* src, int64_t n, void* dst);

// IEEE binary16 / bfloat16 of a float, round to nearest even.
uint16_t FloatToHalf(float f);
uint16_t FloatToBFloat16(float f);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_GGUF_QUANTIZE_H_
