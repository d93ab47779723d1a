#ifndef PACELINE_TESTS_ENGINE_CUDA_FILE_TYPE_WEIGHTS_H_
#define PACELINE_TESTS_ENGINE_CUDA_FILE_TYPE_WEIGHTS_H_

// Test-only: a model file's weights with their matrices retyped, for the
// CUDA engine's K-quant tests.
//   kFileTypes: every matrix view points at the file's own tensor bytes in
//     the file's type. Until ModelWeights keeps K-quant matrices as they
//     are (issue 17's CPU side), its load converts them to Q8_0; this undoes
//     that for the CUDA engine. Where the load kept the file type, nothing
//     changes (retyped() counts the views changed).
//   kF32: every matrix widened to F32 by DequantizeRow: the same weights,
//     in a type the CPU engine multiplies exactly, as the reference for the
//     CUDA engine on that file; a MoE layer's experts too.
// The matrices: attention's, the dense FFN's, a hybrid's DeltaNet
// projections and shared expert, output.weight. The token embedding (and,
// with kFileTypes, a MoE layer's experts) are left as loaded. The returned
// weights keep the file mapping and the widened buffers alive.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/weights.h"

namespace paceline::engine::cuda::testing {

enum class ViewTypes { kFileTypes, kF32 };

struct RetypedWeights {
  std::shared_ptr<const ModelWeights> weights;
  int retyped = 0;  // matrix views whose type changed
  // The file's bytes of the matrices above (all layers' attention or
  // DeltaNet projections, FFN or shared expert, and output.weight; not the
  // token embedding nor experts).
  uint64_t file_matrix_bytes = 0;
};

absl::StatusOr<RetypedWeights> LoadRetyped(const std::string& path,
                                           ViewTypes types);

}  // namespace paceline::engine::cuda::testing

#endif  // PACELINE_TESTS_ENGINE_CUDA_FILE_TYPE_WEIGHTS_H_
