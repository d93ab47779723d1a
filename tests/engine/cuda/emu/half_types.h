#ifndef PACELINE_TESTS_ENGINE_CUDA_EMU_HALF_TYPES_H_
#define PACELINE_TESTS_ENGINE_CUDA_EMU_HALF_TYPES_H_

// __half and __nv_bfloat16 for the emulation (emu.h): the 16 bits, with the
// project's own round-to-nearest-even conversions (engine/ggml_type.h,
// engine/quantize.h). cuda_fp16.h and cuda_bf16.h here include this.

#include <cstdint>

#include "emu.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"

struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};

inline float __half2float(__half h) {
  return paceline::engine::HalfToFloat(h.bits);
}
inline __half __float2half_rn(float x) {
  return __half{paceline::engine::FloatToHalf(x)};
}
inline __half __ushort_as_half(unsigned short bits) { return __half{bits}; }

inline float __bfloat162float(__nv_bfloat16 h) {
  return paceline::engine::BFloat16ToFloat(h.bits);
}
inline __nv_bfloat16 __float2bfloat16_rn(float x) {
  return __nv_bfloat16{paceline::engine::FloatToBFloat16(x)};
}

#endif  // PACELINE_TESTS_ENGINE_CUDA_EMU_HALF_TYPES_H_
