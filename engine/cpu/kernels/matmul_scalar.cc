// Portable kernels: the reference path every machine runs, and the one the
// SIMD paths are checked against. One weight row at a time, converted to
// float (or int8) once per token tile.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"

namespace paceline::engine::cpu::internal {
namespace {

constexpr int kTokenTile = 8;   // tokens per pass over a weight row
constexpr int64_t kChunk = 256;  // float weights converted per step

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// w_row (cols, in `type`) elements [c0, c0 + n) -> out (n) float.
void ConvertChunk(GgmlType type, const uint8_t* w_row, int64_t c0, int64_t n,
                  float* out) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, w_row + 4 * c0, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = HalfToFloat(LoadU16(w_row + 2 * (c0 + i)));
      }
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = BFloat16ToFloat(LoadU16(w_row + 2 * (c0 + i)));
      }
      break;
    default:
      break;  // unreachable: matmul.cc routes only float types here
  }
}

void RowsFloat(const MatMulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t cols = task.cols;
  float wbuf[kChunk];  // (kChunk) one chunk of the row, as float
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = task.w + r * task.row_bytes;  // (cols) in type
    for (int64_t t0 = 0; t0 < task.n_tokens; t0 += kTokenTile) {
      const int nt =
          static_cast<int>(std::min<int64_t>(kTokenTile, task.n_tokens - t0));
      float acc[kTokenTile] = {};  // (nt) y[t0 + i, r]
      for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
        const int64_t n = std::min(kChunk, cols - c0);
        ConvertChunk(task.type, w_row, c0, n, wbuf);
        for (int i = 0; i < nt; ++i) {
          const float* x = task.x + (t0 + i) * cols + c0;  // (n)
          float s = acc[i];
          for (int64_t c = 0; c < n; ++c) s += wbuf[c] * x[c];
          acc[i] = s;
        }
      }
      for (int i = 0; i < nt; ++i) task.y[(t0 + i) * task.rows + r] = acc[i];
    }
  }
}

// One weight block -> its scale and 32 signed int8 values.
float DecodeBlock(GgmlType type, const uint8_t* block, int8_t* q) {
  const float d = HalfToFloat(LoadU16(block));
  if (type == GgmlType::kQ8_0) {
    std::memcpy(q, block + 2, kQBlock);
  } else {  // Q4_0: element j < 16 is the low nibble of qs[j], j + 16 the high
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>((block[2 + j] & 0x0F) - 8);
      q[j + 16] = static_cast<int8_t>((block[2 + j] >> 4) - 8);
    }
  }
  return d;
}

void RowsQuant(const MatMulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t cols = task.cols;
  const int64_t nb = cols / kQBlock;
  const int64_t block_bytes =
      task.type == GgmlType::kQ8_0 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
  int8_t wq[kQBlock];  // (32) one weight block, signed
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = task.w + r * task.row_bytes;  // (nb blocks)
    for (int64_t t0 = 0; t0 < task.n_tokens; t0 += kTokenTile) {
      const int nt =
          static_cast<int>(std::min<int64_t>(kTokenTile, task.n_tokens - t0));
      float acc[kTokenTile] = {};  // (nt) y[t0 + i, r]
      for (int64_t b = 0; b < nb; ++b) {
        const float dw = DecodeBlock(task.type, w_row + b * block_bytes, wq);
        for (int i = 0; i < nt; ++i) {
          const int8_t* q = task.qx.q + (t0 + i) * cols + b * kQBlock;  // (32)
          int32_t isum = 0;
          for (int j = 0; j < kQBlock; ++j) isum += wq[j] * q[j];
          const float s = dw * task.qx.d[(t0 + i) * nb + b];
          acc[i] += static_cast<float>(isum) * s;
        }
      }
      for (int i = 0; i < nt; ++i) task.y[(t0 + i) * task.rows + r] = acc[i];
    }
  }
}

}  // namespace

void MatMulRowsScalar(const MatMulTask& task, int64_t row_begin,
                      int64_t row_end) {
  if (task.type == GgmlType::kQ8_0 || task.type == GgmlType::kQ4_0) {
    RowsQuant(task, row_begin, row_end);
  } else {
    RowsFloat(task, row_begin, row_end);
  }
}

void QuantizeRowScalar(const float* x, int64_t cols, int8_t* q, float* d) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;  // (32)
    float amax = 0.0f;
    for (int j = 0; j < kQBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
    // As llama.cpp's Q8_0 (AVX path): the scale rounded to f16, 127 / max.
    const float scale = HalfToFloat(FloatToHalf(amax / 127.0f));
    const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    d[b] = scale;
    for (int j = 0; j < kQBlock; ++j) {
      // lrintf rounds to nearest even, as the SIMD conversions do.
      q[b * kQBlock + j] = static_cast<int8_t>(std::lrintf(xb[j] * inv));
    }
  }
}

}  // namespace paceline::engine::cpu::internal
