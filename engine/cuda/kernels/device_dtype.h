#ifndef PACELINE_ENGINE_CUDA_KERNELS_DEVICE_DTYPE_H_
#define PACELINE_ENGINE_CUDA_KERNELS_DEVICE_DTYPE_H_

// The element type of the CUDA engine's weights, GEMM activations and, by
// default, KV cache (kv_dtype.h has the cache's own types). One per model:
// F32 models stay F32 (bit-for-bit friendly with the CPU engine), all-BF16
// models stay BF16, everything else runs in F16.
// Residual stream, GEMM outputs and softmax statistics are always float.

#include <cstddef>

namespace paceline::engine::cuda {

enum class DeviceDtype { kF32, kF16, kBF16 };

inline size_t DeviceDtypeBytes(DeviceDtype d) {
  return d == DeviceDtype::kF32 ? 4 : 2;
}

inline const char* DeviceDtypeName(DeviceDtype d) {
  switch (d) {
    case DeviceDtype::kF32:
      return "F32";
    case DeviceDtype::kF16:
      return "F16";
    case DeviceDtype::kBF16:
      return "BF16";
  }
  return "?";
}

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_DEVICE_DTYPE_H_
