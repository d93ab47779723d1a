#include "engine/tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "engine/tokenizer/unicode_data.h"
#include "engine/tokenizer/unicode_extra_data.h"

namespace paceline::engine {
namespace {

using unicode_internal::CodepointRange;
using unicode_internal::kCodepointRanges;
using unicode_internal::kNumCodepointRanges;

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// ASCII is most of the text we see; skip the binary search for it.
std::array<uint16_t, 128> BuildAsciiFlags() {
  std::array<uint16_t, 128> table{};
  size_t r = 0;
  for (uint32_t c = 0; c < 128; ++c) {
    while (r + 1 < kNumCodepointRanges && kCodepointRanges[r + 1].first <= c) {
      ++r;
    }
    table[c] = kCodepointRanges[r].flags;
  }
  return table;
}

struct ByteTables {
  std::array<uint32_t, 256> byte_to_cpt;
  std::array<int16_t, 324> cpt_to_byte;  // codepoints < 324 only
};

ByteTables BuildByteTables() {
  ByteTables t;
  t.cpt_to_byte.fill(-1);
  auto printable = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
           (b >= 0xAE && b <= 0xFF);
  };
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : next++;
    t.byte_to_cpt[b] = cpt;
    t.cpt_to_byte[cpt] = static_cast<int16_t>(b);
  }
  return t;
}

const ByteTables& GetByteTables() {
  static const ByteTables tables = BuildByteTables();
  return tables;
}

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

namespace unicode_internal {

uint8_t RangeValue(const ByteRange* ranges, size_t n, uint32_t cpt) {
  const ByteRange* it = std::upper_bound(
      ranges, ranges + n, cpt,
      [](uint32_t c, const ByteRange& r) { return c < r.first; });
  return (it - 1)->value;
}

}  // namespace unicode_internal

CodepointFlags GetCodepointFlags(uint32_t cpt) {
  static const std::array<uint16_t, 128> ascii = BuildAsciiFlags();
  if (cpt < 128) return CodepointFlags{ascii[cpt]};
  if (cpt > kMaxCodepoint) return CodepointFlags{CodepointFlags::kUndefined};
  const CodepointRange* end = kCodepointRanges + kNumCodepointRanges;
  const CodepointRange* it = std::upper_bound(
      kCodepointRanges, end, cpt,
      [](uint32_t c, const CodepointRange& r) { return c < r.first; });
  // The first range starts at 0, so `it` is never the first element.
  return CodepointFlags{(it - 1)->flags};
}

LetterCase GetLetterCase(uint32_t cpt) {
  if (cpt < 128) {
    if (cpt >= 'A' && cpt <= 'Z') return LetterCase::kUpper;
    return (cpt >= 'a' && cpt <= 'z') ? LetterCase::kLower : LetterCase::kNone;
  }
  if (cpt > kMaxCodepoint) return LetterCase::kNone;
  return static_cast<LetterCase>(unicode_internal::RangeValue(
      unicode_internal::kLetterCaseRanges,
      unicode_internal::kNumLetterCaseRanges, cpt));
}

absl::string_view UnicodeDataVersion() {
  return unicode_internal::kUnicodeVersion;
}

size_t Utf8LengthFromLeadByte(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                           1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

uint32_t DecodeUtf8Lenient(absl::string_view text, size_t* offset) {
  const size_t i = *offset;
  const size_t avail = text.size() - i;
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t b0 = byte(0);
  size_t len = 0;
  uint32_t cpt = 0;
  if (b0 < 0x80) {
    len = 1;
    cpt = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cpt = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cpt = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cpt = b0 & 0x07;
  }
  // len == 0: a continuation byte or 0xF8..0xFF in lead position.
  bool ok = len != 0 && len <= avail;
  for (size_t k = 1; ok && k < len; ++k) {
    ok = IsContinuation(byte(k));
    cpt = (cpt << 6) | (byte(k) & 0x3F);
  }
  if (!ok || cpt > kMaxCodepoint) {
    *offset += 1;
    return kReplacementCodepoint;
  }
  *offset += len;
  return cpt;
}

std::vector<uint32_t> DecodeUtf8Lenient(absl::string_view text) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) cpts.push_back(DecodeUtf8Lenient(text, &offset));
  return cpts;
}

void AppendUtf8(uint32_t cpt, std::string* out) {
  if (cpt > kMaxCodepoint) cpt = kReplacementCodepoint;
  if (cpt < 0x80) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

std::string EncodeUtf8(uint32_t cpt) {
  std::string out;
  AppendUtf8(cpt, &out);
  return out;
}

uint32_t ByteToUnicode(uint8_t byte) {
  return GetByteTables().byte_to_cpt[byte];
}

int UnicodeToByte(uint32_t cpt) {
  const ByteTables& t = GetByteTables();
  return cpt < t.cpt_to_byte.size() ? t.cpt_to_byte[cpt] : -1;
}

Utf8Scan ScanUtf8(absl::string_view text) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) return {Utf8Scan::kValid, 1, b0};
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Utf8Scan::kInvalid, 1, 0};
  }
  uint32_t cpt = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if (k >= text.size()) return {Utf8Scan::kIncomplete, k, 0};
    const uint8_t b = byte(k);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : IsContinuation(b);
    if (!ok) return {Utf8Scan::kInvalid, k, 0};
    cpt = (cpt << 6) | (b & 0x3F);
  }
  return {Utf8Scan::kValid, len, cpt};
}

std::string SanitizeUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Scan scan = ScanUtf8(text.substr(i));
    if (scan.kind == Utf8Scan::kValid) {
      out.append(text.data() + i, scan.length);
    } else {
      AppendUtf8(kReplacementCodepoint, &out);
    }
    i += scan.length;
  }
  return out;
}

}  // namespace paceline::engine
