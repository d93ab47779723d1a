#ifndef PACELINE_ENGINE_TOKENIZER_NORMALIZER_H_
#define PACELINE_ENGINE_TOKENIZER_NORMALIZER_H_

// Unicode normalization of tokenizer input, for the vocabularies whose
// tokenizer declares it (Hugging Face's "normalizer": NFC for Qwen's; see
// the variant table in pretokenizer.cc).
//
// NormalizeNfc is UAX #15's Normalization Form C: full canonical
// decomposition (Hangul algorithmically), canonical ordering by combining
// class, then canonical composition to primary composites. Text holding no
// codepoint that NFC can change or combine (all of ASCII and Latin-1, most
// CJK, any already-composed text without combining marks) is left untouched
// after one table look-up per codepoint above U+02FF. The tables come from
// tools/gen_unicode_extra_data.py (same Unicode version as unicode.h).
//
// Thread-safety: stateless.

#include <cstdint>
#include <vector>

namespace paceline::engine {

// Rewrites `cpts` (codepoints <= U+10FFFF) in NFC.
void NormalizeNfc(std::vector<uint32_t>* cpts);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_NORMALIZER_H_
