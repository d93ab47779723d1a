// Portable MXFP4 kernel: the reference the SIMD levels are checked against.
// One weight row at a time, each block decoded to int8 once per token tile.

#include <algorithm>
#include <cstdint>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_mxfp4.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu::internal {
namespace {

constexpr int kTokenTile = 8;  // tokens per pass over a weight row

// One block -> its 32 doubled levels (int8, element order); returns the
// halved scale.
float DecodeMxfp4Block(const uint8_t* block, int8_t* w) {
  for (int j = 0; j < 16; ++j) {
    w[j] = kMxfp4Levels[block[1 + j] & 0x0F];
    w[j + 16] = kMxfp4Levels[block[1 + j] >> 4];
  }
  return kE8M0Half[block[0]];
}

}  // namespace

void MatMulRowsMxfp4Scalar(const MatMulTask& task, int64_t row_begin,
                           int64_t row_end) {
  const int64_t cols = task.cols;
  const int64_t nb = cols / kQBlock;
  int8_t wq[kQBlock];  // (32) one weight block's levels
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = task.w + r * task.row_bytes;  // (nb blocks)
    for (int64_t t0 = 0; t0 < task.n_tokens; t0 += kTokenTile) {
      const int nt =
          static_cast<int>(std::min<int64_t>(kTokenTile, task.n_tokens - t0));
      float acc[kTokenTile] = {};  // (nt) y[t0 + i, r]
      for (int64_t b = 0; b < nb; ++b) {
        const float dw = DecodeMxfp4Block(w_row + b * kMxfp4BlockBytes, wq);
        for (int i = 0; i < nt; ++i) {
          const int8_t* q = task.qx.q + (t0 + i) * cols + b * kQBlock;  // (32)
          int32_t isum = 0;
          for (int j = 0; j < kQBlock; ++j) isum += wq[j] * q[j];
          acc[i] +=
              static_cast<float>(isum) * (dw * task.qx.d[(t0 + i) * nb + b]);
        }
      }
      for (int i = 0; i < nt; ++i) task.y[(t0 + i) * task.rows + r] = acc[i];
    }
  }
}

}  // namespace paceline::engine::cpu::internal
