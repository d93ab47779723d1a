#ifndef PACELINE_ENGINE_CUDA_KERNELS_SAMPLING_H_
#define PACELINE_ENGINE_CUDA_KERNELS_SAMPLING_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/sampling/row_sampling_math.h"

namespace paceline::engine::cuda {

// Samples each logits row whose params[r].in_engine is set, by the rule of
// engine/row_sampling.h, bit for bit as SampleRow computes it on the host:
// tokens[r] = the token, or -1 - (the first non-finite logit's id), or
// kNoAllowedToken. Rows not in_engine are left alone. One thread block per
// row. A row's mask (params[r].allowed), when set, is a device address.
//   logits: (rows, vocab) float, device
//   params: (rows) device
//   tokens: (rows) int32, device
cudaError_t LaunchSampleRows(const float* logits, int64_t rows, int64_t vocab,
                             const RowSampling* params, int32_t* tokens,
                             cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_SAMPLING_H_
