#ifndef PACELINE_ENGINE_GGUF_QUANTIZE_H_
#define PACELINE_ENGINE_GGUF_QUANTIZE_H_

// Float rows to F32, F16, BF16, Q8_0, Q4_0, MXFP4 and the K-quants Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K (ggml's block layouts, see ggml_type.h). Used by the
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
// the element of largest magnitude, q = clamp(floor(x / d + 8.5), 0, 15);
// MXFP4 follows ggml: with m = max|x| over the block (NaN ignored), the
// E8M0 byte is e = floor(log2 m) + 125 clamped to [0, 255] (0 when m is 0),
// and each element the nearest of kMxfp4Levels * 2^(e - 128), the first in
// table order on a tie; so magnitudes in (6, 8) * 2^(e - 127) clip to 6,
// and NaN or +-inf elements encode as 0.
//
// K-quants (256-element super-blocks; simple range-based scales, no error
// search; every field is rounded against the values the decoder will use,
// so re-encoding a decoded block whose groups span their grid gives the
// same bytes):
//   Q2_K (16-element groups, q in 0..3), Q4_K (32, 0..15), Q5_K (32, 0..31):
//     group range [min(0, lo), hi]; step = range / qmax, offset = -min(0, lo);
//     d = max step / fmax, dmin = max offset / fmax (fmax 15 for Q2_K's
//     4-bit fields, 63 for the 6-bit ones); each group's fields round
//     step / d and offset / dmin; q = round((x + dmin * m) / (d * sc)).
//   Q3_K (16-element groups, q in -4..3), Q6_K (16, -32..31): the group's
//     element of largest magnitude is level -4 (-32) exactly: s = m / -4
//     (m / -32); d = max|s| / 31 (127 for Q6_K's int8 scales), field =
//     round(s / d); q = round(x / (d * field)).
//   Rounding is half away from zero, levels clamp to their range, d and dmin
//   are f16 (rounded to nearest even) and saturate at 65504: a block too
//   large for that decodes to the largest magnitudes its grid reaches, never
//   to inf. NaN elements are encoded as 0; +-inf saturate like huge values.
//   All-zero groups decode to exact zeros; a constant block decodes within
//   the f16 rounding of its scale (relative 2^-11 while that is a normal
//   half, i.e. for magnitudes above about 2^-14 times the levels).
//
// InvalidArgument for other types or a bad `n`.
absl::Status QuantizeRow(GgmlType type, const float* src, int64_t n, void* dst);

// IEEE binary16 / bfloat16 of a float, round to nearest even.
uint16_t FloatToHalf(float f);
uint16_t FloatToBFloat16(float f);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_GGUF_QUANTIZE_H_
