#include "kvpager/block_hash.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/numeric/int128.h"

namespace paceline::kvpager {
namespace {

// Odd constants with well-mixed bits: 2^64 / golden ratio and the
// splitmix64 finalizer multipliers.
constexpr uint64_t kC0 = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kC1 = 0xbf58476d1ce4e5b9ULL;
constexpr uint64_t kC2 = 0x94d049bb133111ebULL;
constexpr uint64_t kC3 = 0xd6e8feb86659fd93ULL;

// The 128-bit product of a and b, folded to 64 bits.
inline uint64_t MulFold(uint64_t a, uint64_t b) {
  const absl::uint128 p = absl::uint128(a) * b;
  return absl::Uint128Low64(p) ^ absl::Uint128High64(p);
}

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t Finalize(uint64_t x) {
  x ^= x >> 30;
  x *= kC1;
  x ^= x >> 27;
  x *= kC2;
  x ^= x >> 31;
  return x;
}

// Two lanes with different seeds, constants and rotations absorb the same
// 64-bit words; each round adds the rotated state back, so a word that
// cancels the multiply's input cannot erase what came before. The lanes are
// crossed when finalized so both output halves depend on every input bit.
BlockKey HashWords(uint64_t a, uint64_t b, const uint64_t* words, size_t count,
                   uint64_t length) {
  a ^= MulFold(length ^ kC2, kC3);
  b ^= MulFold(length ^ kC1, kC0);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t w = words[i];
    a = Rotl(a, 23) + MulFold(a ^ w ^ kC0, kC1);
    b = Rotl(b, 41) + MulFold(b ^ w ^ kC2, kC3);
  }
  BlockKey key;
  key.lo = Finalize(a + Rotl(b, 32));
  key.hi = Finalize(b ^ MulFold(a, kC0));
  return key;
}

}  // namespace

BlockKey HashBlock(const BlockKey& parent, const BlockKey& salt,
                   absl::Span<const int32_t> tokens) {
  uint64_t state_a = MulFold(parent.lo ^ kC0, salt.hi ^ kC1) ^ parent.hi;
  uint64_t state_b = MulFold(parent.hi ^ kC2, salt.lo ^ kC3) ^ parent.lo;
  // Two token ids per word; an odd tail is padded with all ones (the length
  // is hashed too, so padding cannot alias a real token).
  constexpr size_t kStackWords = 32;
  uint64_t words[kStackWords];
  size_t i = 0;
  BlockKey key;
  // Blocks are short (16 tokens = 8 words); longer inputs are hashed in
  // chunks of kStackWords words, chaining the previous chunk's key.
  do {
    size_t n = 0;
    for (; n < kStackWords && i < tokens.size(); ++n) {
      const uint32_t lo = static_cast<uint32_t>(tokens[i++]);
      const uint32_t hi =
          i < tokens.size() ? static_cast<uint32_t>(tokens[i++]) : 0xffffffffU;
      words[n] = (uint64_t{hi} << 32) | lo;
    }
    key = HashWords(state_a, state_b, words, n, tokens.size());
    state_a = key.lo;
    state_b = key.hi;
  } while (i < tokens.size());
  return key;
}

BlockKey HashSalt(absl::string_view salt) {
  constexpr size_t kStackWords = 32;
  uint64_t words[kStackWords];
  uint64_t state_a = kC3;
  uint64_t state_b = kC0;
  size_t i = 0;
  BlockKey key;
  do {
    size_t n = 0;
    for (; n < kStackWords && i < salt.size(); ++n) {
      uint64_t w = ~uint64_t{0};
      const size_t take = salt.size() - i < 8 ? salt.size() - i : 8;
      std::memcpy(&w, salt.data() + i, take);
      i += take;
      words[n] = w;
    }
    key = HashWords(state_a, state_b, words, n, salt.size());
    state_a = key.lo;
    state_b = key.hi;
  } while (i < salt.size());
  return key;
}

}  // namespace paceline::kvpager
