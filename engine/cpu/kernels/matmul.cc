#include "engine/cpu/kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_kquant.h"
#include "engine/cpu/kernels/matmul_mxfp4.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu {
namespace {

using internal::kQBlock;
using internal::MatMulTask;
using internal::QuantizeKernel;
using internal::RowsKernel;

// Rows per unit of the thread split: a multiple of every kernel's row tile,
// so tiles never straddle two threads.
constexpr int64_t kRowGroup = 16;
// Below this many multiply-adds a call runs on the calling thread: waking
// the pool costs more than it saves (a few microseconds).
constexpr int64_t kMinParallelMacs = int64_t{1} << 16;
// Matrices one MatMulShared call takes at most.
constexpr size_t kMaxShared = 8;
// GgmlType values the per-type levels cover (ggml's type ids are < 64).
constexpr size_t kMaxTypes = 64;

using internal::IsKQuant;
using internal::IsQuantized;

// One token's extra activation layout for the VNNI kernels.
using PairsKernel = void (*)(const int8_t* q, int64_t cols, int32_t* s_pairs);
// One token as Q8_K, for K-quant weights (matmul_kquant.h).
using KQuantizeKernel = void (*)(const float* x, int64_t cols, int8_t* q,
                                 float* d, int16_t* bsums);

struct Kernels {
  RowsKernel rows;
  QuantizeKernel quantize = nullptr;     // null for float weight types
  PairsKernel pairs = nullptr;           // the VNNI kernels only
  bool panels = false;                   // `rows` reads WeightLayout::kPanels
  KQuantizeKernel quantize_k = nullptr;  // K-quant weight types only
  const char* name = "scalar";           // for logs: the ISA path taken
};

// Per weight type, the level SetMatMulLevel chose (-1: none, the effective
// level). Process-wide, as the ISA cap is.
std::atomic<int>& LevelSlot(GgmlType type) {
  static std::atomic<int> slots[kMaxTypes];
  static const bool init = [] {
    for (std::atomic<int>& s : slots) s.store(-1);
    return true;
  }();
  (void)init;
  const size_t i = static_cast<size_t>(type);
  return slots[i < kMaxTypes ? i : kMaxTypes - 1];
}

bool Vnni(IsaLevel level) {
  return level == IsaLevel::kAvx512 && GetCpuFeatures().avx512_vnni;
}

// K-quants: with AVX-512 VNNI, the AVX-512 Q8_K quantizer and kernels
// (which read Q4_K / Q6_K panels); else the portable quantizer (the same
// bytes) and AVX2 kernels, else scalar ones.
Kernels PickKQuantKernels(IsaLevel level) {
  Kernels k = {&internal::MatMulRowsKQuantScalar};
  k.quantize_k = &internal::QuantizeRowQ8K;
  k.name = "scalar, Q8_K activations";
#if defined(__x86_64__)
  if (Vnni(level)) {
    k.quantize_k = &internal::QuantizeRowQ8KAvx512;
    k.rows = &internal::MatMulRowsKQuantAvx512;
    k.panels = true;
    k.name = "avx512-vnni, Q8_K activations";
  } else if (level >= IsaLevel::kAvx2) {
    k.rows = &internal::MatMulRowsKQuantAvx2;
    k.name = "avx2, Q8_K activations";
  }
#endif
  return k;
}

// MXFP4: row-major weights, activations quantized as for Q8_0; AVX-512
// without VNNI runs the AVX2 kernel, as the int8 types do.
Kernels PickMxfp4Kernels(IsaLevel level) {
  switch (level) {
#if defined(__x86_64__)
    case IsaLevel::kAvx512:
      if (Vnni(level)) {
        return {.rows = &internal::MatMulRowsMxfp4Avx512Vnni,
                .quantize = &internal::QuantizeRowAvx512,
                .name = "avx512-vnni, Q8_0 activations"};
      }
      return {.rows = &internal::MatMulRowsMxfp4Avx2,
              .quantize = &internal::QuantizeRowAvx512,
              .name = "avx2, Q8_0 activations"};
    case IsaLevel::kAvx2:
      return {.rows = &internal::MatMulRowsMxfp4Avx2,
              .quantize = &internal::QuantizeRowAvx2,
              .name = "avx2, Q8_0 activations"};
#endif
    default:
      return {.rows = &internal::MatMulRowsMxfp4Scalar,
              .quantize = &internal::QuantizeRowScalar,
              .name = "scalar, Q8_0 activations"};
  }
}

Kernels PickKernels(GgmlType type, IsaLevel level) {
  if (IsKQuant(type)) return PickKQuantKernels(level);
  if (type == GgmlType::kMXFP4) return PickMxfp4Kernels(level);
  const bool quantized = IsQuantized(type);
  switch (level) {
#if defined(__x86_64__)
    case IsaLevel::kAvx512:
      if (!quantized) {
        return {.rows = &internal::MatMulRowsAvx512,
                .panels = true,
                .name = "avx512"};
      }
      if (Vnni(level)) {
        return {.rows = &internal::MatMulRowsAvx512Vnni,
                .quantize = &internal::QuantizeRowAvx512,
                .pairs = &internal::BuildPairsAvx512,
                .panels = true,
                .name = "avx512-vnni, Q8_0 activations"};
      }
      return {.rows = &internal::MatMulRowsAvx2,
              .quantize = &internal::QuantizeRowAvx512,
              .name = "avx2, Q8_0 activations"};
    case IsaLevel::kAvx2:
      return {.rows = &internal::MatMulRowsAvx2,
              .quantize = quantized ? &internal::QuantizeRowAvx2 : nullptr,
              .name = quantized ? "avx2, Q8_0 activations" : "avx2"};
#endif
    default:
      return {.rows = &internal::MatMulRowsScalar,
              .quantize = quantized ? &internal::QuantizeRowScalar : nullptr,
              .name = quantized ? "scalar, Q8_0 activations" : "scalar"};
  }
}

Kernels PickKernels(GgmlType type) {
  return PickKernels(type, MatMulLevel(type));
}

uint8_t* AlignUp(uint8_t* p, size_t alignment) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<uint8_t*>((v + alignment - 1) & ~(alignment - 1));
}

absl::Status Validate(const WeightView& w, const float* x, int64_t n_tokens,
                      const float* y) {
  if (!MatMulSupports(w.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatMul: no kernel for weights of type ",
                     GetGgmlTypeTraits(w.type).name));
  }
  if (w.rows < 0 || w.cols <= 0 || n_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul: bad shape: rows ",
                                                   w.rows, ", cols ", w.cols,
                                                   ", n_tokens ", n_tokens));
  }
  const absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(w.type, w.cols);
  if (!row_bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatMul: ", row_bytes.status().message()));
  }
  if (w.row_bytes < *row_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatMul: row_bytes ", w.row_bytes, " < ", *row_bytes, " needed for ",
        w.cols, " ", GetGgmlTypeTraits(w.type).name, " elements"));
  }
  if (w.layout == WeightLayout::kPanels &&
      (w.type == GgmlType::kMXFP4 ||
       (IsKQuant(w.type) && !internal::HasKPanels(w.type)) ||
       (!IsQuantized(w.type) && !IsKQuant(w.type) && w.cols % 16 != 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatMul: no panel layout for ", GetGgmlTypeTraits(w.type).name,
        " with ", w.cols, " columns"));
  }
  if (n_tokens == 0 || w.rows == 0) return absl::OkStatus();
  if (w.data == nullptr || x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("MatMul: null buffer");
  }
  const float* x_end = x + n_tokens * w.cols;
  const float* y_end = y + n_tokens * w.rows;
  if (x < y_end && y < x_end) {
    return absl::InvalidArgumentError("MatMul: y overlaps x");
  }
  return absl::OkStatus();
}

// Rows [row_begin, row_end) with `kernels`; panel-layout weights that the
// level's kernel cannot read are unpacked 16 rows at a time (lossless, so
// the results are those of the row-major matrix).
void RunRows(const Kernels& kernels, const MatMulTask& task, int64_t row_begin,
             int64_t row_end) {
  if (task.layout == WeightLayout::kRows || kernels.panels) {
    kernels.rows(task, row_begin, row_end);
    return;
  }
  thread_local std::vector<uint8_t> rows;  // (kPanelRows, row_bytes)
  const size_t row_bytes = *GgmlRowBytes(task.type, task.cols);
  if (rows.size() < internal::kPanelRows * row_bytes) {
    rows.resize(internal::kPanelRows * row_bytes);
  }
  for (int64_t r0 = row_begin; r0 < row_end; r0 += internal::kPanelRows) {
    const int64_t nr = std::min(internal::kPanelRows, row_end - r0);
    internal::UnpackPanelRows(task.type, task.w, task.cols, r0, nr,
                              rows.data());
    MatMulTask part = task;
    part.layout = WeightLayout::kRows;
    part.w = rows.data();
    part.row_bytes = row_bytes;
    part.y = task.y + r0;  // part.rows stays task.rows: y's token stride
    kernels.rows(part, 0, nr);
  }
}

// MatMulShared's arguments: each matrix valid for `x` and its output, one
// type and width for all, outputs disjoint.
absl::Status ValidateShared(absl::Span<const WeightView> ws, const float* x,
                            int64_t n_tokens, absl::Span<float* const> ys) {
  if (ws.empty() || ws.size() != ys.size() || ws.size() > kMaxShared) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatMul: ", ws.size(), " matrices for ", ys.size(),
                     " outputs (1 to ", kMaxShared, ")"));
  }
  for (size_t i = 0; i < ws.size(); ++i) {
    RETURN_IF_ERROR(Validate(ws[i], x, n_tokens, ys[i]));
    if (ws[i].type != ws[0].type || ws[i].cols != ws[0].cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MatMul: matrices sharing activations need one type and width, got ",
          GetGgmlTypeTraits(ws[0].type).name, " x ", ws[0].cols, " and ",
          GetGgmlTypeTraits(ws[i].type).name, " x ", ws[i].cols));
    }
    for (size_t j = 0; j < i && n_tokens > 0; ++j) {
      const float* a = ys[i];
      const float* b = ys[j];
      if (a < b + n_tokens * ws[j].rows && b < a + n_tokens * ws[i].rows) {
        return absl::InvalidArgumentError("MatMul: outputs overlap");
      }
    }
  }
  return absl::OkStatus();
}

// Quantizes the activations once for every matrix of a quantized type, into
// `scratch` (grown geometrically, never shrunk), on `pool` when given. Each
// array 64-byte aligned:
//   q: (n_tokens, cols) int8
//   d: (n_tokens, cols / kQBlock) float
//   s_pairs (VNNI kernels only): (n_tokens, n_pairs, 16) int32
// K-quants (kernels.quantize_k): d (n_tokens, cols / 256) and, in place of
// s_pairs, bsums (n_tokens, cols / 16) int16.
internal::QuantizedActs QuantizeActivations(const Kernels& kernels,
                                            const float* x, int64_t n_tokens,
                                            int64_t cols, ThreadPool* pool,
                                            MatMulScratch& scratch) {
  const bool k = kernels.quantize_k != nullptr;
  const int64_t nb = cols / (k ? internal::kKBlock : kQBlock);
  const int64_t pair_stride = (nb + 1) / 2 * 16;
  const int64_t ns = cols / internal::kKGroup;  // bsums per token
  auto align = [](size_t n) { return (n + 63) & ~size_t{63}; };
  const size_t q_bytes = align(n_tokens * cols);
  const size_t d_bytes = align(sizeof(float) * n_tokens * nb);
  const size_t pair_bytes = k ? align(2 * n_tokens * ns)
                            : kernels.pairs != nullptr
                                ? align(4 * n_tokens * pair_stride)
                                : 0;
  const size_t needed = 64 + q_bytes + d_bytes + pair_bytes;
  if (scratch.bytes.size() < needed) {
    scratch.bytes.resize(std::max(needed, 2 * scratch.bytes.size()));
  }
  uint8_t* base = AlignUp(scratch.bytes.data(), 64);
  int8_t* q = reinterpret_cast<int8_t*>(base);
  float* d = reinterpret_cast<float*>(base + q_bytes);
  int32_t* s_pairs = reinterpret_cast<int32_t*>(base + q_bytes + d_bytes);
  int16_t* bsums = reinterpret_cast<int16_t*>(s_pairs);
  auto quantize = [&](int64_t t_begin, int64_t t_end) {
    for (int64_t t = t_begin; t < t_end; ++t) {
      if (k) {
        kernels.quantize_k(x + t * cols, cols, q + t * cols, d + t * nb,
                           bsums + t * ns);
        continue;
      }
      kernels.quantize(x + t * cols, cols, q + t * cols, d + t * nb);
      if (kernels.pairs != nullptr) {
        kernels.pairs(q + t * cols, cols, s_pairs + t * pair_stride);
      }
    }
  };
  if (pool != nullptr && n_tokens > 1) {
    pool->ParallelFor(n_tokens, quantize);
  } else {
    quantize(0, n_tokens);
  }
  internal::QuantizedActs qx = {q, d};
  if (kernels.pairs != nullptr) qx.s_pairs = s_pairs;
  if (k) qx.bsums = bsums;
  return qx;
}

// One task per matrix; the thread split runs over their row groups end to
// end, so one wake of `pool` (when given) serves them all.
void RunShared(const Kernels& kernels, const MatMulTask& shared,
               absl::Span<const WeightView> ws, absl::Span<float* const> ys,
               ThreadPool* pool) {
  MatMulTask tasks[kMaxShared];
  int64_t first_group[kMaxShared + 1] = {0};
  for (size_t i = 0; i < ws.size(); ++i) {
    MatMulTask& task = tasks[i];
    task = shared;
    task.layout = ws[i].layout;
    task.w = static_cast<const uint8_t*>(ws[i].data);
    task.row_bytes = ws[i].row_bytes;
    task.rows = ws[i].rows;
    task.y = ys[i];
    first_group[i + 1] =
        first_group[i] + (ws[i].rows + kRowGroup - 1) / kRowGroup;
  }
  auto run_groups = [&](int64_t g_begin, int64_t g_end) {
    for (size_t i = 0; i < ws.size(); ++i) {
      const int64_t b = std::max(g_begin, first_group[i]) - first_group[i];
      const int64_t e = std::min(g_end, first_group[i + 1]) - first_group[i];
      if (b >= e) continue;
      RunRows(kernels, tasks[i], b * kRowGroup,
              std::min(e * kRowGroup, tasks[i].rows));
    }
  };
  const int64_t groups = first_group[ws.size()];
  if (pool == nullptr) {
    run_groups(0, groups);
  } else {
    pool->ParallelFor(groups, run_groups);
  }
}

}  // namespace

namespace internal {

void RunTiled(const MatMulTask& task, int64_t row_begin, int64_t row_end,
              const TileSet& set) {
  const bool kquant = IsKQuant(task.type);
  const bool quantized = IsQuantized(task.type) || kquant;
  const int64_t cols = task.cols;
  const int64_t kc = task.n_tokens > set.tokens && set.kc > 0 ? set.kc : cols;
  // A row block's weights stay in L2 while every token tile passes over
  // them: at most kL2BlockBytes of rows, a multiple of 16.
  constexpr int64_t kL2BlockBytes = int64_t{512} << 10;
  const int64_t mc =
      kc < cols ? std::min<int64_t>(
                      set.mc, std::max<int64_t>(
                                  16, kL2BlockBytes /
                                          static_cast<int64_t>(task.row_bytes) /
                                          16 * 16))
                : set.mc;
  // Unreduced accumulators of one token tile between its column blocks:
  // (mc rows, set.tokens, kCarryFloats), per thread, grown once.
  thread_local std::vector<float> carry;
  if (kc < cols) {
    const size_t need = mc * set.tokens * kCarryFloats;
    if (carry.size() < need) carry.resize(need);
  }
  TileArgs a;
  a.row_bytes = task.row_bytes;
  a.x_stride = cols;
  a.xd_stride = cols / (kquant ? internal::kKBlock : kQBlock);
  a.xs16_stride = cols / internal::kKGroup;
  a.y_stride = task.rows;
  a.pair_stride = (cols / kQBlock + 1) / 2 * 16;
  a.carry_stride = set.tokens * kCarryFloats;
  for (int64_t rb = row_begin; rb < row_end; rb += mc) {
    const int64_t rb_end = std::min(rb + mc, row_end);
    for (int64_t t0 = 0; t0 < task.n_tokens; t0 += set.tokens) {
      const int nt =
          static_cast<int>(std::min<int64_t>(set.tokens, task.n_tokens - t0));
      const int tile_rows = nt == 1 ? set.rows_one : set.rows;
      if (quantized) {
        a.x = task.qx.q + t0 * cols;
        a.xd = task.qx.d + t0 * a.xd_stride;
        if (kquant) a.xs16 = task.qx.bsums + t0 * a.xs16_stride;
        if (task.qx.s_pairs != nullptr) {
          a.xs_pairs = task.qx.s_pairs + t0 * a.pair_stride;
        }
      } else {
        a.x = task.x + t0 * cols;
      }
      for (int64_t k0 = 0; k0 < cols; k0 += kc) {
        a.k0 = k0;
        a.k1 = std::min(k0 + kc, cols);
        a.load_carry = k0 > 0;
        a.store_carry = a.k1 < cols;
        for (int64_t r = rb; r < rb_end; r += tile_rows) {
          const int nr =
              static_cast<int>(std::min<int64_t>(tile_rows, rb_end - r));
          a.w = task.w + r * task.row_bytes;
          a.y = task.y + t0 * task.rows + r;
          a.carry =
              kc < cols ? carry.data() + (r - rb) * a.carry_stride : nullptr;
          a.prefetch = t0 == 0 && task.n_tokens > 2 && r + tile_rows < row_end
                           ? a.w + tile_rows * task.row_bytes
                           : nullptr;
          set.fn[nr - 1][nt - 1](a);
        }
      }
    }
  }
}

}  // namespace internal

std::string MatMulKernelName(GgmlType type, WeightLayout layout) {
  const Kernels k = PickKernels(type);
  std::string name = k.name;
  if (layout == WeightLayout::kPanels) {
    absl::StrAppend(&name, k.panels ? ", 16-row panels"
                                    : ", panels unpacked as they are read");
  }
  return name;
}

IsaLevel MatMulLevel(GgmlType type) {
  const int chosen = LevelSlot(type).load(std::memory_order_relaxed);
  const IsaLevel effective = EffectiveIsaLevel();
  return chosen < 0 ? effective
                    : std::min(effective, static_cast<IsaLevel>(chosen));
}

void SetMatMulLevel(GgmlType type, IsaLevel level) {
  LevelSlot(type).store(static_cast<int>(level), std::memory_order_relaxed);
}

void ResetMatMulLevels() {
  for (size_t i = 0; i < kMaxTypes; ++i) {
    LevelSlot(static_cast<GgmlType>(i)).store(-1, std::memory_order_relaxed);
  }
}

std::vector<IsaLevel> MatMulCandidateLevels(GgmlType type) {
  std::vector<IsaLevel> levels;
  std::vector<std::string> names;
  for (int l = static_cast<int>(EffectiveIsaLevel());
       l >= static_cast<int>(IsaLevel::kAvx2); --l) {
    const IsaLevel level = static_cast<IsaLevel>(l);
    const std::string name = PickKernels(type, level).name;
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    names.push_back(name);
    levels.push_back(level);
  }
  return levels;
}

bool MatMulSameBitsAtEveryLevel(GgmlType type) { return IsKQuant(type); }

bool MatMulSupports(GgmlType type) { return IsMatMulWeightType(type); }

absl::Status MatMul(const WeightView& w, const float* x, int64_t n_tokens,
                    float* y, ThreadPool& pool, MatMulScratch& scratch) {
  return MatMulShared(absl::MakeConstSpan(&w, 1), x, n_tokens,
                      absl::MakeConstSpan(&y, 1), pool, scratch);
}

absl::Status MatMulShared(absl::Span<const WeightView> ws, const float* x,
                          int64_t n_tokens, absl::Span<float* const> ys,
                          ThreadPool& pool, MatMulScratch& scratch) {
  RETURN_IF_ERROR(ValidateShared(ws, x, n_tokens, ys));
  if (n_tokens == 0) return absl::OkStatus();
  int64_t total_rows = 0;
  for (const WeightView& w : ws) total_rows += w.rows;
  if (total_rows == 0) return absl::OkStatus();

  const Kernels kernels = PickKernels(ws[0].type);
  const int64_t cols = ws[0].cols;
  const bool parallel = total_rows * cols * n_tokens >= kMinParallelMacs;
  MatMulTask shared;
  shared.type = ws[0].type;
  shared.cols = cols;
  shared.n_tokens = n_tokens;
  shared.x = x;
  if (kernels.quantize != nullptr || kernels.quantize_k != nullptr) {
    shared.qx = QuantizeActivations(kernels, x, n_tokens, cols,
                                    parallel ? &pool : nullptr, scratch);
  }
  RunShared(kernels, shared, ws, ys, parallel ? &pool : nullptr);
  return absl::OkStatus();
}

}  // namespace paceline::engine::cpu
