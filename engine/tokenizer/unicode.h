#ifndef PACELINE_ENGINE_TOKENIZER_UNICODE_H_
#define PACELINE_ENGINE_TOKENIZER_UNICODE_H_

// UTF-8 and codepoint classes for the tokenizer.
//
// Two decoders, on purpose:
//  - DecodeUtf8Lenient() reproduces llama.cpp's tokenizer input handling, so
//    token ids match it byte for byte: a lead byte announces the length, the
//    continuation bytes must be 10xxxxxx, and anything else becomes U+FFFD
//    while consuming ONE byte. Overlong forms and surrogates are accepted as
//    llama.cpp accepts them; values above U+10FFFF become U+FFFD.
//  - ScanUtf8() is strict (Unicode Table 3-7) and is what output text uses:
//    invalid sequences become one U+FFFD per maximal ill-formed subpart.
//
// Codepoint flags follow llama.cpp's definitions: exactly one category bit
// (letter \p{L}, number \p{N}, separator \p{Z}, mark \p{M}, punctuation
// \p{P}, symbol \p{S}, control \p{C} other than unassigned, undefined for
// unassigned) plus a whitespace bit for the Unicode White_Space property
// (U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000; not U+001C..U+001F). The tables come from
// tools/gen_unicode_data.py, the letter case from
// tools/gen_unicode_extra_data.py; see UnicodeDataVersion().
//
// Thread-safety: everything here is stateless or reads constant tables.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace paceline::engine {

inline constexpr uint32_t kReplacementCodepoint = 0xFFFD;

struct CodepointFlags {
  static constexpr uint16_t kUndefined = 0x0001;
  static constexpr uint16_t kNumber = 0x0002;
  static constexpr uint16_t kLetter = 0x0004;
  static constexpr uint16_t kSeparator = 0x0008;
  static constexpr uint16_t kMark = 0x0010;
  static constexpr uint16_t kPunctuation = 0x0020;
  static constexpr uint16_t kSymbol = 0x0040;
  static constexpr uint16_t kControl = 0x0080;
  static constexpr uint16_t kCategoryMask = 0x00FF;
  static constexpr uint16_t kWhitespace = 0x0100;

  // 0 means "no codepoint" (the pre-tokenizer uses it past a piece's end);
  // every real codepoint has exactly one category bit set.
  uint16_t bits = 0;

  bool none() const { return bits == 0; }
  bool is_undefined() const { return bits & kUndefined; }
  bool is_number() const { return bits & kNumber; }
  bool is_letter() const { return bits & kLetter; }
  bool is_separator() const { return bits & kSeparator; }
  bool is_mark() const { return bits & kMark; }
  bool is_punctuation() const { return bits & kPunctuation; }
  bool is_symbol() const { return bits & kSymbol; }
  bool is_control() const { return bits & kControl; }
  bool is_whitespace() const { return bits & kWhitespace; }
};

// Flags of `cpt`; codepoints above U+10FFFF are undefined.
CodepointFlags GetCodepointFlags(uint32_t cpt);

// Letter case, for the o200k pre-tokenizer's classes [\p{Lu}\p{Lt}...] and
// [\p{Ll}...]: kUpper for Lu and Lt, kLower for Ll, kNone for everything
// else (modifier and other letters, non-letters).
enum class LetterCase : uint8_t { kNone = 0, kUpper = 1, kLower = 2 };
LetterCase GetLetterCase(uint32_t cpt);

// The Unicode version of the generated tables, e.g. "14.0.0".
absl::string_view UnicodeDataVersion();

// llama.cpp's length table: 1 for 0x00-0xBF (continuation bytes included),
// 2 for 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for 0xF0-0xFF.
size_t Utf8LengthFromLeadByte(uint8_t lead);

// Decodes one codepoint at `*offset` (< text.size()) and advances `*offset`
// past it (by exactly one byte for an invalid sequence, which yields
// U+FFFD). See the header comment for the exact rules.
uint32_t DecodeUtf8Lenient(absl::string_view text, size_t* offset);
std::vector<uint32_t> DecodeUtf8Lenient(absl::string_view text);

// Appends the UTF-8 encoding of `cpt` (surrogates are encoded like any other
// value, as llama.cpp does); values above U+10FFFF append U+FFFD.
void AppendUtf8(uint32_t cpt, std::string* out);
std::string EncodeUtf8(uint32_t cpt);

// GPT-2's byte-to-unicode table: printable Latin-1 bytes map to themselves,
// the other 68 bytes to U+0100.. in byte order (0x20 -> U+0120 'Ġ').
uint32_t ByteToUnicode(uint8_t byte);
// The inverse; -1 when `cpt` is not in the table.
int UnicodeToByte(uint32_t cpt);

// Strict look at the sequence starting at text[0] (text non-empty).
struct Utf8Scan {
  enum Kind { kValid, kIncomplete, kInvalid };
  Kind kind;
  // kValid: bytes of the codepoint. kIncomplete: bytes present, all a valid
  // prefix reaching the end of `text`. kInvalid: bytes of the maximal
  // ill-formed subpart, to be replaced by one U+FFFD (at least 1).
  size_t length;
  uint32_t codepoint;  // kValid only
};
Utf8Scan ScanUtf8(absl::string_view text);

// `text` with every ill-formed subpart (an incomplete tail included)
// replaced by U+FFFD.
std::string SanitizeUtf8(absl::string_view text);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_UNICODE_H_
