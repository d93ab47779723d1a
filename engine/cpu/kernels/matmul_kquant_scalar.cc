// K-quant super-block decoding, the Q8_K activation quantizer, and the
// portable K-quant kernel: one weight row at a time, each super-block
// decoded once per tile of kTokenTile tokens.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_kquant.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu::internal {
namespace {

constexpr int kTokenTile = 8;  // tokens per pass over a weight row

// Q3_K's 6-bit scale j (12 bytes): low 4 bits in nibble j / 8 of byte
// j % 8, top 2 bits at bits 2 * (j / 4) of byte 8 + j % 4.
int Q3Scale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  return (low | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}

template <GgmlType WT>
void RowsKQuant(const MatMulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t cols = task.cols;
  const int64_t nb = cols / kKBlock;
  const int64_t bb = GgmlBlockBytes(WT);
  uint8_t u[kKBlock];  // one super-block's unsigned weights
  KScales s;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = task.w + r * task.row_bytes;  // (nb super-blocks)
    for (int64_t t0 = 0; t0 < task.n_tokens; t0 += kTokenTile) {
      const int nt =
          static_cast<int>(std::min<int64_t>(kTokenTile, task.n_tokens - t0));
      float acc[kTokenTile] = {};  // (nt) y[t0 + i, r]
      for (int64_t b = 0; b < nb; ++b) {
        DecodeKScales(WT, w_row + b * bb, &s);
        DecodeKWeights(WT, w_row + b * bb, u);
        for (int i = 0; i < nt; ++i) {
          const int64_t t = t0 + i;
          const int8_t* q = task.qx.q + t * cols + b * kKBlock;   // (256)
          const int16_t* bs = task.qx.bsums + (t * nb + b) * 16;  // (16)
          int32_t a = 0, m = 0;
          for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int l = 0; l < 16; ++l) dot += u[16 * g + l] * q[16 * g + l];
            a += s.sc[g] * dot;
            m += s.mn[g] * bs[g];
          }
          const float dx = task.qx.d[t * nb + b];
          if constexpr (KHasMin(WT)) {
            acc[i] = std::fma(static_cast<float>(a), s.d * dx, acc[i]);
            acc[i] = std::fma(static_cast<float>(m), s.dmin * dx, acc[i]);
          } else {
            acc[i] = std::fma(static_cast<float>(a + m), s.d * dx, acc[i]);
          }
        }
      }
      for (int i = 0; i < nt; ++i) task.y[(t0 + i) * task.rows + r] = acc[i];
    }
  }
}

}  // namespace

void DecodeKScales(GgmlType type, const uint8_t* b, KScales* s) {
  s->dmin = 0.0f;
  switch (type) {
    case GgmlType::kQ2_K:  // scales[16] | qs[64] | d | dmin
      s->d = KHalf(b + 80);
      s->dmin = -KHalf(b + 82);
      for (int g = 0; g < 16; ++g) {
        s->sc[g] = b[g] & 0xF;
        s->mn[g] = b[g] >> 4;
      }
      break;
    case GgmlType::kQ3_K:  // hmask[32] | qs[64] | scales[12] | d
      s->d = KHalf(b + 108);
      for (int g = 0; g < 16; ++g) {
        s->sc[g] = static_cast<int16_t>(Q3Scale(b + 96, g));
        s->mn[g] = static_cast<int16_t>(-4 * s->sc[g]);
      }
      break;
    case GgmlType::kQ4_K:  // d | dmin | scales[12] | (Q5_K: qh[32]) | qs
    case GgmlType::kQ5_K:
      s->d = KHalf(b);
      s->dmin = -KHalf(b + 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        K4ScaleMin(b + 4, j, &sc, &m);
        s->sc[2 * j] = s->sc[2 * j + 1] = static_cast<int16_t>(sc);
        s->mn[2 * j] = s->mn[2 * j + 1] = static_cast<int16_t>(m);
      }
      break;
    default:  // Q6_K: ql[128] | qh[64] | int8 scales[16] | d
      s->d = KHalf(b + 208);
      for (int g = 0; g < 16; ++g) {
        s->sc[g] = static_cast<int8_t>(b[192 + g]);
        s->mn[g] = static_cast<int16_t>(-32 * s->sc[g]);
      }
      break;
  }
}

void DecodeKWeights(GgmlType type, const uint8_t* b, uint8_t* u) {
  for (int e = 0; e < kKBlock; ++e) {
    const int h = e / 128, k = e % 128 / 32, l = e % 32, j = e / 32;
    switch (type) {
      case GgmlType::kQ2_K:
        u[e] = (b[16 + 32 * h + l] >> (2 * k)) & 3;
        break;
      case GgmlType::kQ3_K:
        u[e] = ((b[32 + 32 * h + l] >> (2 * k)) & 3) | ((b[l] >> j) & 1) << 2;
        break;
      case GgmlType::kQ4_K:
        u[e] = (b[16 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        break;
      case GgmlType::kQ5_K:
        u[e] = ((b[48 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) |
               ((b[16 + l] >> j) & 1) << 4;
        break;
      default:  // Q6_K
        u[e] = ((b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF) |
               ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
        break;
    }
  }
}

void QuantizeRowQ8K(const float* x, int64_t cols, int8_t* q, float* d,
                    int16_t* bsums) {
  for (int64_t b = 0; b < cols / kKBlock; ++b) {
    const float* xb = x + b * kKBlock;  // (256)
    int8_t* qb = q + b * kKBlock;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kKBlock; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qb, 0, kKBlock);
      std::memset(bsums + 16 * b, 0, 16 * sizeof(int16_t));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kKBlock; ++j) {
      // lrintf rounds half to even, as ggml's nearest_int does.
      const long v = std::lrintf(iscale * xb[j]);
      qb[j] = static_cast<int8_t>(std::min<long>(127, v));
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += qb[16 * g + l];
      bsums[16 * b + g] = static_cast<int16_t>(sum);
    }
    d[b] = 1.0f / iscale;
  }
}

void MatMulRowsKQuantScalar(const MatMulTask& task, int64_t row_begin,
                            int64_t row_end) {
  switch (task.type) {
    case GgmlType::kQ2_K:
      return RowsKQuant<GgmlType::kQ2_K>(task, row_begin, row_end);
    case GgmlType::kQ3_K:
      return RowsKQuant<GgmlType::kQ3_K>(task, row_begin, row_end);
    case GgmlType::kQ4_K:
      return RowsKQuant<GgmlType::kQ4_K>(task, row_begin, row_end);
    case GgmlType::kQ5_K:
      return RowsKQuant<GgmlType::kQ5_K>(task, row_begin, row_end);
    default:
      return RowsKQuant<GgmlType::kQ6_K>(task, row_begin, row_end);
  }
}

}  // namespace paceline::engine::cpu::internal
