#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_FAST_FORWARD_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_FAST_FORWARD_H_

// Fast-forward (SGLang's jump-forward): where a grammar allows exactly one
// continuation — the keys of a fixed object, `":"`, closing brackets — its
// tokens are appended without sampling (token_mask.h, ForcedTokens).
//
// The forced text is read byte by byte: while exactly one byte may come
// next and the grammar may not end there. It is then spelled with the
// vocabulary's tokens, longest first. Where the rest of the forced text is
// itself the start of longer tokens, forcing stops before it: the model
// picks that token, so the forced part never splits a token the model
// would write across the boundary (`":"` then a free string's first
// word, say).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/token_trie.h"

namespace paceline::engine::grammar {

// The most bytes one call reads (a bound on the work, not on the grammar:
// what is left is forced again after the next token).
inline constexpr size_t kMaxForcedBytes = 256;

// The bytes `matcher` must read next, up to `max_bytes`: empty where more
// than one byte may follow or the grammar may end.
std::string ForcedBytes(const Matcher& matcher,
                        size_t max_bytes = kMaxForcedBytes);

// Appends to `out` up to `max_tokens` tokens spelling a prefix of `bytes`,
// longest first; stops where the rest of `bytes` starts longer tokens, or
// where no token spells the next bytes.
void SpellForced(const TokenTrie& vocab, absl::string_view bytes,
                 int32_t max_tokens, std::vector<int32_t>* out);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_FAST_FORWARD_H_
