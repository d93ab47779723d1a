#ifndef PACELINE_ENGINE_CUDA_KERNELS_RMS_NORM_H_
#define PACELINE_ENGINE_CUDA_KERNELS_RMS_NORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// For r in [0, n_rows), with s = rows ? rows[r] : r:
//   if residual: x[s, :] += residual[s, :]   (written back to x)
//   out[r, i] = x[s, i] / sqrt(mean_i(x[s, :]^2) + eps) * w[i]
// The sum of squares is accumulated in double and the scale rounded to
// float, as the CPU engine's RmsNorm does. `rows` gathers (the logits rows
// of a step); `residual` fuses the residual add into the norm.
//   x:        (>= max row + 1, dim) float
//   residual: (same rows as x, dim) float, or null; with a residual the
//             gathered rows must be distinct (each row is updated once)
//   rows:     (n_rows) int32, or null
//   w:        (dim) float
//   out:      (n_rows, dim) of `dtype`; must not alias x
cudaError_t LaunchRmsNorm(GgmlType dtype, float* x, const float* residual,
                          const int32_t* rows, int64_t n_rows, int64_t dim,
                          const float* w, float eps, void* out,
                          cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_RMS_NORM_H_
