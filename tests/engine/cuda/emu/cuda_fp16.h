#ifndef PACELINE_TESTS_ENGINE_CUDA_EMU_CUDA_FP16_H_
#define PACELINE_TESTS_ENGINE_CUDA_EMU_CUDA_FP16_H_

// __half for the emulation (emu.h): IEEE binary16 bits with the project's
// own round-to-nearest-even conversions (engine/ggml_type.h).

#include <cstdint>

#include "emu.h"
#include "engine/ggml_type.h"
#include "engine/quantize.h"

struct __half {
  uint16_t bits;
};

inline float __half2float(__half h) {
  return paceline::engine::HalfToFloat(h.bits);
}
inline __half __float2half_rn(float x) {
  return __half{paceline::engine::FloatToHalf(x)};
}
inline __half __ushort_as_half(unsigned short bits) { return __half{bits}; }

#endif  // PACELINE_TESTS_ENGINE_CUDA_EMU_CUDA_FP16_H_
