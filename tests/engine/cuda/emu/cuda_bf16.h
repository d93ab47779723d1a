#ifndef PACELINE_TESTS_ENGINE_CUDA_EMU_CUDA_BF16_H_
#define PACELINE_TESTS_ENGINE_CUDA_EMU_CUDA_BF16_H_

// __nv_bfloat16 for the emulation (emu.h), with the project's own
// round-to-nearest-even conversions (engine/ggml_type.h).

#include <cstdint>

#include "emu.h"
#include "engine/ggml_type.h"
#include "engine/quantize.h"

struct __nv_bfloat16 {
  uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 h) {
  return paceline::engine::BFloat16ToFloat(h.bits);
}
inline __nv_bfloat16 __float2bfloat16_rn(float x) {
  return __nv_bfloat16{paceline::engine::FloatToBFloat16(x)};
}

#endif  // PACELINE_TESTS_ENGINE_CUDA_EMU_CUDA_BF16_H_
