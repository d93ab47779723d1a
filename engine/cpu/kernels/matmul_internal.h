#ifndef PACELINE_ENGINE_CPU_KERNELS_MATMUL_INTERNAL_H_
#define PACELINE_ENGINE_CPU_KERNELS_MATMUL_INTERNAL_H_

// The per-ISA kernels behind MatMul (matmul.h). Not a public interface:
// matmul.cc validates the arguments, quantizes activations, splits rows
// over threads and picks one of these per call; the tests reach them only
// through MatMul and the ISA cap (cpu_features.h).
//
// Every kernel computes the same math:
//   float weights:  y[t, r] = sum_c float(w[r, c]) * x[t, c]
//   Q8_0 / Q4_0:    y[t, r] = sum_b (dw[r, b] * dx[t, b]) * isum(r, t, b)
// where isum is the exact int32 dot product of block b's 32 int8 weights
// (Q4_0: nibble - 8) with the 32 int8 activations, and dx/qx come from
// QuantizeRow*. ISA levels differ in the order of float additions (and FMA
// contraction), so scalar and SIMD results agree to float rounding.
//
// Batch invariance: within one ISA level, y[t, r] is bit for bit the same
// whatever n_tokens, the other tokens, the tiling or the thread split —
// every path of a level takes the same float operations per (token, row):
//   float (AVX-512 / AVX2): one accumulator vector per (token, row), lane i
//     summing columns i, i + 16 (8), ... in order by FMA, carried unreduced
//     across column blocks, then one fixed horizontal sum;
//   Q8_0 / Q4_0 with VNNI (tiles and packed GEMM alike): per block in
//     column order, acc = fma(float(isum), dw * dx, acc) from acc = 0;
//   Q8_0 / Q4_0 on AVX2: as float, per block fma(float(lane sums), dw * dx);
//   K-quants (every level): per super-block exact int32 sums, then one or
//     two scalar fmas in column order from acc = 0 (matmul_kquant.h), so
//     their results are also the same across levels.

#include <cstddef>
#include <cstdint>

#include "engine/cpu/kernels/matmul.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu::internal {

// Elements per int8 block: Q8_0, Q4_0 and the quantized activations.
inline constexpr int64_t kQBlock = GgmlBlockElems(GgmlType::kQ8_0);
// f16 d | int8 qs[32]
inline constexpr int64_t kQ8_0BlockBytes = GgmlBlockBytes(GgmlType::kQ8_0);
// f16 d | uint8 qs[16]
inline constexpr int64_t kQ4_0BlockBytes = GgmlBlockBytes(GgmlType::kQ4_0);
static_assert(GgmlBlockElems(GgmlType::kQ4_0) == kQBlock);

// Activations quantized per token and block of 32:
// x[t, c] ~= q[t, c] * d[t, c / 32], with d = max|x| / 127 over the block
// rounded to f16 and q = round-to-nearest-even(x * (127 / max|x|)) in
// [-127, 127] (0 where max|x| is 0): llama.cpp's Q8_0 rule (AVX path).
// For K-quant weights the blocks are 256-element super-blocks (Q8_K,
// matmul_kquant.h's QuantizeRowQ8K): d is then (n_tokens, cols / 256) and
// bsums holds the sums of q per 16 elements.
struct QuantizedActs {
  const int8_t* q = nullptr;  // (n_tokens, cols)
  const float* d = nullptr;   // (n_tokens, cols / 32); K-quants cols / 256
  const int16_t* bsums = nullptr;  // K-quants: (n_tokens, cols / 16)
  // Only for the AVX-512 VNNI kernels (BuildPairsAvx512), per token and
  // pair of blocks p = (2p, 2p + 1), n_pairs = ceil(cols / 64):
  const int32_t* s_pairs = nullptr;  // (n_tokens, n_pairs, 16) -sum(q) of
                                     // block 2p in lane 0, 2p + 1 in lane 8
};

// ---- The panel layout (WeightLayout::kPanels) of Q8_0 and Q4_0 weights ----
//
// Rows go in panels of 16 (the last one padded with zero rows), one panel
// after another. Within a panel, blocks go in pairs (2k, 2k + 1; an odd
// last block pairs with zeros), each pair 64-byte aligned:
//   [quads of block 2k] [quads of block 2k + 1]     2 x QuadBytes
//   [f16 scales of block 2k] [... of 2k + 1]         2 x 32 bytes
// Q8_0 quads: 8 vectors of 16 rows x 4 bytes; quad q, lane i holds columns
// 4q .. 4q + 3 of the block in row 16p + i as unsigned bytes w + 128
// (w ^ 0x80): the operand layout of the VNNI outer-product GEMM
// (matmul_avx512_gemm.cc). Q4_0 quads: 4 vectors of 16 rows x 4 bytes,
// vector q of lane i holding the block's qs[4q .. 4q + 3] as stored: low
// nibbles are columns 4q .. 4q + 3, high nibbles 16 + 4q .. 19 + 4q, each
// w + 8. The GEMM packs row-major weights into the same layout per call.
// The bytes are the row-major ones rearranged: per 16 rows and 64 columns
// 1088 (Q8_0) or 576 (Q4_0), as in the types themselves.
inline constexpr int64_t kPanelRows = 16;

// The int8 weight types (activations quantized per block of 32).
inline constexpr bool IsQuantized(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0;
}

// The K-quant weight types (matmul_kquant.h; activations as Q8_K).
inline constexpr bool IsKQuant(GgmlType type) {
  return type == GgmlType::kQ2_K || type == GgmlType::kQ3_K ||
         type == GgmlType::kQ4_K || type == GgmlType::kQ5_K ||
         type == GgmlType::kQ6_K;
}

inline constexpr int64_t PanelQuadBytes(GgmlType type) {
  return type == GgmlType::kQ8_0 ? 8 * 64 : 4 * 64;  // one block, 16 rows
}
inline constexpr int64_t PanelPairBytes(GgmlType type) {
  return 2 * PanelQuadBytes(type) + 64;
}

// Bytes from a panel's first byte (or from any even block's pair) to
// block b's quads and to its 16 f16 scales.
inline constexpr int64_t PanelQuadsAt(GgmlType type, int64_t b) {
  return b / 2 * PanelPairBytes(type) + b % 2 * PanelQuadBytes(type);
}
inline constexpr int64_t PanelScalesAt(GgmlType type, int64_t b) {
  return b / 2 * PanelPairBytes(type) + 2 * PanelQuadBytes(type) + b % 2 * 32;
}

inline int64_t PanelCount(int64_t rows) {
  return (rows + kPanelRows - 1) / kPanelRows;
}

// ---- The panel layout of float weights (F32, F16, BF16) ----
//
// Rows in panels of 16 as above (cols a multiple of 16), each panel
// `cols * 16` weights in the matrix's type, split into column blocks of
// kFloatPanelCols (the last one shorter). In a block of n columns from k0,
// row 16p + r, column k0 + 16j + i sits at element (i * n / 16 + j) * 16
// + r: per lane group i (column mod 16, the float tiles' accumulator lane)
// one run over the block, 16 rows per vector. The float GEMM
// (matmul_avx512_gemm.cc) reads it in place, and gathers row-major
// weights into it (in f32) per call.
inline constexpr int64_t kFloatPanelCols = 2048;

// ---- The panel layout of K-quant weights (Q4_K, Q6_K) ----
//
// Rows in panels of 16 as above, each panel one super-block (256 columns)
// after another. A super-block of the 16 rows is its bytes cut into 4-byte
// quads: quad q (block bytes 4q .. 4q + 3, q < bytes / 4) of row 16p + i in
// lane i of vector q, then Q6_K's last 2 bytes (its f16 d) of row 16p + i
// at 2i of one more vector, zero-padded. So one vector load gives 16 rows'
// next 8 nibbles (Q4_K) or 6-bit scales (Q4_K's 12 bytes are 3 vectors),
// and a panel is one sequential stream: 2304 bytes per super-block for
// Q4_K (16 x 144, the file's bytes) and 3392 for Q6_K (16 x 210 + 32).
inline constexpr bool HasKPanels(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ6_K;
}
inline constexpr int64_t KPanelQuads(GgmlType type) {
  return type == GgmlType::kQ4_K ? 36 : 52;  // 144 / 4, 208 / 4
}
inline constexpr int64_t KPanelBlockBytes(GgmlType type) {
  return 64 * KPanelQuads(type) + (type == GgmlType::kQ6_K ? 64 : 0);
}

// Bytes of one panel (16 rows) of `type` with `cols` columns.
int64_t PanelBytes(GgmlType type, int64_t cols);

// Rows [r0, r0 + nr) of a panel-layout matrix back to row-major: out (nr,
// row bytes of `type`) (matmul_panels.cc; portable).
void UnpackPanelRows(GgmlType type, const uint8_t* panels, int64_t cols,
                     int64_t r0, int64_t nr, uint8_t* out);

struct MatMulTask {
  GgmlType type = GgmlType::kF32;
  WeightLayout layout = WeightLayout::kRows;
  // kRows: (rows, row_bytes) weights in `type`; kPanels: the panels.
  const uint8_t* w = nullptr;
  size_t row_bytes = 0;
  int64_t rows = 0;
  int64_t cols = 0;  // float types: any; Q types: 32 | cols; K: 256 | cols
  int64_t n_tokens = 0;
  const float* x = nullptr;  // (n_tokens, cols), float weight types
  QuantizedActs qx;          // Q8_0 / Q4_0 / K-quant weight types
  float* y = nullptr;        // (n_tokens, rows)
};

// ---- Register tiles and the cache-blocking loop shared by the SIMD paths.
//
// A tile kernel computes an (nr rows) x (nt tokens) block of dot products
// over the columns [k0, k1), keeping all nr * nt sums in registers, so each
// weight vector it loads serves nt tokens and each activation vector nr
// rows. RunTiled walks the tiles: when the step has more tokens than one
// tile holds, it splits the columns into blocks of `kc` and the rows into
// blocks of `mc` so that a block of weights stays in L1/L2 while every
// token tile passes over it (weights then come from memory once per call).

struct TileArgs {
  const uint8_t* w = nullptr;  // (nr, row_bytes) the tile's first weight row
  size_t row_bytes = 0;
  const void* x = nullptr;    // (nt, x_stride) first token: float for float
                              // weights, int8 (Q paths; maybe ^0x80) else
  int64_t x_stride = 0;       // elements between tokens (= cols)
  const float* xd = nullptr;  // Q paths: (nt, xd_stride) block scales
  int64_t xd_stride = 0;      // = cols / 32 (K-quants: cols / 256)
  const int16_t* xs16 = nullptr;  // K-quants: (nt, xs16_stride) bsums
  int64_t xs16_stride = 0;        // = cols / 16
  const int32_t* xs_pairs = nullptr;  // VNNI: (nt, pair_stride) s_pairs
  int64_t pair_stride = 0;            // = n_pairs * 16
  int64_t k0 = 0, k1 = 0;             // columns; Q paths: multiples of 32
  float* y = nullptr;                 // y[token 0, row 0] of the tile
  int64_t y_stride = 0;               // floats between tokens (= rows)
  // Column blocks after the first resume, and all but the last save, the
  // tile's register accumulators unreduced, so a dot product adds its
  // products in the same order whatever the blocking (batch invariance):
  //   carry: (nr, carry_stride) tile row i's token t at [i * carry_stride
  //   + t * kCarryFloats], kCarryFloats floats each.
  float* carry = nullptr;
  int64_t carry_stride = 0;
  bool load_carry = false;   // start from carry (k0 > 0) instead of zero
  bool store_carry = false;  // end in carry (k1 < cols) instead of y
  // The next row tile's weights at the same columns, for the tile to
  // prefetch into L2 while it streams its own (first token tile of a batch
  // only; null otherwise). Single-token tiles prefetch along their own rows.
  const uint8_t* prefetch = nullptr;
};

using TileFn = void (*)(const TileArgs& args);

// Floats per accumulator in TileArgs::carry: one zmm.
inline constexpr int64_t kCarryFloats = 16;

// Software prefetch shared by the SIMD tiles. Decode tiles stream weight
// rows from DRAM as 4-8 concurrent streams that advance slowly; the
// hardware prefetchers alone do not stay far enough ahead once the kernel
// does real work per byte (measured with the AVX-512 path: F16 GEMV 0.85 ->
// 0.94 of the read bandwidth, Q8_0 0.68 -> 0.80). Single-token tiles (T <= 2)
// fetch kPrefetchBytes ahead along their own rows into L1; the first token tile
// of a batch, whose column blocks are short (kc), fetches the next row tile
// into L2 instead. `offset` is the byte offset of the current column within the
// row.
inline constexpr int64_t kPrefetchBytes = 1024;

template <int T>
inline void Prefetch(const TileArgs& a, int r, int64_t offset) {
  if (a.prefetch != nullptr) {
    __builtin_prefetch(a.prefetch + r * a.row_bytes + offset, 0, 2);
  } else if constexpr (T <= 2) {
    __builtin_prefetch(a.w + r * a.row_bytes + offset + kPrefetchBytes, 0, 3);
  }
}

inline constexpr int kMaxTileRows = 8;
inline constexpr int kMaxTileTokens = 8;

struct TileSet {
  int rows = 1;      // rows per tile when nt > 1
  int rows_one = 1;  // rows per tile when nt == 1 (GEMV)
  int tokens = 1;    // tokens per tile
  int64_t kc = 0;    // column block (multiple of 64) when tokens > 1 tile
  int64_t mc = 64;   // row block
  // fn[nr - 1][nt - 1] handles nr rows x nt tokens.
  TileFn fn[kMaxTileRows][kMaxTileTokens] = {};
};

// Computes rows [row_begin, row_end) of task.y with `set`'s tiles. The Q
// paths pass the quantized activations in task.qx.
void RunTiled(const MatMulTask& task, int64_t row_begin, int64_t row_end,
              const TileSet& set);

// Writes y[t, r] for r in [row_begin, row_end) and every token t.
using RowsKernel = void (*)(const MatMulTask& task, int64_t row_begin,
                            int64_t row_end);

// Quantizes one token: x (cols) -> q (cols), d (cols / 32); cols is a
// multiple of 32. Every implementation produces identical bytes.
using QuantizeKernel = void (*)(const float* x, int64_t cols, int8_t* q,
                                float* d);

// Portable C++ (matmul_scalar.cc): every supported type.
void MatMulRowsScalar(const MatMulTask& task, int64_t row_begin,
                      int64_t row_end);
void QuantizeRowScalar(const float* x, int64_t cols, int8_t* q, float* d);

#if defined(__x86_64__)
// AVX2 + FMA + F16C (matmul_avx2.cc): every supported type.
void MatMulRowsAvx2(const MatMulTask& task, int64_t row_begin, int64_t row_end);
void QuantizeRowAvx2(const float* x, int64_t cols, int8_t* q, float* d);

// AVX-512 F/BW/VL/DQ (matmul_avx512.cc): float types. From
// kConvertMinTokens tokens F16 / BF16 rows are widened to f32 once per call.
void MatMulRowsAvx512(const MatMulTask& task, int64_t row_begin,
                      int64_t row_end);
void QuantizeRowAvx512(const float* x, int64_t cols, int8_t* q, float* d);
// One token's s_pairs (n_pairs, 16) from its q (cols); see QuantizedActs.
void BuildPairsAvx512(const int8_t* q, int64_t cols, int32_t* s_pairs);
// AVX-512 VNNI (matmul_avx512.cc): Q8_0 and Q4_0; needs the pair arrays.
void MatMulRowsAvx512Vnni(const MatMulTask& task, int64_t row_begin,
                          int64_t row_end);

// Float GEMM (matmul_avx512_gemm.cc) that MatMulRowsAvx512 hands
// panel-layout weights to, and row-major ones from kFloatGemmMinTokens
// tokens when cols is a multiple of 16: lane panels (column mod 16),
// outer-product FMA chains that take each (token, row) through the tiles'
// exact float operations. Gathering row-major weights into panels costs ~1
// gather per 16 weights per call, which fewer tokens do not repay:
// measured single-threaded (shared, noisy 2-core VM), at 12 tokens the
// GEMM is slower on 2048 x 768 (F32 1.5x), even at 32 mixed, faster from
// 64 (4096 x 4096 F16 0.75x).
void FloatGemmRowsAvx512(const MatMulTask& task, int64_t row_begin,
                         int64_t row_end);
inline constexpr int64_t kFloatGemmMinTokens = 48;

// Packed int8 GEMM (matmul_avx512_gemm.cc) that the VNNI entry point hands
// panel-layout weights to, and row-major ones for many tokens (packing
// them per call): 16 rows to a register, outer-product tiles. Crossover
// for row-major weights measured on a Sapphire Rapids-class VM
// with cache-resident weights (bench/RESULTS.md): from 6 tokens (83 vs 55
// GMAC/s per core at 8).
void GemmRowsAvx512Vnni(const MatMulTask& task, int64_t row_begin,
                        int64_t row_end);
inline constexpr int64_t kGemmMinTokens = 6;
// The packing gathers address 16 rows with int32 offsets.
inline constexpr size_t kGemmMaxRowBytes = size_t{1} << 26;
#endif

}  // namespace paceline::engine::cpu::internal

#endif  // PACELINE_ENGINE_CPU_KERNELS_MATMUL_INTERNAL_H_
