#include "engine/gguf/ggml_type.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

// Block layouts are ggml's (ggml-common.h). Every field is read through
// memcpy from a byte pointer, so blocks need no alignment; multi-byte fields
// are little-endian on disk and read in host order (see the static_assert).
// The arithmetic follows ggml's reference dequantizers operation by
// operation (e.g. Q4_K computes `(d * scale) * q - (dmin * min)`) so that
// results equal ggml's scalar ones, up to FMA contraction by the compiler.

namespace paceline::engine {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF tensor data is little-endian and is read in host order");

using BlockFn = void (*)(const uint8_t* block, float* out);
using RowFn = void (*)(const uint8_t* src, float* dst, int64_t num_blocks);

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

float LoadHalf(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// ---- Plain types: one element per "block". ----

void RowF32(const uint8_t* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void RowF16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(LoadU16(src + 2 * i));
}

void RowBF16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = BFloat16ToFloat(LoadU16(src + 2 * i));
  }
}

// I8..I64 and F64 convert by value: IEEE round-to-nearest, so F64 values
// beyond float's range become +-inf and large integers round.
template <typename T>
void RowCast(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}

// ---- 32-element blocks. Element i < 16 is the low nibble of qs[i], element
// i + 16 its high nibble. ----

// Q4_0, 18 bytes: d f16 | qs[16]. x = (q - 8) * d.
void BlockQ4_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int i = 0; i < 16; ++i) {
    y[i] = static_cast<float>((qs[i] & 0xF) - 8) * d;
    y[i + 16] = static_cast<float>((qs[i] >> 4) - 8) * d;
  }
}

// Q4_1, 20 bytes: d f16 | m f16 | qs[16]. x = q * d + m.
void BlockQ4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  const uint8_t* qs = b + 4;
  for (int i = 0; i < 16; ++i) {
    y[i] = static_cast<float>(qs[i] & 0xF) * d + m;
    y[i + 16] = static_cast<float>(qs[i] >> 4) * d + m;
  }
}

// Q5_0, 22 bytes: d f16 | qh u32 (bit i = bit 4 of element i) | qs[16].
// x = (q - 16) * d.
void BlockQ5_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint32_t qh = LoadU32(b + 2);
  const uint8_t* qs = b + 6;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 0xF) | static_cast<int>((qh >> i) & 1) << 4;
    const int hi = (qs[i] >> 4) | static_cast<int>((qh >> (i + 16)) & 1) << 4;
    y[i] = static_cast<float>(lo - 16) * d;
    y[i + 16] = static_cast<float>(hi - 16) * d;
  }
}

// Q5_1, 24 bytes: d f16 | m f16 | qh u32 | qs[16]. x = q * d + m.
void BlockQ5_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  const uint32_t qh = LoadU32(b + 4);
  const uint8_t* qs = b + 8;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 0xF) | static_cast<int>((qh >> i) & 1) << 4;
    const int hi = (qs[i] >> 4) | static_cast<int>((qh >> (i + 16)) & 1) << 4;
    y[i] = static_cast<float>(lo) * d + m;
    y[i + 16] = static_cast<float>(hi) * d + m;
  }
}

// Q8_0, 34 bytes: d f16 | int8 qs[32]. x = q * d.
void BlockQ8_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int i = 0; i < 32; ++i) {
    y[i] = static_cast<float>(static_cast<int8_t>(b[2 + i])) * d;
  }
}

// Q8_1, 36 bytes: d f16 | s f16 (d * sum(q), unused here) | int8 qs[32].
void BlockQ8_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int i = 0; i < 32; ++i) {
    y[i] = static_cast<float>(static_cast<int8_t>(b[4 + i])) * d;
  }
}

// IQ4_NL, 18 bytes: d f16 | qs[16]. x = d * kIq4Levels[q].
void BlockIQ4_NL(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>(kIq4Levels[qs[i] & 0xF]);
    y[i + 16] = d * static_cast<float>(kIq4Levels[qs[i] >> 4]);
  }
}

// MXFP4, 17 bytes: e (E8M0 exponent) | qs[16], nibbles split as IQ4_NL.
// x = 2^(e - 128) * (2 * fp4(q)): the doubled E2M1 levels are whole numbers
// and the halved scale keeps e = 255 finite, as ggml computes it.
void BlockMXFP4(const uint8_t* b, float* y) {
  const float d = E8M0HalfToFloat(b[0]);
  const uint8_t* qs = b + 1;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>(kMxfp4Levels[qs[i] & 0xF]);
    y[i + 16] = d * static_cast<float>(kMxfp4Levels[qs[i] >> 4]);
  }
}

// ---- 256-element super-blocks (K-quants, IQ4_XS, ternary). ----

// Q2_K, 84 bytes: scales[16] | qs[64] | d f16 | dmin f16. Element e sits in
// bits 2k..2k+1 of qs[32h + l] (h = e / 128, k = e % 128 / 32, l = e % 32);
// scales[e / 16] holds its 4-bit scale (low) and min (high).
// x = (d * scale) * q - (dmin * min).
void BlockQ2_K(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = LoadHalf(b + 80);
  const float dmin = LoadHalf(b + 82);
  for (int g = 0; g < 16; ++g) {  // 16 groups of 16 elements
    const float dl = d * static_cast<float>(scales[g] & 0xF);
    const float ml = dmin * static_cast<float>(scales[g] >> 4);
    const uint8_t* q = qs + 32 * (g / 8) + 16 * (g % 2);
    const int shift = 2 * (g % 8 / 2);
    for (int l = 0; l < 16; ++l) {
      y[16 * g + l] = dl * static_cast<float>((q[l] >> shift) & 3) - ml;
    }
  }
}

// The 6-bit scale j of Q3_K's 12-byte array: its low 4 bits are the low
// (j < 8) or high (j >= 8) nibble of byte j % 8, its top 2 bits are bits
// 2 * (j / 4) of byte 8 + j % 4.
int Q3KScale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | high << 4;
}

// Q3_K, 110 bytes: hmask[32] | qs[64] | scales[12] | d f16. Element e's low
// two bits are placed as in Q2_K; its third bit is bit (e / 32) of
// hmask[e % 32], and a clear bit subtracts 4. x = (d * (scale - 32)) * q.
void BlockQ3_K(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  const float d = LoadHalf(b + 108);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * static_cast<float>(Q3KScale(scales, g) - 32);
    const int h = g / 8;
    const int k = g % 8 / 2;
    const int l0 = 16 * (g % 2);
    for (int l = l0; l < l0 + 16; ++l) {
      const int low = (qs[32 * h + l] >> (2 * k)) & 3;
      const int q = low - ((hmask[l] >> (4 * h + k)) & 1 ? 0 : 4);
      y[16 * g + l - l0] = dl * static_cast<float>(q);
    }
  }
}

// The 6-bit scale and min of sub-block j in Q4_K/Q5_K's 12-byte array:
// bytes 0-3 hold scales 0-3, bytes 4-7 mins 0-3 (low 6 bits each); scales and
// mins 4-7 keep their low nibbles in bytes 8-11 (scale low, min high) and
// their top 2 bits in the top bits of bytes 0-3 (scales) and 4-7 (mins).
void K4ScaleMin(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
    *min = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// Q4_K, 144 bytes: d f16 | dmin f16 | scales[12] | qs[128]. Sub-block j
// (32 elements) is the low (even j) or high (odd j) nibbles of
// qs[32 * (j / 2) ...]. x = (d * scale) * q - (dmin * min).
void BlockQ4_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    K4ScaleMin(scales, j, &scale, &min);
    const float dl = d * static_cast<float>(scale);
    const float ml = dmin * static_cast<float>(min);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      y[32 * j + l] = dl * static_cast<float>((q[l] >> shift) & 0xF) - ml;
    }
  }
}

// Q5_K, 176 bytes: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]. Low
// nibbles as in Q4_K; bit 4 of element 32j + l is bit j of qh[l].
void BlockQ5_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    K4ScaleMin(scales, j, &scale, &min);
    const float dl = d * static_cast<float>(scale);
    const float ml = dmin * static_cast<float>(min);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0xF) | ((qh[l] >> j) & 1) << 4;
      y[32 * j + l] = dl * static_cast<float>(v) - ml;
    }
  }
}

// Q6_K, 210 bytes: ql[128] | qh[64] | int8 scales[16] | d f16. In half h,
// quarter k, lane l (e = 128h + 32k + l): low nibble from
// ql[64h + 32(k % 2) + l] (k < 2 low, else high nibble), top 2 bits from bits
// 2k of qh[32h + l]. x = (d * scales[e / 16]) * (q - 32).
void BlockQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const uint8_t* scales = b + 192;
  const float d = LoadHalf(b + 208);
  for (int g = 0; g < 16; ++g) {  // 16 groups of 16 elements
    const float dl = d * static_cast<float>(static_cast<int8_t>(scales[g]));
    const int h = g / 8;
    const int k = g % 8 / 2;
    const int l0 = 16 * (g % 2);
    const uint8_t* lo = ql + 64 * h + 32 * (k % 2);
    for (int l = l0; l < l0 + 16; ++l) {
      const int q = ((lo[l] >> (4 * (k / 2))) & 0xF) |
                    ((qh[32 * h + l] >> (2 * k)) & 3) << 4;
      y[16 * g + l - l0] = dl * static_cast<float>(q - 32);
    }
  }
}

// Q8_K, 292 bytes: d f32 | int8 qs[256] | int16 bsums[16] (unused here).
void BlockQ8_K(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, sizeof(d));
  for (int i = 0; i < 256; ++i) {
    y[i] = d * static_cast<float>(static_cast<int8_t>(b[4 + i]));
  }
}

// IQ4_XS, 136 bytes: d f16 | scales_h u16 | scales_l[4] | qs[128]. The 6-bit
// scale of sub-block j is nibble j % 2 of scales_l[j / 2] plus bits 2j of
// scales_h on top; sub-block j packs like IQ4_NL in qs[16j ...].
// x = (d * (scale - 32)) * kIq4Levels[q].
void BlockIQ4_XS(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint16_t scales_h = LoadU16(b + 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 8; ++j) {
    const int scale = ((scales_l[j / 2] >> (4 * (j % 2))) & 0xF) |
                      ((scales_h >> (2 * j)) & 3) << 4;
    const float dl = d * static_cast<float>(scale - 32);
    const uint8_t* q = qs + 16 * j;
    for (int i = 0; i < 16; ++i) {
      y[32 * j + i] = dl * static_cast<float>(kIq4Levels[q[i] & 0xF]);
      y[32 * j + i + 16] = dl * static_cast<float>(kIq4Levels[q[i] >> 4]);
    }
  }
}

// TQ1_0 stores 5 trits per byte as ceil(v * 256 / 243) for the base-3 number
// v whose most significant digit comes first; digit n is recovered from the
// byte times 3^n (mod 256) by taking its top "third".
float Trit(uint8_t byte, int n, float d) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
  return static_cast<float>(((q * 3) >> 8) - 1) * d;
}

// TQ1_0, 54 bytes: qs[48] | qh[4] | d f16. Digit n of qs[m] is element
// 32n + m (m < 32) or 160 + 16n + (m - 32) (m >= 32); digit n < 4 of qh[j]
// is element 240 + 4n + j. x = (t - 1) * d for the digit t in {0, 1, 2}.
void BlockTQ1_0(const uint8_t* b, float* y) {
  const uint8_t* qs = b;
  const uint8_t* qh = b + 48;
  const float d = LoadHalf(b + 52);
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) y[32 * n + m] = Trit(qs[m], n, d);
    for (int m = 0; m < 16; ++m) y[160 + 16 * n + m] = Trit(qs[32 + m], n, d);
  }
  for (int n = 0; n < 4; ++n) {
    for (int j = 0; j < 4; ++j) y[240 + 4 * n + j] = Trit(qh[j], n, d);
  }
}

// TQ2_0, 66 bytes: qs[64] | d f16. Element 128c + 32k + m is bits 2k of
// qs[32c + m]. x = (q - 1) * d.
void BlockTQ2_0(const uint8_t* b, float* y) {
  const uint8_t* qs = b;
  const float d = LoadHalf(b + 64);
  for (int c = 0; c < 2; ++c) {
    for (int k = 0; k < 4; ++k) {
      for (int m = 0; m < 32; ++m) {
        const int q = (qs[32 * c + m] >> (2 * k)) & 3;
        y[128 * c + 32 * k + m] = static_cast<float>(q - 1) * d;
      }
    }
  }
}

template <int64_t kElems, int64_t kBytes, BlockFn kBlock>
void RowBlocks(const uint8_t* src, float* dst, int64_t num_blocks) {
  for (int64_t i = 0; i < num_blocks; ++i) {
    kBlock(src + i * kBytes, dst + i * kElems);
  }
}

// ---- The table. ----

struct TypeEntry {
  GgmlTypeTraits traits;
  RowFn dequantize;  // null when DequantizeRow is Unimplemented
};

// Name and layout from ggml_type_layout.h, the one place they are written.
constexpr TypeEntry Entry(GgmlType type, RowFn fn) {
  const GgmlLayout l = GgmlTypeLayout(type);
  return {{type, l.name, l.elems, l.bytes, /*can_dequantize=*/fn != nullptr},
          fn};
}

constexpr TypeEntry Unsupported(GgmlType type) { return Entry(type, nullptr); }

template <GgmlType kType, BlockFn kBlock>
constexpr TypeEntry Blocked() {
  return Entry(
      kType, &RowBlocks<GgmlBlockElems(kType), GgmlBlockBytes(kType), kBlock>);
}

constexpr TypeEntry kEntries[] = {
    Entry(GgmlType::kF32, &RowF32),
    Entry(GgmlType::kF16, &RowF16),
    Blocked<GgmlType::kQ4_0, &BlockQ4_0>(),
    Blocked<GgmlType::kQ4_1, &BlockQ4_1>(),
    Blocked<GgmlType::kQ5_0, &BlockQ5_0>(),
    Blocked<GgmlType::kQ5_1, &BlockQ5_1>(),
    Blocked<GgmlType::kQ8_0, &BlockQ8_0>(),
    Blocked<GgmlType::kQ8_1, &BlockQ8_1>(),
    Blocked<GgmlType::kQ2_K, &BlockQ2_K>(),
    Blocked<GgmlType::kQ3_K, &BlockQ3_K>(),
    Blocked<GgmlType::kQ4_K, &BlockQ4_K>(),
    Blocked<GgmlType::kQ5_K, &BlockQ5_K>(),
    Blocked<GgmlType::kQ6_K, &BlockQ6_K>(),
    Blocked<GgmlType::kQ8_K, &BlockQ8_K>(),
    // The grid-based i-quants need ggml's codebooks; not supported (yet).
    Unsupported(GgmlType::kIQ2_XXS),
    Unsupported(GgmlType::kIQ2_XS),
    Unsupported(GgmlType::kIQ3_XXS),
    Unsupported(GgmlType::kIQ1_S),
    Blocked<GgmlType::kIQ4_NL, &BlockIQ4_NL>(),
    Unsupported(GgmlType::kIQ3_S),
    Unsupported(GgmlType::kIQ2_S),
    Blocked<GgmlType::kIQ4_XS, &BlockIQ4_XS>(),
    Entry(GgmlType::kI8, &RowCast<int8_t>),
    Entry(GgmlType::kI16, &RowCast<int16_t>),
    Entry(GgmlType::kI32, &RowCast<int32_t>),
    Entry(GgmlType::kI64, &RowCast<int64_t>),
    Entry(GgmlType::kF64, &RowCast<double>),
    Unsupported(GgmlType::kIQ1_M),
    Entry(GgmlType::kBF16, &RowBF16),
    Blocked<GgmlType::kTQ1_0, &BlockTQ1_0>(),
    Blocked<GgmlType::kTQ2_0, &BlockTQ2_0>(),
    Blocked<GgmlType::kMXFP4, &BlockMXFP4>(),
};

constexpr uint32_t kIdLimit = 40;  // one past the largest id in the enum

// kEntries position of each id, -1 for ids ggml never had or retired.
constexpr std::array<int8_t, kIdLimit> kIndexById = [] {
  std::array<int8_t, kIdLimit> index{};
  index.fill(-1);
  for (size_t i = 0; i < std::size(kEntries); ++i) {
    index[static_cast<uint32_t>(kEntries[i].traits.type)] =
        static_cast<int8_t>(i);
  }
  return index;
}();

constexpr bool IdsAreUnique() {
  int found = 0;
  for (int8_t i : kIndexById) found += i >= 0 ? 1 : 0;
  return found == static_cast<int>(std::size(kEntries));
}
static_assert(IdsAreUnique(), "a type id appears twice in kEntries");

const TypeEntry* FindEntry(uint32_t id) {
  if (id >= kIdLimit || kIndexById[id] < 0) return nullptr;
  return &kEntries[kIndexById[id]];
}

}  // namespace

const GgmlTypeTraits* FindGgmlType(uint32_t id) {
  const TypeEntry* entry = FindEntry(id);
  return entry == nullptr ? nullptr : &entry->traits;
}

const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type) {
  const GgmlTypeTraits* traits = FindGgmlType(static_cast<uint32_t>(type));
  // A GgmlType outside the enum is a caller bug; ids from files go through
  // FindGgmlType.
  if (traits == nullptr) std::abort();
  return *traits;
}

absl::StatusOr<uint64_t> GgmlRowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits* traits = FindGgmlType(static_cast<uint32_t>(type));
  if (traits == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ggml type id ", static_cast<uint32_t>(type)));
  }
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(traits->name, ": negative element count ", n));
  }
  if (n % traits->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        traits->name, ": ", n, " elements is not a multiple of the block size ",
        traits->block_size));
  }
  const uint64_t blocks = static_cast<uint64_t>(n / traits->block_size);
  const uint64_t block_bytes = static_cast<uint64_t>(traits->type_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
    return absl::OutOfRangeError(absl::StrCat(
        traits->name, ": byte size of ", n, " elements overflows 64 bits"));
  }
  return blocks * block_bytes;
}

absl::Status DequantizeRow(GgmlType type, const void* src, float* dst,
                           int64_t n) {
  RETURN_IF_ERROR(GgmlRowBytes(type, n).status());
  const TypeEntry& entry = *FindEntry(static_cast<uint32_t>(type));
  if (entry.dequantize == nullptr) {
    return absl::UnimplementedError(absl::StrCat("dequantization of ggml type ",
                                                 entry.traits.name,
                                                 " is not implemented"));
  }
  if (n == 0) return absl::OkStatus();
  if (src == nullptr || dst == nullptr) {
    return absl::InvalidArgumentError("DequantizeRow: null buffer");
  }
  entry.dequantize(static_cast<const uint8_t*>(src), dst,
                   n / entry.traits.block_size);
  return absl::OkStatus();
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) {  // inf or nan; a nan keeps its payload
    bits = sign | 0x7F800000u | mantissa << 13;
  } else if (exponent != 0) {  // normal: rebias the exponent from 15 to 127
    bits = sign | (exponent + 112) << 23 | mantissa << 13;
  } else {  // zero or subnormal: mantissa * 2^-24, exact on normal floats
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    bits = sign | std::bit_cast<uint32_t>(magnitude);
  }
  return std::bit_cast<float>(bits);
}

float E8M0HalfToFloat(uint8_t e) {
  // 2^(e - 128) is a normal float with biased exponent e - 1 from e = 2;
  // below that the subnormals 2^-128 and 2^-127 (mantissa bits 21 and 22).
  const uint32_t bits =
      e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : uint32_t{1} << (21 + e);
  return std::bit_cast<float>(bits);
}

float BFloat16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace paceline::engine
