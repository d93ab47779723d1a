#ifndef PACELINE_ENGINE_CPU_KERNELS_MATMUL_H_
#define PACELINE_ENGINE_CPU_KERNELS_MATMUL_H_

// Batched matrix products against weights kept in their file type. One call
// reads every weight once for all tokens of the step: decode throughput
// comes from sharing that read across the batch.
//
// Kernels are chosen at run time from the CPU's features (cpu_features.h):
// AVX-512 / AVX2+FMA where present, a portable scalar path everywhere; per
// weight type the level can be set lower where that was measured faster on
// this CPU (SetMatMulLevel; kernel_choice.h measures).
// Quantized weights (Q8_0, Q4_0) multiply int8-quantized activations
// (32-element blocks with a float scale per block, as the field does);
// K-quant weights (Q2_K .. Q6_K, read in their 256-element super-blocks)
// multiply activations quantized as llama.cpp's Q8_K (a float scale per
// 256); MXFP4 weights (gpt-oss's experts; matmul_mxfp4.h) multiply
// activations quantized as for Q8_0, their E2M1 levels looked up as int8;
// float weights (F32, F16, BF16) multiply float activations.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cpu/cpu_features.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/weight_view.h"

namespace paceline::engine::cpu {

class ThreadPool;

// Whether MatMul has a kernel for weights of `type`: IsMatMulWeightType
// (MXFP4 row-major only: it has no panel layout).
bool MatMulSupports(GgmlType type);

// The kernels MatMul runs now (cpu_features.h) for weights of `type` laid
// out as `layout`, for logs: the ISA path, the activations' quantization,
// whether panels are read as such, e.g. "avx512-vnni, Q8_K activations,
// 16-row panels".
std::string MatMulKernelName(GgmlType type, WeightLayout layout);

// The ISA level MatMul runs weights of `type` at: EffectiveIsaLevel(), or
// the lower level SetMatMulLevel chose for the type. Process-wide, like
// the ISA cap: set it at start-up, before any MatMul of the type runs
// (results differ between levels in the last bits, except where
// MatMulSameBitsAtEveryLevel; weights packed for one level still run at
// another, unpacked as they are read).
IsaLevel MatMulLevel(GgmlType type);
void SetMatMulLevel(GgmlType type, IsaLevel level);
// Forgets every SetMatMulLevel (tests).
void ResetMatMulLevels();

// The levels whose kernels for `type` differ, from EffectiveIsaLevel()
// down to avx2 (scalar is never the faster one): e.g. {avx512, avx2}; one
// level on an AVX2-only CPU, none on others.
std::vector<IsaLevel> MatMulCandidateLevels(GgmlType type);

// Whether every level computes the same bits for `type` (the K-quants).
bool MatMulSameBitsAtEveryLevel(GgmlType type);

// A weight matrix repacked for the kernels of the machine it was packed on:
// owns its bytes; view() is what MatMul takes. Packing is lossless, so the
// packed matrix gives bit for bit the results of the original at every ISA
// level (levels without a panel kernel unpack rows as they go: slow).
class PackedMatrix {
 public:
  PackedMatrix() = default;
  const WeightView& view() const { return view_; }
  size_t bytes() const { return bytes_; }

 private:
  friend absl::StatusOr<PackedMatrix> PackForMatMul(const WeightView& w);
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t bytes_ = 0;
  WeightView view_;
};

// Whether the kernels of MatMulLevel(type) run weights of `type`
// with `cols` columns faster packed: Q8_0, Q4_0, Q4_K and Q6_K with
// AVX-512 VNNI; F32, F16 and BF16 with AVX-512 when cols is a multiple of 16.
bool MatMulPrefersPanels(GgmlType type, int64_t cols);

// Repacks a kRows matrix: Q8_0, Q4_0, Q4_K, Q6_K, or F32 / F16 / BF16 with
// cols a multiple of 16. InvalidArgument for other types, layouts or
// inconsistent shapes.
absl::StatusOr<PackedMatrix> PackForMatMul(const WeightView& w);

// The bytes PackForMatMul(w) allocates when it succeeds.
uint64_t PackedMatrixBytes(const WeightView& w);

// Reusable per-thread-pool scratch (quantized activations); sized on first
// use and grown only when a larger step arrives, so steady-state calls do
// not allocate.
struct MatMulScratch {
  std::vector<uint8_t> bytes;
};

// y[t, r] = sum_c w[r, c] * x[t, c], for t in [0, n_tokens).
//   x: (n_tokens, w.cols) float, row-major
//   y: (n_tokens, w.rows) float, row-major; must not alias x
// Work is split over `pool`'s threads by output rows. InvalidArgument when
// the type has no kernel or the shapes disagree; nothing is written then.
absl::Status MatMul(const WeightView& w, const float* x, int64_t n_tokens,
                    float* y, ThreadPool& pool, MatMulScratch& scratch);

// Several matrices over the same activations (Q, K and V; gate and up):
// y_i = W_i x for each i, with x quantized once and one pass of the thread
// pool over all their rows; the same bits as one MatMul per matrix. The
// matrices share type and cols (InvalidArgument otherwise, as for MatMul's
// own checks, or for outputs that overlap); at most 8.
absl::Status MatMulShared(absl::Span<const WeightView> ws, const float* x,
                          int64_t n_tokens, absl::Span<float* const> ys,
                          ThreadPool& pool, MatMulScratch& scratch);

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KERNELS_MATMUL_H_
