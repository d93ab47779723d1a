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
//   out:      (n_rows, dim) of `dtype`; may be x itself only when dtype
//             is F32 and rows is null (an in-place norm), else must not
//             alias x
cudaError_t LaunchRmsNorm(GgmlType dtype, float* x, const float* residual,
                          const int32_t* rows, int64_t n_rows, int64_t dim,
                          const float* w, float eps, void* out,
                          cudaStream_t stream);

// A sub-layer's output joining the residual stream, with the norms around
// the add (gemma3's post-norm, then the next sub-layer's pre-norm), in one
// pass per row: for r in [0, n_rows),
//   if y_w: y[r, :] = RMSNorm(y[r, :]) · y_w   (written back to y)
//   x[r, :] += y[r, :]                          (written back to x)
//   if w:   out[r, :] = RMSNorm(x[r, :]) · w
// each step in float as the CPU engine runs them one after the other
// (cpu::RmsNorm, AddInPlace: double sums, the scale rounded to float).
//   y:   (n_rows, dim) float, distinct from x
//   y_w: (dim) float, or null (then y is added as it is)
//   x:   (n_rows, dim) float
//   w:   (dim) float, or null (then out is not written)
//   out: (n_rows, dim) of `dtype`, distinct from x and y
cudaError_t LaunchAddRmsNorm(GgmlType dtype, float* y, const float* y_w,
                             float* x, int64_t n_rows, int64_t dim,
                             const float* w, float eps, void* out,
                             cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_RMS_NORM_H_
