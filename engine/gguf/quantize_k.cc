#include "engine/gguf/quantize_k.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"

// Simple, deterministic K-quant encoders: every scale comes from the range
// of its group, is quantized to its field against the stored (f16) super-
// block scale, and each element is then rounded against the scales the
// decoder will use, so DequantizeRow() reproduces exactly the values chosen
// here. No iterative search for better scales, which llama.cpp's own
// quantizers do (a little less error on the same bits).

namespace paceline::engine::internal {
namespace {

constexpr float kHalfMax = 65504.0f;  // the largest finite f16
// Inputs are capped here so that every sum and quotient below stays finite;
// no K-quant grid reaches this far anyway (their scales are f16).
constexpr float kInputLimit = 1e30f;

using Block = std::array<float, kQK>;

// The block with NaN read as 0 and magnitudes capped at kInputLimit.
Block Sanitized(const float* x) {
  Block v;
  for (int64_t i = 0; i < kQK; ++i) {
    v[i] =
        std::isnan(x[i]) ? 0.0f : std::clamp(x[i], -kInputLimit, kInputLimit);
  }
  return v;
}

// Stores `v` as f16 at p (saturating at the largest finite half) and returns
// the value stored, which is what the decoder will multiply by.
float StoreHalf(uint8_t* p, float v) {
  const uint16_t h = FloatToHalf(std::clamp(v, -kHalfMax, kHalfMax));
  std::memcpy(p, &h, sizeof(h));
  return HalfToFloat(h);
}

// round(x / step) within [lo, hi] (halves away from zero); 0 when step is 0.
// x and step are finite.
int Level(float x, float step, int lo, int hi) {
  if (step == 0) return 0;
  const float q =
      std::clamp(x / step, static_cast<float>(lo), static_cast<float>(hi));
  return static_cast<int>(std::round(q));
}

// The group fields of the types with a minimum (Q2_K, Q4_K, Q5_K):
// x ~ (d * sc[g]) * q - (dmin * m[g]), q in [0, qmax], sc and m in
// [0, fmax]. Group g's range [min(0, lo_g), hi_g] is split into qmax steps;
// the offset is never negative because the decoder subtracts it.
struct AsymFields {
  float d = 0;     // as stored
  float dmin = 0;  // as stored
  int sc[16] = {};
  int m[16] = {};
};

AsymFields ChooseAsym(const Block& v, int groups, int qmax, int fmax,
                      uint8_t* d_at, uint8_t* dmin_at) {
  const int len = static_cast<int>(kQK) / groups;
  float step[16], offset[16];
  float max_step = 0, max_offset = 0;
  for (int g = 0; g < groups; ++g) {
    float lo = 0, hi = v[g * len];
    for (int i = g * len; i < (g + 1) * len; ++i) {
      lo = std::min(lo, v[i]);
      hi = std::max(hi, v[i]);
    }
    step[g] = (hi - lo) / static_cast<float>(qmax);
    offset[g] = -lo;
    max_step = std::max(max_step, step[g]);
    max_offset = std::max(max_offset, offset[g]);
  }
  AsymFields f;
  f.d = StoreHalf(d_at, max_step / static_cast<float>(fmax));
  f.dmin = StoreHalf(dmin_at, max_offset / static_cast<float>(fmax));
  for (int g = 0; g < groups; ++g) {
    f.sc[g] = Level(step[g], f.d, 0, fmax);
    f.m[g] = Level(offset[g], f.dmin, 0, fmax);
  }
  return f;
}

// The level of x in group g of an asymmetric block, in [0, qmax].
int AsymLevel(const AsymFields& f, int g, float x, int qmax) {
  const float dl = f.d * static_cast<float>(f.sc[g]);
  const float ml = f.dmin * static_cast<float>(f.m[g]);
  return Level(x + ml, dl, 0, qmax);
}

// The 16-element group scales of the symmetric types (Q3_K, Q6_K):
// x ~ (d * field[g]) * q, q in [-qneg, qneg - 1]. The element of largest
// magnitude, m, sets s_g = m / -qneg so that it is level -qneg exactly (the
// full range of levels is used, as in Q4_0); d = max|s_g| / fmax > 0 and
// field[g] = round(s_g / d) in [-fmax, fmax]. Returns d as stored.
float ChooseSym(const Block& v, int qneg, int fmax, uint8_t* d_at, int* field) {
  float s[16];
  float max_abs = 0;
  for (int g = 0; g < 16; ++g) {
    float m = 0;
    for (int i = 16 * g; i < 16 * g + 16; ++i) {
      if (std::fabs(v[i]) > std::fabs(m)) m = v[i];
    }
    s[g] = m / static_cast<float>(-qneg);
    max_abs = std::max(max_abs, std::fabs(s[g]));
  }
  const float d = StoreHalf(d_at, max_abs / static_cast<float>(fmax));
  for (int g = 0; g < 16; ++g) field[g] = Level(s[g], d, -fmax, fmax);
  return d;
}

// Q4_K / Q5_K's 12 scale bytes (the inverse of ggml_type.cc's K4ScaleMin):
// sub-blocks 0-3 keep 6 bits in bytes 0-3 (scales) and 4-7 (mins); 4-7 keep
// their low nibbles in bytes 8-11 and their top 2 bits in the top bits of
// bytes 0-3 (scales) and 4-7 (mins).
void PackScalesK4(const AsymFields& f, uint8_t* s) {
  for (int i = 0; i < 4; ++i) {
    s[i] = static_cast<uint8_t>(f.sc[i] | (f.sc[i + 4] >> 4) << 6);
    s[i + 4] = static_cast<uint8_t>(f.m[i] | (f.m[i + 4] >> 4) << 6);
    s[i + 8] =
        static_cast<uint8_t>((f.sc[i + 4] & 0xF) | (f.m[i + 4] & 0xF) << 4);
  }
}

}  // namespace

// 84 bytes: scales[16] | qs[64] | d | dmin. Element e's 2 bits go to bits
// 2 * (e % 128 / 32) of qs[32 * (e / 128) + e % 32].
void QuantizeBlockQ2_K(const float* x, uint8_t* out) {
  const Block v = Sanitized(x);
  std::memset(out, 0, 84);
  const AsymFields f = ChooseAsym(v, 16, 3, 15, out + 80, out + 82);
  for (int g = 0; g < 16; ++g) {
    out[g] = static_cast<uint8_t>(f.sc[g] | f.m[g] << 4);
  }
  uint8_t* qs = out + 16;
  for (int e = 0; e < kQK; ++e) {
    const int q = AsymLevel(f, e / 16, v[e], 3);
    qs[32 * (e / 128) + e % 32] |=
        static_cast<uint8_t>(q << (2 * (e % 128 / 32)));
  }
}

// 110 bytes: hmask[32] | qs[64] | scales[12] | d. Level q in [-4, 3] is
// stored as u = q + 4: its low 2 bits placed as in Q2_K, its bit 2 as bit
// e / 32 of hmask[e % 32]. The 6-bit scale fields hold field + 32.
void QuantizeBlockQ3_K(const float* x, uint8_t* out) {
  const Block v = Sanitized(x);
  std::memset(out, 0, 110);
  int field[16];
  const float d = ChooseSym(v, 4, 31, out + 108, field);
  uint8_t* hmask = out;
  uint8_t* qs = out + 32;
  for (int e = 0; e < kQK; ++e) {
    const float dl = d * static_cast<float>(field[e / 16]);
    const int u = Level(v[e], dl, -4, 3) + 4;
    qs[32 * (e / 128) + e % 32] |=
        static_cast<uint8_t>((u & 3) << (2 * (e % 128 / 32)));
    if (u & 4) hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
  }
  // Scale j: low nibble in byte j % 8 (low half for j < 8, high for j >= 8),
  // top 2 bits at bits 2 * (j / 4) of byte 8 + j % 4.
  uint8_t* scales = out + 96;
  for (int j = 0; j < 16; ++j) {
    const int f6 = field[j] + 32;
    scales[j % 8] |= static_cast<uint8_t>((f6 & 0xF) << (j < 8 ? 0 : 4));
    scales[8 + j % 4] |= static_cast<uint8_t>((f6 >> 4) << (2 * (j / 4)));
  }
}

// 144 bytes: d | dmin | scales[12] | qs[128]. Sub-block j is nibble j % 2 of
// qs[32 * (j / 2) ...].
void QuantizeBlockQ4_K(const float* x, uint8_t* out) {
  const Block v = Sanitized(x);
  std::memset(out, 0, 144);
  const AsymFields f = ChooseAsym(v, 8, 15, 63, out, out + 2);
  PackScalesK4(f, out + 4);
  uint8_t* qs = out + 16;
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) {
      const int q = AsymLevel(f, j, v[32 * j + l], 15);
      qs[32 * (j / 2) + l] |= static_cast<uint8_t>(q << (4 * (j % 2)));
    }
  }
}

// 176 bytes: d | dmin | scales[12] | qh[32] | qs[128]. Low nibbles as in
// Q4_K; bit 4 of element 32j + l is bit j of qh[l].
void QuantizeBlockQ5_K(const float* x, uint8_t* out) {
  const Block v = Sanitized(x);
  std::memset(out, 0, 176);
  const AsymFields f = ChooseAsym(v, 8, 31, 63, out, out + 2);
  PackScalesK4(f, out + 4);
  uint8_t* qh = out + 16;
  uint8_t* qs = out + 48;
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) {
      const int q = AsymLevel(f, j, v[32 * j + l], 31);
      qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q & 0xF) << (4 * (j % 2)));
      qh[l] |= static_cast<uint8_t>((q >> 4) << j);
    }
  }
}

// 210 bytes: ql[128] | qh[64] | int8 scales[16] | d. Level q in [-32, 31]
// is stored as u = q + 32; for e = 128h + 32k + l its low nibble is nibble
// k / 2 of ql[64h + 32(k % 2) + l], its top 2 bits bits 2k of qh[32h + l].
void QuantizeBlockQ6_K(const float* x, uint8_t* out) {
  const Block v = Sanitized(x);
  std::memset(out, 0, 210);
  int field[16];
  const float d = ChooseSym(v, 32, 127, out + 208, field);
  uint8_t* ql = out;
  uint8_t* qh = out + 128;
  for (int e = 0; e < kQK; ++e) {
    const int h = e / 128, k = e % 128 / 32, l = e % 32;
    const float dl = d * static_cast<float>(field[e / 16]);
    const int u = Level(v[e], dl, -32, 31) + 32;
    ql[64 * h + 32 * (k % 2) + l] |=
        static_cast<uint8_t>((u & 0xF) << (4 * (k / 2)));
    qh[32 * h + l] |= static_cast<uint8_t>((u >> 4) << (2 * k));
  }
  for (int g = 0; g < 16; ++g) {
    out[192 + g] = static_cast<uint8_t>(static_cast<int8_t>(field[g]));
  }
}

}  // namespace paceline::engine::internal
