#ifndef PACELINE_ENGINE_MODEL_ARCH_ARCHITECTURES_H_
#define PACELINE_ENGINE_MODEL_ARCH_ARCHITECTURES_H_

// The architectures with a layer description (layer_program.h), one file
// each in this folder.

#include <vector>

#include "engine/model/layer_program.h"

namespace paceline::engine::arch {

extern const Architecture kLlama;
extern const Architecture kQwen2;
extern const Architecture kQwen3;
extern const Architecture kQwen3Moe;
extern const Architecture kGemma3;
extern const Architecture kGptOss;
extern const Architecture kQwen35;
extern const Architecture kQwen35Moe;
extern const Architecture kQwen3Next;

// Every architecture above.
const std::vector<const Architecture*>& All();

// The pre-norm attention block every description here starts from:
//   h = RMSNorm(x) · attn_norm; q, k, v, RoPE, KV; att = attention(q, KV)
//   x += att Wo
// (`qkv_bias`, `qk_norm`: kQkvRope's options).
void AppendAttention(LayerProgram* p, bool qkv_bias, bool qk_norm);

// The pre-norm feed-forward block: h = RMSNorm(x) · ffn_norm; x += FFN(h).
void AppendFeedForward(LayerProgram* p, bool moe);

// Reads `<arch>.attention.sliding_window` (absent: 0, no window) and, with
// a window, `<arch>.attention.sliding_window_pattern` (absent:
// `default_period`, llama.cpp's default for the architecture) into
// config->sliding_window and swa_period. Errors name the key.
// The hybrid linear-attention architectures' (hybrid.cc): the layer
// (Gated DeltaNet or gated full attention by ModelConfig::
// IsRecurrentLayer, then the FFN), their keys (full_attention_interval,
// ssm.*, M-RoPE sections, the shared expert's width), and their fixed
// facts (the FFN norm's tensor name, the attention's output gate).
LayerProgram HybridLayer(const ModelConfig& config, int64_t layer);
absl::Status ReadHybridKeys(const GgufFile& file, ModelConfig* config);
void ConfigureHybrid(ModelConfig* config);

absl::Status ReadSlidingWindow(const GgufFile& file, int64_t default_period,
                               ModelConfig* config);

}  // namespace paceline::engine::arch

#endif  // PACELINE_ENGINE_MODEL_ARCH_ARCHITECTURES_H_
