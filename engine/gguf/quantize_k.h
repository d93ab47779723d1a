#ifndef PACELINE_ENGINE_GGUF_QUANTIZE_K_H_
#define PACELINE_ENGINE_GGUF_QUANTIZE_K_H_

// Internal to engine/gguf: the K-quant block encoders behind QuantizeRow()
// (quantize.h states their rounding). Each reads 256 floats and writes one
// super-block in ggml's layout (ggml_type.cc documents each one).

#include <cstdint>

namespace paceline::engine::internal {

inline constexpr int64_t kQK = 256;  // elements per K-quant super-block

void QuantizeBlockQ2_K(const float* x, uint8_t* out);  // 84 bytes
void QuantizeBlockQ3_K(const float* x, uint8_t* out);  // 110 bytes
void QuantizeBlockQ4_K(const float* x, uint8_t* out);  // 144 bytes
void QuantizeBlockQ5_K(const float* x, uint8_t* out);  // 176 bytes
void QuantizeBlockQ6_K(const float* x, uint8_t* out);  // 210 bytes

}  // namespace paceline::engine::internal

#endif  // PACELINE_ENGINE_GGUF_QUANTIZE_K_H_
