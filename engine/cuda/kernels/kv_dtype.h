#ifndef PACELINE_ENGINE_CUDA_KERNELS_KV_DTYPE_H_
#define PACELINE_ENGINE_CUDA_KERNELS_KV_DTYPE_H_

// The element type of the CUDA engine's KV cache, chosen apart from the
// model's DeviceDtype (CudaEngineOptions::kv_dtype). A row is one head's
// head_dim elements of K or V at one position (cpu/kv_cache.h's layout and
// encodings, so both engines hold the same bytes for the same floats):
//
//   F32, F16, BF16  head_dim elements of the type (F16 and BF16 rounded to
//                   nearest-even when written).
//   Q8_0            head_dim / 32 blocks of ggml's block_q8_0, 34 bytes
//                   each: an F16 scale d = max|x| / 127, then 32 int8
//                   q = round(x / d); x reads back as d * q. head_dim must
//                   be a multiple of 32.

#include <cstddef>
#include <cstdint>

#include "engine/cuda/kernels/device_dtype.h"

namespace paceline::engine::cuda {

enum class KvDtype { kF32, kF16, kBF16, kQ8_0 };

inline constexpr int64_t kKvQ8BlockElems = 32;
inline constexpr int64_t kKvQ8BlockBytes = 34;  // F16 scale + 32 int8

// The KV type that stores elements as `d` does: the default KV type.
inline KvDtype KvDtypeOf(DeviceDtype d) {
  switch (d) {
    case DeviceDtype::kF32:
      return KvDtype::kF32;
    case DeviceDtype::kBF16:
      return KvDtype::kBF16;
    case DeviceDtype::kF16:
      break;
  }
  return KvDtype::kF16;
}

// Bytes of one row of head_dim elements (Q8_0: whole blocks only, the
// caller has checked head_dim % 32 == 0).
inline size_t KvRowBytes(KvDtype k, int64_t head_dim) {
  const size_t d = static_cast<size_t>(head_dim);
  switch (k) {
    case KvDtype::kF32:
      return 4 * d;
    case KvDtype::kF16:
    case KvDtype::kBF16:
      return 2 * d;
    case KvDtype::kQ8_0:
      return d / kKvQ8BlockElems * kKvQ8BlockBytes;
  }
  return 0;
}

inline const char* KvDtypeName(KvDtype k) {
  switch (k) {
    case KvDtype::kF32:
      return "F32";
    case KvDtype::kF16:
      return "F16";
    case KvDtype::kBF16:
      return "BF16";
    case KvDtype::kQ8_0:
      return "Q8_0";
  }
  return "?";
}

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_KV_DTYPE_H_
