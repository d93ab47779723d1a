// AVX-512 GEMMs over weights in panels (matmul_internal.h): every token
// count for matrices packed at load, many tokens (prefill, large batches)
// for row-major ones, which they pack per call. Each takes every (token,
// row) through the same float operations as the dot-product tiles of
// matmul_avx512.cc (matmul_internal.h), so a token's result does not
// depend on what shares its batch, nor on how its weights are laid out.
//
// Float weights: lane panels, outer-product FMA chains (below).
// Int8 weights (VNNI): repacked so that one zmm holds 4 consecutive
// columns of 16 rows, and the micro-kernel is an outer product — each
// vpdpbusd multiplies 16 rows by one token's 4 activations (broadcast), 64
// multiply-adds per instruction with no horizontal sums. The dot-product
// tiles spend ~3 instructions of per-block scaling on every 64
// multiply-adds; here the scaling is per 32 columns x 16 rows.
//
// Same math as every other path (matmul_internal.h): exact int32 block
// sums, then y += (dw * dx) * isum in f32. Compiled for the baseline ISA
// with a `#pragma GCC target` region; internal linkage except the entry.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
// See matmul_avx512.cc (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

// ---- Float weights: lane panels, one FMA chain per tile lane ----
//
// The float tiles of matmul_avx512.cc give each (token, row) one
// accumulator vector whose lane i sums columns i, i + 16, ... by FMA, then
// reduce the 16 lanes with Reduce4's add tree (matmul_internal.h). This
// GEMM takes the same float operations in another loop order: the weights
// sit in lane panels (matmul_internal.h: 16 rows, column blocks, lane
// group = column mod 16), and an outer-product kernel runs each lane
// group's chain for 16 rows at once (one zmm per token and panel), keeping
// the 16 lane sums per (token, row) in memory between lane groups and
// column blocks. The final tree then adds lane vectors to lane vectors,
// and its result is y[t, 16 rows] as stored.
//
// Matrices packed at load (WeightLayout::kPanels) are read in place, F16 /
// BF16 widened as they load; the first token tile streams each block from
// memory, or, with several token tiles, the next block is fetched into L2
// across the current block's tiles. Row-major matrices are gathered into
// f32 lane panels per call, which pays from kFloatGemmMinTokens.

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

namespace paceline::engine::cpu::internal {
namespace {

constexpr int kFPanels = 4;         // 4 panels x 6 tokens = 24 accumulators:
constexpr int kFGemmTokens = 6;     // 10 loads per 24 FMAs
constexpr int64_t kFLanes = 16;     // the tiles' accumulator lanes
constexpr int64_t kFGemmMc = kFPanels * kPanelRows;  // rows per row block
constexpr int64_t kFSumsPerToken = kFLanes * kFGemmMc;

constexpr int64_t kFPackPrefetchBytes = 512;
constexpr int64_t kFStreamPrefetch = 2048;
constexpr int64_t kFetchNextMinTiles = 3;

template <GgmlType WT>
constexpr int64_t kFElemBytes = WT == GgmlType::kF32 ? 4 : 2;

// 16 weights (16 rows of one column) as f32.
template <GgmlType WT>
inline __m512 LoadLane16(const uint8_t* p) {
  if constexpr (WT == GgmlType::kF32) {
    return _mm512_loadu_ps(p);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (WT == GgmlType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Gathers row-major rows [r0, r0 + nr) x columns [k0, k0 + n), n a
// multiple of 16, into f32 lane panels: panel p at out + p * 16 * n, laid
// out (16 lanes, n / 16, 16 rows); rows past nr are left unset. A gather
// reads one column of a panel's 16 rows (two, in 32-bit lanes, for 16-bit
// types); F16 / BF16 widen exactly as the tiles' loads do.
template <GgmlType WT>
void GatherFloatPanels(const uint8_t* w, size_t row_bytes, int64_t r0,
                       int64_t nr, int64_t k0, int64_t n, float* out) {
  constexpr int64_t eb = kFElemBytes<WT>;
  const int64_t nj = n / kFLanes;
  const int64_t panels = (nr + kPanelRows - 1) / kPanelRows;
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                          11, 12, 13, 14, 15);
  // Row offsets fit int32: the caller keeps row_bytes <= kGemmMaxRowBytes.
  const __m512i offsets =
      _mm512_mullo_epi32(lanes, _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = out + p * kPanelRows * n;  // (16, nj, 16)
    const int64_t rows = std::min<int64_t>(kPanelRows, nr - p * kPanelRows);
    const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
    const uint8_t* base = w + (r0 + p * kPanelRows) * row_bytes + k0 * eb;
    // 16 rows are 16 streams, more than the hardware prefetchers follow.
    auto prefetch = [&](int64_t col) {
      for (int64_t i = 0; i < rows; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(base) + i * row_bytes +
                         col * eb + kFPackPrefetchBytes,
                     _MM_HINT_T0);
      }
    };
    auto dst = [&](int64_t k) {  // column k's 16 rows
      return panel + ((k % kFLanes) * nj + k / kFLanes) * kPanelRows;
    };
    if constexpr (WT == GgmlType::kF32) {
      for (int64_t k = 0; k < n; ++k) {
        if (k % 16 == 0) prefetch(k);
        _mm512_storeu_ps(dst(k), _mm512_mask_i32gather_ps(
                                     _mm512_setzero_ps(), valid, offsets,
                                     base + 4 * k, 1));
      }
    } else {
      for (int64_t k = 0; k < n; k += 2) {
        if (k % 32 == 0) prefetch(k);
        const __m512i pair = _mm512_mask_i32gather_epi32(
            _mm512_setzero_si512(), valid, offsets, base + 2 * k, 1);
        __m512 lo, hi;
        if constexpr (WT == GgmlType::kF16) {
          lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pair));
          hi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pair, 16)));
        } else {
          lo = _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
          hi = _mm512_castsi512_ps(_mm512_and_si512(
              pair, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
        }
        _mm512_storeu_ps(dst(k), lo);
        _mm512_storeu_ps(dst(k + 1), hi);
      }
    }
  }
}

// Packs x (n_tokens, cols), cols a multiple of 16, by token tile and lane:
//   xp: (ceil(n_tokens / 6), 16 lanes, cols / 16, kFGemmTokens);
//   xp[tile][i][j][t] = x[6 tile + t, 16j + i], 0 past n_tokens,
// so a lane's pass reads its tile's activations as one short stream (read
// in place, the broadcasts touch a new line per column and miss L1).
void PackActLanes(const float* x, int64_t n_tokens, int64_t cols,
                  std::vector<float>& xp) {
  const int64_t tiles = (n_tokens + kFGemmTokens - 1) / kFGemmTokens;
  const int64_t cols_j = cols / kFLanes;
  const size_t need = tiles * kFGemmTokens * cols;
  if (xp.size() < need) xp.resize(need);
  const __m512i lane_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int>(cols_j * kFGemmTokens)));
  for (int64_t tile = 0; tile < tiles; ++tile) {
    float* out = xp.data() + tile * kFGemmTokens * cols;
    for (int t = 0; t < kFGemmTokens; ++t) {
      const int64_t token = tile * kFGemmTokens + t;
      for (int64_t j = 0; j < cols_j; ++j) {
        const __m512 v = token < n_tokens
                             ? _mm512_loadu_ps(x + token * cols + j * kFLanes)
                             : _mm512_setzero_ps();
        _mm512_i32scatter_ps(out + j * kFGemmTokens + t, lane_offsets, v, 4);
      }
    }
  }
}

// Fetches a call's share of the next block into L2, spread evenly over
// the call's steps (a burst would take every fill buffer at once):
// Bresenham-style, `owed` grows by the share each step and pays a line
// per `steps`. The share: next[p] + [begin, end) * 64 bytes for each panel
// p < np.
class NextBlockFetch {
 public:
  NextBlockFetch(const uint8_t* const* next, int np, int64_t begin, int64_t end,
                 int64_t steps)
      : next_(next),
        np_(np),
        total_((end - begin) * np),
        steps_(steps),
        line_(begin) {}

  void Step() {
    if (total_ <= 0) return;
    for (owed_ += total_; owed_ >= steps_; owed_ -= steps_) {
      _mm_prefetch(reinterpret_cast<const char*>(next_[panel_]) + line_ * 64,
                   _MM_HINT_T1);
      if (++panel_ == np_) panel_ = 0, ++line_;
    }
  }

 private:
  const uint8_t* const* next_;
  int np_;
  int64_t total_, steps_, line_;
  int64_t owed_ = 0;
  int panel_ = 0;
};

struct FGemmArgs {
  // Each panel's column block, (16 lanes, nj, 16 rows) in the tile's WT.
  const uint8_t* panel[kFPanels] = {};
  int64_t nj = 0;                // columns in the block / 16
  // Activations packed like the weights (PackActLanes), at column k0:
  // x[i * x_lane_stride + j * kFGemmTokens + t] = x[t, k0 + 16j + i].
  const float* x = nullptr;
  int64_t x_lane_stride = 0;
  // Lane sums of the tile's tokens x 64 rows: sums[t][i][row], row in
  // [0, 64) from the first row of panel 0.
  float* sums = nullptr;
  bool resume = false;  // start from sums (k0 > 0) instead of zero
  bool finish = false;  // last column block: reduce sums into y
  bool prefetch = false;  // streaming the panels from memory (first tile)
  // Lines of the next block to fetch into L2 while this tile runs (its
  // share: with several token tiles per block, the next block's memory
  // traffic overlaps their arithmetic instead of stalling the first):
  // next[p] + [next_begin, next_end) * 64 bytes for each panel p < next_np.
  const uint8_t* next[kFPanels] = {};
  int next_np = 0;
  int64_t next_begin = 0, next_end = 0;
  float* y = nullptr;   // y[token 0, first row of panel 0]
  int64_t y_stride = 0;
  __mmask16 last_rows = 0xFFFF;  // valid rows of the last panel
};

template <GgmlType WT, int NP, int T>
void FGemmTile(const FGemmArgs& g) {
  constexpr int64_t eb = kFElemBytes<WT>;
  // The tile's share of the next block, over its 16 * nj steps.
  NextBlockFetch fetch(g.next, g.next_np, g.next_begin, g.next_end,
                       kFLanes * g.nj);
  for (int64_t i = 0; i < kFLanes; ++i) {
    __m512 acc[NP][T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        acc[p][t] = g.resume ? _mm512_loadu_ps(g.sums + t * kFSumsPerToken +
                                               i * kFGemmMc + p * kPanelRows)
                             : _mm512_setzero_ps();
      }
    }
    const int64_t lane_offset = i * g.nj * kPanelRows * eb;
    const float* xi = g.x + i * g.x_lane_stride;  // (nj, kFGemmTokens)
    for (int64_t j = 0; j < g.nj; ++j) {
      fetch.Step();
      __m512 wv[NP];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const uint8_t* at = g.panel[p] + lane_offset + j * kPanelRows * eb;
        if (g.prefetch && (j * kPanelRows * eb) % 64 == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(at) + kFStreamPrefetch,
                       _MM_HINT_T0);
        }
        wv[p] = LoadLane16<WT>(at);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 xb = _mm512_set1_ps(xi[j * kFGemmTokens + t]);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) {
          acc[p][t] = _mm512_fmadd_ps(wv[p], xb, acc[p][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        _mm512_storeu_ps(
            g.sums + t * kFSumsPerToken + i * kFGemmMc + p * kPanelRows,
            acc[p][t]);
      }
    }
  }
  if (!g.finish) return;
  // Reduce4's tree, lane vectors for lanes: u_j = (a_j + a_8+j) +
  // (a_4+j + a_12+j), then (u_0 + u_2) + (u_1 + u_3).
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const float* s = g.sums + t * kFSumsPerToken + p * kPanelRows;
      auto lane = [&](int i) { return _mm512_loadu_ps(s + i * kFGemmMc); };
      __m512 u[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        u[j] = _mm512_add_ps(_mm512_add_ps(lane(j), lane(8 + j)),
                             _mm512_add_ps(lane(4 + j), lane(12 + j)));
      }
      const __m512 v = _mm512_add_ps(_mm512_add_ps(u[0], u[2]),
                                     _mm512_add_ps(u[1], u[3]));
      const __mmask16 m = p == NP - 1 ? g.last_rows : __mmask16{0xFFFF};
      _mm512_mask_storeu_ps(g.y + t * g.y_stride + p * kPanelRows, m, v);
    }
  }
}

using FGemmFn = void (*)(const FGemmArgs&);

template <GgmlType WT, int NP, int... Ts>
void FillFGemm(FGemmFn (&fn)[kFGemmTokens], std::integer_sequence<int, Ts...>) {
  ((fn[Ts] = &FGemmTile<WT, NP, Ts + 1>), ...);
}

template <GgmlType WT>
struct FGemmTable {
  FGemmFn fn[kFPanels][kFGemmTokens];  // [NP - 1][T - 1]
  FGemmTable() {
    FillFGemm<WT, 1>(fn[0], std::make_integer_sequence<int, kFGemmTokens>{});
    FillFGemm<WT, 2>(fn[1], std::make_integer_sequence<int, kFGemmTokens>{});
    FillFGemm<WT, 3>(fn[2], std::make_integer_sequence<int, kFGemmTokens>{});
    FillFGemm<WT, 4>(fn[3], std::make_integer_sequence<int, kFGemmTokens>{});
  }
};

// Rows [row_begin, row_end) (row_begin a multiple of 16) of task.y. Row
// blocks of 64 and column blocks of kFloatPanelCols: a block of weights
// (512 KiB in f32) stays in L2 while every token tile passes over it.
template <GgmlType WT>
void FGemmRows(const MatMulTask& task, int64_t row_begin, int64_t row_end) {
  static const FGemmTable<GgmlType::kF32> f32_table;
  static const FGemmTable<WT> table;
  const bool packed = task.layout == WeightLayout::kPanels;
  const int64_t tiles = (task.n_tokens + kFGemmTokens - 1) / kFGemmTokens;
  // Per thread, grown once: f32 weights of a block (64 rows x
  // kFloatPanelCols = 512 KiB) gathered from row-major weights (packed ones
  // are read in place: widening them to f32 first measured slower than
  // converting in the tiles), the lane sums (n_tokens, 16 lanes, 64 rows),
  // and the activations packed by lane (each thread packs them all: a copy
  // of x, against rows / threads multiply-adds per element).
  // Packed blocks read by several token tiles: fetch the next block into
  // L2 across this one's tiles; with one or two tiles the first streams
  // its panels itself.
  const bool fetch_next = packed && tiles >= kFetchNextMinTiles;
  thread_local std::vector<float> gathered;
  thread_local std::vector<float> sums;
  if (!packed &&
      gathered.size() < static_cast<size_t>(kFGemmMc * kFloatPanelCols)) {
    gathered.resize(kFGemmMc * kFloatPanelCols);
  }
  const size_t sums_need = tiles * kFGemmTokens * kFSumsPerToken;
  if (sums.size() < sums_need) sums.resize(sums_need);
  thread_local std::vector<float> xp;  // PackActLanes
  FGemmArgs g;
  const int64_t cols_j = task.cols / kFLanes;
  PackActLanes(task.x, task.n_tokens, task.cols, xp);
  g.x_lane_stride = cols_j * kFGemmTokens;
  g.y_stride = task.rows;

  const int64_t panel_bytes = task.cols * kPanelRows * kFElemBytes<WT>;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kFGemmMc) {
    const int64_t nr = std::min(kFGemmMc, row_end - r0);
    const int64_t panels = (nr + kPanelRows - 1) / kPanelRows;
    const int np = static_cast<int>(panels);
    const int64_t rows_in_last = nr - (panels - 1) * kPanelRows;
    g.last_rows = rows_in_last >= kPanelRows
                      ? __mmask16{0xFFFF}
                      : static_cast<__mmask16>((1u << rows_in_last) - 1);
    for (int64_t k0 = 0; k0 < task.cols; k0 += kFloatPanelCols) {
      const int64_t n = std::min(kFloatPanelCols, task.cols - k0);
      if (!packed) {
        GatherFloatPanels<WT>(task.w, task.row_bytes, r0, nr, k0, n,
                              gathered.data());
      }
      for (int64_t p = 0; p < panels; ++p) {
        // Packed: panel r0 / 16 + p, its column block at k0 (k0 * 16
        // weights in); gathered: f32 panels of n columns.
        g.panel[p] =
            packed ? task.w + (r0 / kPanelRows + p) * panel_bytes +
                         k0 * kPanelRows * kFElemBytes<WT>
                   : reinterpret_cast<const uint8_t*>(gathered.data() +
                                                      p * kPanelRows * n);
      }
      const FGemmFn* fns = packed ? table.fn[np - 1] : f32_table.fn[np - 1];
      g.nj = n / kFLanes;
      g.resume = k0 > 0;
      g.finish = k0 + n == task.cols;
      int64_t next_lines = 0;
      g.next_np = 0;
      if (fetch_next) {
        // The next block: more columns of these rows, or the next rows.
        int64_t nk0 = k0 + n, nr0 = r0;
        if (nk0 >= task.cols) nk0 = 0, nr0 = r0 + kFGemmMc;
        if (nr0 < row_end) {
          const int64_t nn = std::min(kFloatPanelCols, task.cols - nk0);
          g.next_np = static_cast<int>(std::min<int64_t>(
              kFPanels, (std::min(kFGemmMc, row_end - nr0) + kPanelRows - 1) /
                            kPanelRows));
          for (int p = 0; p < g.next_np; ++p) {
            g.next[p] = task.w + (nr0 / kPanelRows + p) * panel_bytes +
                        nk0 * kPanelRows * kFElemBytes<WT>;
          }
          next_lines = kPanelRows * nn * kFElemBytes<WT> / 64;
        }
      }
      for (int64_t t0 = 0; t0 < task.n_tokens; t0 += kFGemmTokens) {
        const int nt = static_cast<int>(
            std::min<int64_t>(kFGemmTokens, task.n_tokens - t0));
        g.x = xp.data() + t0 * task.cols + k0 / kFLanes * kFGemmTokens;
        g.sums = sums.data() + t0 * kFSumsPerToken;
        g.y = task.y + t0 * task.rows + r0;
        g.prefetch = packed && t0 == 0;
        const int64_t tile = t0 / kFGemmTokens;
        g.next_begin = next_lines * tile / tiles;
        g.next_end = next_lines * (tile + 1) / tiles;
        fns[nt - 1](g);
      }
    }
  }
}

}  // namespace

void FloatGemmRowsAvx512(const MatMulTask& task, int64_t row_begin,
                         int64_t row_end) {
  switch (task.type) {
    case GgmlType::kF32:
      FGemmRows<GgmlType::kF32>(task, row_begin, row_end);
      break;
    case GgmlType::kF16:
      FGemmRows<GgmlType::kF16>(task, row_begin, row_end);
      break;
    default:
      FGemmRows<GgmlType::kBF16>(task, row_begin, row_end);
      break;
  }
}

}  // namespace paceline::engine::cpu::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- Int8 weights (Q8_0, Q4_0): panels, VNNI outer products ----
//
// The weights' operand layout is the panel layout of matmul_internal.h
// (16 rows per zmm, 4 columns per lane, unsigned bytes or Q4_0's nibble
// pairs, f16 scales). Matrices packed at load (WeightLayout::kPanels) are
// read in place, for any token count: one token is a GEMV that streams
// each panel once.
// Row-major matrices are packed per call, block by block, which pays from
// kGemmMinTokens tokens.

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni")
#endif

namespace paceline::engine::cpu::internal {
namespace {

constexpr int kGemmTokens = 6;        // tokens per micro-tile
constexpr int64_t kGemmKcBlocks = 64;  // 2048 columns per packed block
constexpr int64_t kGemmMc = 64;        // rows per packed block (4 panels)

template <GgmlType WT>
constexpr int kOffsetShift = WT == GgmlType::kQ8_0 ? 7 : 3;

constexpr int64_t kPackPrefetchBytes = 512;

// Packs row-major rows [r0, r0 + nr) x blocks [b0, b0 + nb), b0 even, into
// the panel layout: out (panels, (nb + 1) / 2 pairs). Lanes past nr hold
// junk that no store keeps. One gather reads a 4-byte group of a block
// from all 16 rows of a panel.
template <GgmlType WT>
void PackBlock(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t nr,
               int64_t b0, int64_t nb, uint8_t* out) {
  constexpr int64_t kBlockBytes =
      WT == GgmlType::kQ8_0 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
  const int64_t panels = (nr + kPanelRows - 1) / kPanelRows;
  const int64_t panel_bytes = (nb + 1) / 2 * PanelPairBytes(WT);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                          11, 12, 13, 14, 15);
  // Row offsets fit int32: the caller keeps row_bytes <= kGemmMaxRowBytes.
  const __m512i offsets =
      _mm512_mullo_epi32(lanes, _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t rows = std::min<int64_t>(kPanelRows, nr - p * kPanelRows);
    const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
    const uint8_t* base = w + (r0 + p * kPanelRows) * row_bytes;
    uint8_t* panel = out + p * panel_bytes;
    for (int64_t j = 0; j < nb; ++j) {
      const uint8_t* blk = base + (b0 + j) * kBlockBytes;  // of row lane 0
      uint8_t* quads = panel + PanelQuadsAt(WT, j);
      // 16 rows are 16 streams, more than the hardware prefetchers follow
      // alongside the other threads': fetch a few blocks ahead by hand.
      if (j % 2 == 0) {
        for (int64_t i = 0; i < rows; ++i) {
          _mm_prefetch(reinterpret_cast<const char*>(blk) + i * row_bytes +
                           kPackPrefetchBytes,
                       _MM_HINT_T0);
        }
      }
      const __m512i zero = _mm512_setzero_si512();
      if constexpr (WT == GgmlType::kQ8_0) {
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) {
          const __m512i g =
              _mm512_mask_i32gather_epi32(zero, valid, offsets, blk + 2 + 4 * q, 1);
          _mm512_store_si512(quads + q * 64, _mm512_xor_si512(g, k80));
        }
      } else {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          _mm512_store_si512(quads + q * 64,
                             _mm512_mask_i32gather_epi32(zero, valid, offsets,
                                                         blk + 2 + 4 * q, 1));
        }
      }
      // The f16 scale is the low half of the block's first 4 bytes.
      const __m512i d =
          _mm512_mask_i32gather_epi32(zero, valid, offsets, blk, 1);
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(panel + PanelScalesAt(WT, j)),
          _mm512_cvtepi32_epi16(d));
    }
  }
}

struct GemmArgs {
  // Block pair b0 / 2 of each panel; [1] when NP == 2.
  const uint8_t* panel[2] = {nullptr, nullptr};
  int64_t nb = 0;           // blocks in this column block
  int64_t b0 = 0;           // first block (column b0 * 32), even
  const int8_t* x = nullptr;       // (T, x_stride) first token
  int64_t x_stride = 0;
  const float* xd = nullptr;       // (T, xd_stride) block scales
  int64_t xd_stride = 0;
  const int32_t* xs = nullptr;     // (T, pair_stride) s_pairs
  int64_t pair_stride = 0;
  float* y = nullptr;              // y[token 0, first row of panel 0]
  int64_t y_stride = 0;
  __mmask16 last_rows = 0xFFFF;    // valid rows of the last panel
  bool accumulate = false;
  // Streaming panels from memory (a block's first token tile): fetch
  // kStreamPrefetch bytes ahead along each panel, which the hardware
  // prefetchers alone do not (they stop at every 4 KiB page).
  bool prefetch = false;
  // This call's share of the next block, fetched into L2 while it runs
  // (NextBlockFetch; as in FGemmArgs).
  const uint8_t* next[kGemmMc / kPanelRows] = {};
  int next_np = 0;
  int64_t next_begin = 0, next_end = 0;
};

constexpr int64_t kStreamPrefetch = 2048;

// y[t, 16 NP rows] (+)= for T tokens over the column block.
template <GgmlType WT, int NP, int T>
void GemmTile(const GemmArgs& g) {
  // Later column blocks resume the sums in y, so each y[t, r] takes one
  // chain of FMAs over all blocks, as in the dot-product tiles.
  __m512 accf[NP][T];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) {
    const __mmask16 m = p == NP - 1 ? g.last_rows : __mmask16{0xFFFF};
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      accf[p][t] = g.accumulate ? _mm512_maskz_loadu_ps(
                                      m, g.y + t * g.y_stride + p * kPanelRows)
                                : _mm512_setzero_ps();
    }
  }
  // The call's share of the next block, over its nb * kVectors steps.
  constexpr int kVectors = static_cast<int>(PanelQuadBytes(WT) / 64);
  NextBlockFetch fetch(g.next, g.next_np, g.next_begin, g.next_end,
                       g.nb * kVectors);
  for (int64_t j = 0; j < g.nb; ++j) {
    const int64_t b = g.b0 + j;
    __m512i acci[NP][T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      // -offset * sum(q): the unsigned weights carry +128 (Q8_0) or +8.
      const int32_t neg_sum = g.xs[t * g.pair_stride + (b / 2) * 16 + (b % 2) * 8];
      const __m512i c = _mm512_set1_epi32(neg_sum * (1 << kOffsetShift<WT>));
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p) acci[p][t] = c;
    }
    // Q8_0: 8 vectors, quad q each; Q4_0: 4 vectors, quads q (low
    // nibbles) and q + 4 (high).
#pragma GCC unroll 8
    for (int q = 0; q < kVectors; ++q) {
      fetch.Step();
      __m512i wv[NP], wv_hi[NP];
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p) {
        const uint8_t* line = g.panel[p] + PanelQuadsAt(WT, j) + q * 64;
        if (g.prefetch) {
          _mm_prefetch(reinterpret_cast<const char*>(line) + kStreamPrefetch,
                       _MM_HINT_T0);
          if (q == 0 && j % 2 == 1) {
            _mm_prefetch(reinterpret_cast<const char*>(g.panel[p]) +
                             PanelScalesAt(WT, j) + kStreamPrefetch,
                         _MM_HINT_T0);
          }
        }
        wv[p] = _mm512_load_si512(line);
        if constexpr (WT == GgmlType::kQ4_0) {
          const __m512i k0F = _mm512_set1_epi8(0x0F);
          wv_hi[p] = _mm512_and_si512(_mm512_srli_epi16(wv[p], 4), k0F);
          wv[p] = _mm512_and_si512(wv[p], k0F);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = g.x + t * g.x_stride + b * kQBlock + 4 * q;
        int32_t x4;
        std::memcpy(&x4, xq, 4);
        const __m512i xv = _mm512_set1_epi32(x4);
#pragma GCC unroll 2
        for (int p = 0; p < NP; ++p) {
          acci[p][t] = _mm512_dpbusd_epi32(acci[p][t], wv[p], xv);
        }
        if constexpr (WT == GgmlType::kQ4_0) {
          std::memcpy(&x4, xq + 16, 4);
          const __m512i xv_hi = _mm512_set1_epi32(x4);
#pragma GCC unroll 2
          for (int p = 0; p < NP; ++p) {
            acci[p][t] = _mm512_dpbusd_epi32(acci[p][t], wv_hi[p], xv_hi);
          }
        }
      }
    }
    __m512 wd[NP];
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      wd[p] = _mm512_cvtph_ps(_mm256_load_si256(
          reinterpret_cast<const __m256i*>(g.panel[p] + PanelScalesAt(WT, j))));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(g.xd[t * g.xd_stride + b]);
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p) {
        accf[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci[p][t]),
                                     _mm512_mul_ps(wd[p], dx), accf[p][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      float* out = g.y + t * g.y_stride + p * kPanelRows;  // (16) rows
      const __mmask16 m = p == NP - 1 ? g.last_rows : __mmask16{0xFFFF};
      _mm512_mask_storeu_ps(out, m, accf[p][t]);
    }
  }
}

using GemmFn = void (*)(const GemmArgs&);

template <GgmlType WT, int NP, int... Ts>
void FillGemm(GemmFn (&fn)[kGemmTokens], std::integer_sequence<int, Ts...>) {
  ((fn[Ts] = &GemmTile<WT, NP, Ts + 1>), ...);
}

template <GgmlType WT>
struct GemmTable {
  GemmFn fn[2][kGemmTokens];  // [NP - 1][T - 1]
  GemmTable() {
    FillGemm<WT, 1>(fn[0], std::make_integer_sequence<int, kGemmTokens>{});
    FillGemm<WT, 2>(fn[1], std::make_integer_sequence<int, kGemmTokens>{});
  }
};

// Points g->next at the packed block after the one at column block b0 (kc
// blocks wide) and rows [r0, r0 + kGemmMc) of the range [row_begin,
// row_end): the next rows of these columns, else the range's first rows of
// the next columns. Returns its lines per panel (0 after the last block).
template <GgmlType WT>
int64_t SetNextBlock(const MatMulTask& task, int64_t b0, int64_t kc, int64_t r0,
                     int64_t row_begin, int64_t row_end, GemmArgs* g) {
  const int64_t nb_total = task.cols / kQBlock;
  int64_t nb0 = b0, nr0 = r0 + kGemmMc;
  if (nr0 >= row_end) nb0 = b0 + kc, nr0 = row_begin;
  g->next_np = 0;
  if (nb0 >= nb_total) return 0;
  const int64_t nb = std::min(kc, nb_total - nb0);
  const int64_t rows = std::min(kGemmMc, row_end - nr0);
  g->next_np = static_cast<int>((rows + kPanelRows - 1) / kPanelRows);
  const int64_t panel_bytes = PanelBytes(WT, task.cols);
  for (int p = 0; p < g->next_np; ++p) {
    g->next[p] = task.w + (nr0 / kPanelRows + p) * panel_bytes +
                 nb0 / 2 * PanelPairBytes(WT);
  }
  return ((nb + 1) / 2 * PanelPairBytes(WT) + 63) / 64;
}

// Rows [row_begin, row_end) (row_begin a multiple of 16) of task.y. Column
// blocks of kGemmKcBlocks and row blocks of kGemmMc keep a block of weights
// in L2 while every token tile passes over it; with one token tile there
// is nothing to reuse, and each panel streams once over all its columns.
template <GgmlType WT>
void GemmRows(const MatMulTask& task, int64_t row_begin, int64_t row_end) {
  static const GemmTable<WT> table;
  const bool packed = task.layout == WeightLayout::kPanels;
  const int64_t nb_total = task.cols / kQBlock;
  const bool one_tile = task.n_tokens <= kGemmTokens;
  const int64_t kc = packed && one_tile ? nb_total : kGemmKcBlocks;
  const int64_t mc = packed && one_tile ? row_end - row_begin : kGemmMc;
  // Per thread, grown once, for row-major weights: (4 panels, 32 pairs) x
  // up to 1088 bytes = 136 KiB, 64-byte aligned.
  thread_local std::vector<uint8_t> buffer;
  uint8_t* pack = nullptr;
  if (!packed) {
    const size_t need = kGemmMc / kPanelRows * (kGemmKcBlocks / 2) *
                            PanelPairBytes(WT) + 64;
    if (buffer.size() < need) buffer.resize(need);
    const uintptr_t v = reinterpret_cast<uintptr_t>(buffer.data());
    pack = buffer.data() + ((64 - v % 64) % 64);
  }
  const int64_t task_panel_bytes = PanelBytes(WT, task.cols);

  // Packed blocks read by several token tiles: fetch the next block into
  // L2 across this one's tiles (FGemmRows does the same), so that only a
  // thread's first block stalls its first tile on memory.
  const int64_t tiles = (task.n_tokens + kGemmTokens - 1) / kGemmTokens;
  const bool fetch_next = packed && tiles >= kFetchNextMinTiles;

  GemmArgs g;
  g.x_stride = task.cols;
  g.xd_stride = nb_total;
  g.pair_stride = (nb_total + 1) / 2 * 16;
  g.y_stride = task.rows;
  for (int64_t b0 = 0; b0 < nb_total; b0 += kc) {
    const int64_t nb = std::min(kc, nb_total - b0);
    g.nb = nb;
    g.b0 = b0;
    g.accumulate = b0 > 0;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += mc) {
      const int64_t nr = std::min(mc, row_end - r0);
      // Panel i of the row block starts at panels + i * panel_bytes, at
      // block pair b0 / 2.
      const uint8_t* panels;
      int64_t panel_bytes;
      if (packed) {
        panels = task.w + r0 / kPanelRows * task_panel_bytes +
                 b0 / 2 * PanelPairBytes(WT);
        panel_bytes = task_panel_bytes;
      } else {
        PackBlock<WT>(task.w, task.row_bytes, r0, nr, b0, nb, pack);
        panels = pack;
        panel_bytes = (nb + 1) / 2 * PanelPairBytes(WT);
      }
      const int64_t n_panels = (nr + kPanelRows - 1) / kPanelRows;
      const int64_t next_lines =
          fetch_next
              ? SetNextBlock<WT>(task, b0, kc, r0, row_begin, row_end, &g)
              : 0;
      const int64_t calls = tiles * ((n_panels + 1) / 2);
      int64_t call = 0;
      for (int64_t t0 = 0; t0 < task.n_tokens; t0 += kGemmTokens) {
        const int nt = static_cast<int>(
            std::min<int64_t>(kGemmTokens, task.n_tokens - t0));
        g.x = task.qx.q + t0 * task.cols;
        g.xd = task.qx.d + t0 * nb_total;
        g.xs = task.qx.s_pairs + t0 * g.pair_stride;
        g.prefetch = packed && t0 == 0;
        for (int64_t p = 0; p < n_panels; p += 2, ++call) {
          g.next_begin = next_lines * call / calls;
          g.next_end = next_lines * (call + 1) / calls;
          const int np = static_cast<int>(std::min<int64_t>(2, n_panels - p));
          g.panel[0] = panels + p * panel_bytes;
          g.panel[1] = g.panel[0] + panel_bytes;
          g.y = task.y + t0 * task.rows + r0 + p * kPanelRows;
          const int64_t rows_in_last = nr - (p + np - 1) * kPanelRows;
          g.last_rows = rows_in_last >= kPanelRows
                            ? __mmask16{0xFFFF}
                            : static_cast<__mmask16>((1u << rows_in_last) - 1);
          table.fn[np - 1][nt - 1](g);
        }
      }
    }
  }
}

}  // namespace

void GemmRowsAvx512Vnni(const MatMulTask& task, int64_t row_begin,
                        int64_t row_end) {
  if (task.type == GgmlType::kQ8_0) {
    GemmRows<GgmlType::kQ8_0>(task, row_begin, row_end);
  } else {
    GemmRows<GgmlType::kQ4_0>(task, row_begin, row_end);
  }
}

}  // namespace paceline::engine::cpu::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
#endif  // defined(__x86_64__)
