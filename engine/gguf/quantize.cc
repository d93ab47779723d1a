#include "engine/gguf/quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/gguf/quantize_k.h"

namespace paceline::engine {
namespace {

constexpr int64_t kQBlock = 32;  // elements per Q8_0 / Q4_0 block

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

// Q8_0, 34 bytes per block: d f16 | int8 q[32]; x ~ q * d.
void QuantizeBlockQ8_0(const float* x, uint8_t* out) {
  float amax = 0;
  for (int64_t i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float inv = d != 0 ? 1.0f / d : 0.0f;
  StoreU16(out, FloatToHalf(d));
  for (int64_t i = 0; i < kQBlock; ++i) {
    out[2 + i] =
        static_cast<uint8_t>(static_cast<int8_t>(std::round(x[i] * inv)));
  }
}

// Q4_0, 18 bytes per block: d f16 | 16 bytes of nibbles; element i < 16 is
// the low nibble of byte i, element i + 16 its high nibble; x ~ (q - 8) * d.
// The element of largest magnitude maps exactly to q = 0 (d = m / -8), so
// the sign of the scale follows it and the full [-8, 7] range is used.
void QuantizeBlockQ4_0(const float* x, uint8_t* out) {
  float m = 0;
  for (int64_t i = 0; i < kQBlock; ++i) {
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  }
  const float d = m / -8.0f;
  const float inv = d != 0 ? 1.0f / d : 0.0f;
  StoreU16(out, FloatToHalf(d));
  const auto level = [inv](float v) {
    const int q = static_cast<int>(v * inv + 8.5f);  // >= 0: truncation
    return static_cast<uint8_t>(std::min(15, q));
  };
  for (int64_t i = 0; i < kQBlock / 2; ++i) {
    out[2 + i] = static_cast<uint8_t>(level(x[i]) | level(x[i + 16]) << 4);
  }
}

// MXFP4, 17 bytes per block: e (E8M0) | 16 bytes of nibbles split as Q4_0;
// x ~ kMxfp4Levels[q] * 2^(e - 128). As ggml: e puts the largest magnitude
// m in [4, 8) times 2^(e - 127) (e = floor(log2 m) + 125, 0 when m is 0 or
// tiny), and each element takes the nearest level, the first in table order
// on ties.
uint8_t Mxfp4Exponent(const float* x) {
  float amax = 0;
  for (int64_t i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (!(amax > 0)) return 0;
  if (std::isinf(amax)) return 255;
  const int e = std::ilogb(amax) + 125;  // ilogb: floor(log2), exact
  return static_cast<uint8_t>(std::clamp(e, 0, 255));
}

uint8_t NearestMxfp4Level(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Levels[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMxfp4Levels[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

void QuantizeBlockMXFP4(const float* x, uint8_t* out) {
  out[0] = Mxfp4Exponent(x);
  const float d = E8M0HalfToFloat(out[0]);
  for (int64_t i = 0; i < kQBlock / 2; ++i) {
    out[1 + i] = static_cast<uint8_t>(NearestMxfp4Level(x[i], d) |
                                      NearestMxfp4Level(x[i + 16], d) << 4);
  }
}

// Encodes n / 256 super-blocks of `block_bytes` each.
void QuantizeSuperBlocks(void (*encode)(const float*, uint8_t*),
                         int64_t block_bytes, const float* src, int64_t n,
                         uint8_t* out) {
  for (int64_t b = 0; b < n / internal::kQK; ++b) {
    encode(src + b * internal::kQK, out + b * block_bytes);
  }
}

}  // namespace

uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const int32_t exp = static_cast<int32_t>((bits >> 23) & 0xFF);
  uint32_t mant = bits & 0x7FFFFF;
  if (exp == 0xFF) {  // inf, NaN (kept quiet, top payload bits kept)
    return sign | 0x7C00 | (mant != 0 ? 0x200 | (mant >> 13) : 0);
  }
  const int32_t e = exp - 127 + 15;  // the half's biased exponent
  if (e >= 31) return sign | 0x7C00;
  if (e <= 0) {
    // Subnormal half: the value in units of 2^-24 is m24 >> (14 - e).
    if (e < -10) return sign;
    const uint32_t m24 = mant | 0x800000;
    const int shift = 14 - e;
    uint32_t half = m24 >> shift;
    const uint32_t rem = m24 & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = static_cast<uint32_t>(e) << 10 | (mant >> 13);
  const uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry
  return sign | static_cast<uint16_t>(half);
}

uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFF) > 0x7F800000) {  // NaN: keep it a (quiet) NaN
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  }
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

bool CanQuantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kMXFP4:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

absl::Status QuantizeRow(GgmlType type, const float* src, int64_t n,
                         void* dst) {
  if (!CanQuantize(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot quantize to ", GetGgmlTypeTraits(type).name,
                     "; supported: F32, F16, BF16, Q8_0, Q4_0, MXFP4, Q2_K, "
                     "Q3_K, Q4_K, Q5_K, Q6_K"));
  }
  const int64_t block = GetGgmlTypeTraits(type).block_size;
  if (n < 0 || n % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot quantize ", n, " elements to ", GetGgmlTypeTraits(type).name,
        ": want a multiple of ", block));
  }
  auto* out = static_cast<uint8_t*>(dst);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i)
        StoreU16(out + 2 * i, FloatToHalf(src[i]));
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        StoreU16(out + 2 * i, FloatToBFloat16(src[i]));
      }
      break;
    case GgmlType::kQ8_0:
      for (int64_t b = 0; b < n / kQBlock; ++b) {
        QuantizeBlockQ8_0(src + b * kQBlock, out + b * 34);
      }
      break;
    case GgmlType::kQ4_0:
      for (int64_t b = 0; b < n / kQBlock; ++b) {
        QuantizeBlockQ4_0(src + b * kQBlock, out + b * 18);
      }
      break;
    case GgmlType::kMXFP4:
      for (int64_t b = 0; b < n / kQBlock; ++b) {
        QuantizeBlockMXFP4(src + b * kQBlock, out + b * 17);
      }
      break;
    case GgmlType::kQ2_K:
      QuantizeSuperBlocks(&internal::QuantizeBlockQ2_K, 84, src, n, out);
      break;
    case GgmlType::kQ3_K:
      QuantizeSuperBlocks(&internal::QuantizeBlockQ3_K, 110, src, n, out);
      break;
    case GgmlType::kQ4_K:
      QuantizeSuperBlocks(&internal::QuantizeBlockQ4_K, 144, src, n, out);
      break;
    case GgmlType::kQ5_K:
      QuantizeSuperBlocks(&internal::QuantizeBlockQ5_K, 176, src, n, out);
      break;
    case GgmlType::kQ6_K:
      QuantizeSuperBlocks(&internal::QuantizeBlockQ6_K, 210, src, n, out);
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine
