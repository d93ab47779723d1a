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

// Every architecture above.
const std::vector<const Architecture*>& All();

// The pre-norm attention block every description here starts from:
//   h = RMSNorm(x) · attn_norm; q, k, v, RoPE, KV; att = attention(q, KV)
//   x += att Wo
// (`qkv_bias`, `qk_norm`: kQkvRope's options).
void AppendAttention(LayerProgram* p, bool qkv_bias, bool qk_norm);

// The pre-norm feed-forward block: h = RMSNorm(x) · ffn_norm; x += FFN(h).
void AppendFeedForward(LayerProgram* p, bool moe);

}  // namespace paceline::engine::arch

#endif  // PACELINE_ENGINE_MODEL_ARCH_ARCHITECTURES_H_
