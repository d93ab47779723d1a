#ifndef PACELINE_ENGINE_GGUF_GGML_TYPE_LAYOUT_H_
#define PACELINE_ENGINE_GGUF_GGML_TYPE_LAYOUT_H_

// The one vocabulary of element types: ggml's tensor types (GgmlType), as
// GGUF files name them, and each one's name and block layout. Both
// backends use it for weights, activations and the KV cache (the CUDA
// engine's device dtype is F32, F16 or BF16; its KV cache F32, F16, BF16 or
// Q8_0; its quantized GEMV the types in cuda/kernels/quantized_matmul.h).
// Plain constexpr C++ with no dependencies, so nvcc compiles it into
// kernels; ggml_type.h adds the table's dequantizers and the checked
// size arithmetic.

#include <cstdint>

namespace paceline::engine {

// Values are ggml's on-disk ids; gaps are ids ggml has retired.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

// A type's spelling and block: `elems` elements stored in `bytes` bytes
// (elems is 1 for the plain types, whose `bytes` is the element's size).
struct GgmlLayout {
  const char* name;  // ggml's spelling, e.g. "Q4_K", "F16"
  int64_t elems;
  int64_t bytes;
};

constexpr GgmlLayout GgmlTypeLayout(GgmlType type) {
  // One type a line.
  // clang-format off
  switch (type) {
    case GgmlType::kF32: return {"F32", 1, 4};
    case GgmlType::kF16: return {"F16", 1, 2};
    case GgmlType::kQ4_0: return {"Q4_0", 32, 18};
    case GgmlType::kQ4_1: return {"Q4_1", 32, 20};
    case GgmlType::kQ5_0: return {"Q5_0", 32, 22};
    case GgmlType::kQ5_1: return {"Q5_1", 32, 24};
    case GgmlType::kQ8_0: return {"Q8_0", 32, 34};  // f16 d | int8 q[32]
    case GgmlType::kQ8_1: return {"Q8_1", 32, 36};
    case GgmlType::kQ2_K: return {"Q2_K", 256, 84};
    case GgmlType::kQ3_K: return {"Q3_K", 256, 110};
    case GgmlType::kQ4_K: return {"Q4_K", 256, 144};
    case GgmlType::kQ5_K: return {"Q5_K", 256, 176};
    case GgmlType::kQ6_K: return {"Q6_K", 256, 210};
    case GgmlType::kQ8_K: return {"Q8_K", 256, 292};
    case GgmlType::kIQ2_XXS: return {"IQ2_XXS", 256, 66};
    case GgmlType::kIQ2_XS: return {"IQ2_XS", 256, 74};
    case GgmlType::kIQ3_XXS: return {"IQ3_XXS", 256, 98};
    case GgmlType::kIQ1_S: return {"IQ1_S", 256, 50};
    case GgmlType::kIQ4_NL: return {"IQ4_NL", 32, 18};
    case GgmlType::kIQ3_S: return {"IQ3_S", 256, 110};
    case GgmlType::kIQ2_S: return {"IQ2_S", 256, 82};
    case GgmlType::kIQ4_XS: return {"IQ4_XS", 256, 136};
    case GgmlType::kI8: return {"I8", 1, 1};
    case GgmlType::kI16: return {"I16", 1, 2};
    case GgmlType::kI32: return {"I32", 1, 4};
    case GgmlType::kI64: return {"I64", 1, 8};
    case GgmlType::kF64: return {"F64", 1, 8};
    case GgmlType::kIQ1_M: return {"IQ1_M", 256, 56};
    case GgmlType::kBF16: return {"BF16", 1, 2};
    case GgmlType::kTQ1_0: return {"TQ1_0", 256, 54};
    case GgmlType::kTQ2_0: return {"TQ2_0", 256, 66};
    case GgmlType::kMXFP4: return {"MXFP4", 32, 17};
  }
  // clang-format on
  return {"?", 1, 0};
}

constexpr const char* GgmlTypeName(GgmlType type) {
  return GgmlTypeLayout(type).name;
}
// Elements per block (1 for plain types).
constexpr int64_t GgmlBlockElems(GgmlType type) {
  return GgmlTypeLayout(type).elems;
}
// Bytes per block: for plain types, bytes per element.
constexpr int64_t GgmlBlockBytes(GgmlType type) {
  return GgmlTypeLayout(type).bytes;
}
// MXFP4's 16 E2M1 values (nibble q: sign bit 3, then 2 exponent bits and 1
// mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), doubled so
// they are whole numbers; the block's E8M0 scale is halved to match
// (E8M0HalfToFloat), as ggml does.
inline constexpr int8_t kMxfp4Levels[16] = {0,  1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The block types the matrix kernels of both backends read as stored
// (beside the plain F32, F16 and BF16): the one list (the CPU's MatMul,
// engine/model/weight_view.h's IsMatMulWeightType, the CUDA GEMV).
inline constexpr GgmlType kBlockMatMulTypes[] = {
    GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

constexpr bool IsBlockMatMulType(GgmlType type) {
  for (GgmlType t : kBlockMatMulTypes) {
    if (t == type) return true;
  }
  return false;
}

// Bytes of `n` elements; n must be a whole number of blocks (ggml_type.h's
// GgmlRowBytes checks that and overflow).
constexpr int64_t GgmlRowBytesOf(GgmlType type, int64_t n) {
  return n / GgmlBlockElems(type) * GgmlBlockBytes(type);
}

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_GGUF_GGML_TYPE_LAYOUT_H_
