#include "engine/tokenizer/normalizer.h"

#include <algorithm>
#include <bitset>
#include <utility>

#include "absl/types/span.h"
#include "engine/tokenizer/unicode_extra_data.h"

namespace paceline::engine {
namespace {

namespace data = unicode_internal;

// Hangul syllables, composed and decomposed arithmetically (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00;
constexpr uint32_t kLBase = 0x1100;
constexpr uint32_t kVBase = 0x1161;
constexpr uint32_t kTBase = 0x11A7;  // one before the first trailing jamo
constexpr uint32_t kLCount = 19;
constexpr uint32_t kVCount = 21;
constexpr uint32_t kTCount = 28;
constexpr uint32_t kSCount = kLCount * kVCount * kTCount;

// Below these the tables hold nothing (the generator asserts it).
constexpr uint32_t kFirstUnstable = 0x300;
constexpr uint32_t kFirstDecomposable = 0xC0;

bool IsUnstableSlow(uint32_t c) {
  return data::RangeValue(data::kNfcUnstableRanges, data::kNumNfcUnstableRanges,
                          c) != 0;
}

// The quick check runs on every codepoint of the text: a bitmap answers it
// for the Basic Multilingual Plane.
using BmpBits = std::bitset<0x10000>;

BmpBits BuildUnstableBmp() {
  BmpBits bits;
  for (size_t r = 0; r < data::kNumNfcUnstableRanges; ++r) {
    if (data::kNfcUnstableRanges[r].value == 0) continue;
    const uint32_t end = r + 1 < data::kNumNfcUnstableRanges
                             ? data::kNfcUnstableRanges[r + 1].first
                             : 0x110000;
    for (uint32_t c = data::kNfcUnstableRanges[r].first;
         c < end && c < bits.size(); ++c) {
      bits[c] = true;
    }
  }
  return bits;
}

const BmpBits& UnstableBmp() {
  static const BmpBits* const bmp = new BmpBits(BuildUnstableBmp());
  return *bmp;
}

inline bool IsUnstable(uint32_t c) {
  if (c < kFirstUnstable) return false;
  return c < 0x10000 ? UnstableBmp()[c] : IsUnstableSlow(c);
}

uint8_t CombiningClass(uint32_t c) {
  if (c < kFirstUnstable) return 0;
  return data::RangeValue(data::kCombiningClassRanges,
                          data::kNumCombiningClassRanges, c);
}

void Decompose(uint32_t c, std::vector<uint32_t>* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const uint32_t s = c - kSBase;
    out->push_back(kLBase + s / (kVCount * kTCount));
    out->push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const data::Decomposition* end =
      data::kDecompositions + data::kNumDecompositions;
  const data::Decomposition* it =
      c < kFirstDecomposable
          ? end
          : std::lower_bound(data::kDecompositions, end, c,
                             [](const data::Decomposition& d, uint32_t v) {
                               return d.codepoint < v;
                             });
  if (it == end || it->codepoint != c) {
    out->push_back(c);
    return;
  }
  Decompose(it->first, out);
  if (it->second != 0) Decompose(it->second, out);
}

// The primary composite of `a` + `b`, or 0.
uint32_t Compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase &&
      b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 &&
      b > kTBase && b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const data::Composition* end = data::kCompositions + data::kNumCompositions;
  const data::Composition* it = std::lower_bound(
      data::kCompositions, end, std::make_pair(a, b),
      [](const data::Composition& c, std::pair<uint32_t, uint32_t> v) {
        return std::make_pair(c.first, c.second) < v;
      });
  return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}

// Stable sort of each run of non-starters by combining class.
void ReorderMarks(std::vector<uint32_t>* cpts, std::vector<uint8_t>* ccc) {
  for (size_t i = 1; i < cpts->size(); ++i) {
    const uint8_t cc = (*ccc)[i];
    if (cc == 0) continue;
    for (size_t j = i; j > 0 && (*ccc)[j - 1] > cc; --j) {
      std::swap((*cpts)[j - 1], (*cpts)[j]);
      std::swap((*ccc)[j - 1], (*ccc)[j]);
    }
  }
}

// Canonical composition in place: each character joins the last starter
// unless a character of the same or a higher class, or a starter, stands
// between them (it is "blocked").
void ComposeAll(std::vector<uint32_t>* cpts, const std::vector<uint8_t>& ccc) {
  std::vector<uint32_t>& d = *cpts;
  if (d.empty()) return;
  size_t starter = 0;
  // 256: nothing may join a leading non-starter.
  int last_class = ccc[0] == 0 ? 0 : 256;
  size_t kept = 1;
  for (size_t i = 1; i < d.size(); ++i) {
    const int cc = ccc[i];
    const uint32_t composite =
        (last_class < cc || last_class == 0) ? Compose(d[starter], d[i]) : 0;
    if (composite != 0) {
      d[starter] = composite;
      continue;
    }
    if (cc == 0) starter = kept;
    last_class = cc;
    d[kept++] = d[i];
  }
  d.resize(kept);
}

// NFC of one segment, appended to `out`.
void NormalizeSegment(absl::Span<const uint32_t> segment,
                      std::vector<uint32_t>* out) {
  std::vector<uint32_t> decomposed;
  decomposed.reserve(segment.size() + 4);
  for (uint32_t c : segment) Decompose(c, &decomposed);
  std::vector<uint8_t> ccc(decomposed.size());
  for (size_t i = 0; i < decomposed.size(); ++i) {
    ccc[i] = CombiningClass(decomposed[i]);
  }
  ReorderMarks(&decomposed, &ccc);
  ComposeAll(&decomposed, ccc);
  out->insert(out->end(), decomposed.begin(), decomposed.end());
}

}  // namespace

// A stable codepoint neither changes under NFC nor joins or reorders with
// what precedes it, so the text splits into independent segments before
// each one; only the segments holding an unstable codepoint are rewritten.
void NormalizeNfc(std::vector<uint32_t>* cpts) {
  const std::vector<uint32_t>& in = *cpts;
  const auto first_unstable = [&](size_t from) {
    return static_cast<size_t>(
        std::find_if(in.begin() + from, in.end(), IsUnstable) - in.begin());
  };
  size_t unstable = first_unstable(0);
  if (unstable == in.size()) return;
  std::vector<uint32_t> out;
  out.reserve(in.size() + 8);
  size_t copied = 0;  // in[0, copied) is in `out`
  while (unstable < in.size()) {
    // Everything in [copied, unstable) is stable: the segment starts at the
    // last of those and ends before the next stable codepoint.
    const size_t begin = unstable > copied ? unstable - 1 : unstable;
    size_t end = unstable + 1;
    while (end < in.size() && IsUnstable(in[end])) ++end;
    out.insert(out.end(), in.begin() + copied, in.begin() + begin);
    NormalizeSegment(absl::MakeConstSpan(in).subspan(begin, end - begin), &out);
    copied = end;
    unstable = first_unstable(end);
  }
  out.insert(out.end(), in.begin() + copied, in.end());
  cpts->swap(out);
}

}  // namespace paceline::engine
