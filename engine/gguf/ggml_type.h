#ifndef PACELINE_ENGINE_GGUF_GGML_TYPE_H_
#define PACELINE_ENGINE_GGUF_GGML_TYPE_H_

// The ggml tensor element types that GGUF files use (ggml_type_layout.h:
// ids, names and block layouts): their traits, checked byte sizes, and
// dequantization of a row to float.
//
// Every type id published by ggml is known here (so any GGUF parses and its
// sizes are checked); dequantization exists for a subset (see
// `GgmlTypeTraits::can_dequantize`).

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/ggml_type_layout.h"  // GgmlType, layouts

namespace paceline::engine {

struct GgmlTypeTraits {
  GgmlType type;
  absl::string_view name;  // ggml's spelling, e.g. "Q4_K", "F16"
  int64_t block_size;      // elements per block (1 for plain types)
  int64_t type_size;       // bytes per block
  bool can_dequantize;     // DequantizeRow supports it
};

// Traits for an on-disk type id, or nullptr when the id is unknown.
const GgmlTypeTraits* FindGgmlType(uint32_t id);

// Traits of a known type (never null).
const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type);

// Bytes taken by `n` consecutive elements of `type`. InvalidArgument when
// `n` is negative or not a multiple of the block size; OutOfRange on
// overflow.
absl::StatusOr<uint64_t> GgmlRowBytes(GgmlType type, int64_t n);

// Dequantizes `n` elements (a multiple of the block size) starting at `src`
// into `dst[0..n)`. `src` must hold GgmlRowBytes(type, n) bytes; no alignment
// is required. Unimplemented for types without a dequantizer.
absl::Status DequantizeRow(GgmlType type, const void* src, float* dst,
                           int64_t n);

// IEEE half and bfloat16 to float (exact).
float HalfToFloat(uint16_t h);
float BFloat16ToFloat(uint16_t b);

// Half the value of an E8M0 exponent byte: 2^(e - 128), exact (a subnormal
// for e < 2; finite for every e, 255 included). MXFP4's block scale for its
// doubled levels (kMxfp4Levels).
float E8M0HalfToFloat(uint8_t e);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_GGUF_GGML_TYPE_H_
