#ifndef PACELINE_TESTS_ENGINE_EMBEDDING_REFERENCE_H_
#define PACELINE_TESTS_ENGINE_EMBEDDING_REFERENCE_H_

// llama.cpp's pooled, L2-normalized embeddings of the oracle qwen3 F32
// file (tests/engine/cpu/data/embedding_reference.json, made by
// tests/testing/make_embedding_reference.py with llama.cpp's server,
// --pooling last / mean), and an engine's own for the same prompts: the
// embedding tests of every backend.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/embedding_pooler.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"

namespace paceline::engine::testing {

// The oracle file the reference was made from.
std::string EmbeddingModelPath();

// {"prompts": [[ids]...], "last": [[floats]...], "mean": [...]}.
nlohmann::json EmbeddingReference();

// The prompt's pooled embedding from `engine`, `chunk` tokens per step
// (blocks 0, 1, ... of its pool; the engine's block size from `block_size`).
std::vector<float> Embed(Engine& engine, int32_t block_size,
                         PoolingType pooling,
                         const std::vector<int32_t>& prompt, int32_t chunk);

// Compares `engine`'s embeddings of the reference prompts of at most
// `max_prompt_tokens`, last and mean pooling, `chunk` tokens per step (mean
// pooling then adds across steps), with llama.cpp's: cosine above 0.9999
// and every component within `max_diff`.
void ExpectEmbeddingsMatchLlamaCpp(Engine& engine, int32_t block_size,
                                   double max_diff, int32_t chunk = 24,
                                   size_t max_prompt_tokens = 1 << 20);

}  // namespace paceline::engine::testing

#endif  // PACELINE_TESTS_ENGINE_EMBEDDING_REFERENCE_H_
