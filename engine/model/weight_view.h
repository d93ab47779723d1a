#ifndef PACELINE_ENGINE_MODEL_WEIGHT_VIEW_H_
#define PACELINE_ENGINE_MODEL_WEIGHT_VIEW_H_

// A weight matrix as every backend takes it: a view of bytes in their
// storage type, owned by ModelWeights (weights.h) or a backend's packed
// copy.

#include <cstddef>
#include <cstdint>

#include "engine/gguf/ggml_type.h"

namespace paceline::engine {

// How a WeightView's bytes are arranged.
enum class WeightLayout : uint8_t {
  // Row r (an output feature) holds `cols` input features contiguously,
  // encoded as `type`: a GGUF tensor of ggml shape [cols, rows].
  kRows,
  // Repacked by cpu::PackForMatMul for this machine's kernels (panels of
  // 16 rows; cpu/kernels/matmul_internal.h). Same values, same results.
  kPanels,
};

// A weight matrix in its storage type.
struct WeightView {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features (a multiple of the type's block)
  const void* data = nullptr;  // kRows: rows * row_bytes bytes
  // Bytes of one row in `type` (kPanels too: the bandwidth a row costs).
  size_t row_bytes = 0;
  WeightLayout layout = WeightLayout::kRows;

  // The bytes the matrix reads: rows * row_bytes.
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes; }
};

// Whether the backends multiply weights of `type` as they are: F32, F16,
// BF16, Q8_0, Q4_0, the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and MXFP4
// (gpt-oss's experts; the CPU's kernels read it, the CUDA engine converts
// it at upload: a backend without a kernel for a type converts it itself).
// ModelWeights converts other matrix types at load.
bool IsMatMulWeightType(GgmlType type);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_WEIGHT_VIEW_H_
