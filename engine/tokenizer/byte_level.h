#ifndef PACELINE_ENGINE_TOKENIZER_BYTE_LEVEL_H_
#define PACELINE_ENGINE_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace paceline::engine {

// The dummy models' tokenizer: byte-level ("gpt2" model, no merges), so
// every byte of the text is one token. Ids 0-255 are the bytes (spelled
// through GPT-2's byte-to-unicode map), 256 is BOS "<|bos|>", 257 is EOS
// "<|eos|>" (both control), and unused filler tokens pad the vocabulary to
// `n_vocab` (>= 258; InvalidArgument otherwise). BOS is added by default.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeByteLevelTokenizer(
    int64_t n_vocab);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_BYTE_LEVEL_H_
