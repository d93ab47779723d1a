#ifndef PACELINE_ENGINE_CPU_CPU_ENGINE_H_
#define PACELINE_ENGINE_CPU_CPU_ENGINE_H_

// The CPU backend of Engine (engine.h): a Llama-family forward pass
// (llama / Mistral, qwen2, qwen3) over a batch of sequences with a paged KV
// cache.
//
// Per step, with n = the step's tokens:
//   x = embedding rows of the tokens
//   per layer, its architecture's program (model/layer_program.h; the
//   operations in cpu_layer.cc); for the four architectures today:
//     h = RMSNorm(x) · attn_norm
//     q, k, v = h Wq, h Wk, h Wv (+ biases: qwen2)
//     q, k = per-head RMSNorm (qwen3); RoPE at each token's position
//     K/V of every token -> its slot in its sequence's blocks
//     a = paged causal attention (GQA)
//     x += a Wo
//     h = RMSNorm(x) · ffn_norm
//     x += (silu(h Wgate) * (h Wup)) Wdown
//       (qwen3moe: x += the routed experts' sum instead, moe_ffn.h)
//   logits = RMSNorm(x[last token of each slice that wants them]) Wout
//   hidden = RMSNorm(x[last num_hidden tokens of each slice]) (embeddings)
// Every matmul reads its weights once for all n tokens, from copies packed
// at creation into the kernels' panel layout where that runs faster on this
// CPU (CpuEngineOptions::pack_weights). Buffers are sized at creation for
// max_tokens_per_step, so a step allocates nothing.
//
// Thread-safety: as Engine; the engine's thread pool runs inside Forward.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/kv_cache.h"
#include "engine/cpu/moe_ffn.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/thread_pool.h"
#include "engine/engine.h"
#include "engine/model/kv_layout.h"
#include "engine/model/layer_program.h"
#include "engine/model/weights.h"

namespace paceline::engine::cpu {

// The CPU engine's KV cache type when none is asked for.
inline constexpr GgmlType kDefaultKvType = GgmlType::kF16;

struct CpuEngineOptions {
  int32_t block_size = 16;  // tokens per KV block, 1 .. 256
  // KV blocks in the pool; 0 = enough for one sequence of the model's full
  // context (BlocksToHold of the layout, model/kv_layout.h). The pool is
  // reserved, not touched, so unused blocks cost address space only.
  int32_t num_blocks = 0;
  int32_t max_tokens_per_step = 512;
  // The KV cache's element type (kv_cache.h): kF16, the default (llama.cpp's
  // too; F16 attention, kernels/attention.h); kF32 (twice the bytes per
  // token); or kQ8_0 (ggml's 34-byte blocks of 32, head size a multiple of
  // 32). Others are InvalidArgument. BackendOptions' unset kv_type is this
  // default.
  GgmlType kv_type = kDefaultKvType;
  int num_threads = 0;  // 0 = one per hardware thread
  // Sliding-window layers keep their K/V in windowed groups whose blocks
  // the pager gives back once out of every window (model/kv_layout.h):
  // then a step brings one block table per group (kv_group_windows(),
  // SequenceSlice::group_tables), as the scheduler does. Off, the default
  // for callers that hand the engine plain tables (tests, benchmarks): one
  // group, every layer's whole history. A model without sliding layers
  // has one group either way. MakeBackend (the daemon, the CLI) turns it
  // on.
  bool kv_window_release = false;
  // Repack matrices that run faster in the kernels' own layout on this CPU
  // (MatMulPrefersPanels: with AVX-512, Q8_0, Q4_0, Q4_K and Q6_K (VNNI)
  // and the float types)
  // into copies the engine owns. Lossless: the logits are bit for bit those
  // of the file's layout. Costs the packed matrices' bytes again in memory.
  bool pack_weights = true;
  // Recurrent-state slots of a hybrid model (Engine::num_state_slots; each
  // RecurrentStateBytes, reserved and touched only as sequences use them);
  // 0 = 16. Ignored (none) for a model without DeltaNet layers.
  int32_t num_state_slots = 0;
};

class CpuEngine final : public Engine {
 public:
  // InvalidArgument for out-of-range options; ResourceExhausted when the
  // KV pool cannot be allocated.
  static absl::StatusOr<std::unique_ptr<CpuEngine>> Create(
      std::shared_ptr<const ModelWeights> weights,
      const CpuEngineOptions& options);

  // Bytes Create will allocate for packed matrices (CpuEngineOptions::
  // pack_weights) on this CPU: what the engine holds beyond the weights and
  // the KV pool.
  static uint64_t PackedBytes(const ModelWeights& weights,
                              const CpuEngineOptions& options);
  // Every matrix the engine multiplies by, as the file holds it (for
  // ChooseKernels, kernel_choice.h).
  static std::vector<WeightView> Matrices(const ModelWeights& weights);

  CpuEngine(const CpuEngine&) = delete;
  CpuEngine& operator=(const CpuEngine&) = delete;
  ~CpuEngine() override;

  const ModelConfig& config() const override { return weights_->config(); }
  int32_t block_size() const override { return options_.block_size; }
  int32_t num_blocks() const override { return options_.num_blocks; }
  int32_t max_tokens_per_step() const override {
    return options_.max_tokens_per_step;
  }
  std::vector<int32_t> kv_group_windows() const override {
    return kv_layout_.Windows();
  }
  const KvLayout& kv_layout() const { return kv_layout_; }
  int num_threads() const { return pool_.num_threads(); }
  const ModelWeights& weights() const { return *weights_; }
  // Bytes of the matrices packed at creation (0 when none were).
  size_t packed_bytes() const { return packed_bytes_; }
  // The matmul kernels chosen at creation for this CPU, per weight type
  // and layout, for the start-up log: e.g. "Q4_K x84 avx512-vnni, Q8_K
  // activations, 16-row panels; Q6_K x1 ...".
  const std::string& kernel_summary() const { return kernel_summary_; }
  bool returns_hidden() const override { return true; }
  // Weight bytes the last Forward's matmuls read: every matrix once, but
  // of a MoE layer's experts only those its tokens selected.
  uint64_t last_step_weight_bytes() const { return last_step_weight_bytes_; }

  absl::Status Forward(const ForwardBatch& batch,
                       absl::Span<float> logits) override;
  absl::Status CopyBlocks(absl::Span<const kvpager::BlockCopy> copies) override;
  int32_t num_state_slots() const override { return limits_.num_state_slots; }
  absl::Status CopyStates(absl::Span<const kvpager::StateCopy> copies) override;

 private:
  CpuEngine(std::shared_ptr<const ModelWeights> weights,
            const CpuEngineOptions& options, KvLayout layout,
            std::unique_ptr<KvCache> cache, std::vector<LayerProgram> programs);

  // The buffers of gated attention, a shared expert and DeltaNet layers
  // (the hybrids), and the state slots; nothing for other models.
  void AllocateHybridBuffers();
  // Checks the batch and fills positions_, token_table_, block_tables_.
  absl::Status Prepare(const ForwardBatch& batch, absl::Span<float> logits);
  // The layer's program, an operation at a time (cpu_layer.cc).
  absl::Status RunLayer(int64_t layer, int64_t n);
  absl::Status RunOp(const Op& op, int64_t layer, int64_t n);
  void RmsNormRows(const Op& op, int64_t layer, int64_t n);
  absl::Status QkvRope(const Op& op, int64_t layer, int64_t n);
  void Attention(const Op& op, int64_t layer, int64_t n);
  void SplitQueryGate(int64_t b, int64_t e);
  // A Gated DeltaNet layer (kDeltaNet; delta_net.h) of every slice.
  absl::Status DeltaNet(const Op& op, int64_t layer, int64_t n);
  // Slot `slot`'s state in DeltaNet layer `layer`: (conv_kernel - 1,
  // conv_dim) convolution inputs, then (v_heads, d, d) matrices.
  float* State(int32_t slot, int64_t layer);
  // The shared expert's gated output added to out (ModelConfig::
  // n_ff_shexp).
  absl::Status SharedExpert(int64_t layer, const float* src, int64_t n,
                            float* out);
  void AddRows(Buf from, Buf to, int64_t n);  // to += from
  // An accumulating op computes into proj_, then adds it to its dst.
  absl::Status FeedForward(const Op& op, int64_t layer, int64_t n);
  absl::Status FeedForwardInto(const Op& op, int64_t layer, int64_t n,
                               float* out);
  // A step buffer (Buf) and a layer's weights (Weight) by name.
  float* Rows(Buf buf);
  const std::vector<float>& NormWeights(Weight w, int64_t layer) const;
  const WeightView& Matrix(Weight w, int64_t layer) const;
  // fn(begin, end) over row ranges of [0, n_rows); on the pool when the
  // rows hold enough elements to pay for waking it.
  template <typename Fn>
  void ForRows(int64_t n_rows, int64_t row_width, Fn&& fn);
  void WriteKv(int64_t layer, int64_t n);
  // The slices' hidden rows (SequenceSlice::num_hidden) into batch.hidden.
  void WriteHidden(const ForwardBatch& batch);
  absl::Status ComputeLogits(const ForwardBatch& batch,
                             absl::Span<float> logits);
  absl::Status MatMul(const WeightView& w, const float* x, int64_t n, float* y);
  // y_i = W_i x for matrices sharing x (MatMulShared when they can).
  absl::Status MatMuls(std::initializer_list<WeightView> ws, const float* x,
                       int64_t n, std::initializer_list<float*> ys);

  // The matrices MatMul reads: the weights' views, or packed copies.
  struct LayerMatrices {
    WeightView q, k, v, o, gate, up, down;  // gate, up, down empty for MoE
    MoeLayerMatrices moe;                   // empty for a dense FFN
    WeightView gate_shexp, up_shexp, down_shexp;  // empty without
    // A DeltaNet layer's (q, k, v, o empty then); else empty.
    WeightView ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_ba, ssm_out;
  };
  absl::Status PackMatrices();
  // Every non-empty view in matrices_ and output_.
  std::vector<WeightView*> MatrixSlots();
  static std::string KernelSummary(const std::vector<WeightView*>& slots);

  // Constant after construction (PackMatrices runs in Create).
  const std::shared_ptr<const ModelWeights> weights_;
  const std::vector<LayerProgram> programs_;  // (n_layers)
  std::vector<LayerMatrices> matrices_;       // (n_layers)
  WeightView output_;                         // (n_vocab, n_embd)
  std::vector<PackedMatrix> packed_;          // owns what the views point into
  size_t packed_bytes_ = 0;
  std::string kernel_summary_;
  const CpuEngineOptions options_;
  // The layers' KV groups and slots: the cache holds kv_layout_.slots
  // layers per block, layer l in slot slot_of_layer[l] of its group's
  // blocks.
  const KvLayout kv_layout_;
  BatchLimits limits_;  // what Prepare checks a step against
  const RopeParams rope_;
  const RopeParams rope_swa_;  // the sliding layers' (ModelConfig)
  const bool has_sliding_;     // sliding layers rope apart: rope_swa_ too
  const std::unique_ptr<KvCache> cache_;
  ThreadPool pool_;
  std::unique_ptr<MoeFfn> moe_;  // null for a dense model
  uint64_t dense_bytes_ = 0;     // MoE: the matrices other than experts
  uint64_t last_step_weight_bytes_ = 0;

  // Step scratch, sized for T = max_tokens_per_step; q_dim = n_heads *
  // head_dim, kv_dim = n_kv_heads * head_dim.
  MatMulScratch matmul_scratch_;
  std::vector<float> x_;              // (T, n_embd) the residual stream
  std::vector<float> h_;              // (T, n_embd) normed input of a sub-layer
  std::vector<float> q_;              // (T, q_dim)
  std::vector<float> k_;              // (T, kv_dim)
  std::vector<float> v_;              // (T, kv_dim)
  std::vector<float> att_;            // (T, q_dim) attention output
  std::vector<float> proj_;           // (T, n_embd) o-proj / down-proj output
  std::vector<float> gate_;           // (T, n_ff)
  std::vector<float> up_;             // (T, n_ff)
  std::vector<float> cos_;            // (T, rope_dim / 2)
  std::vector<float> sin_;            // (T, rope_dim / 2)
  std::vector<float> cos_swa_;        // (T, rope_dim / 2) when has_sliding_
  std::vector<float> sin_swa_;        // (T, rope_dim / 2) when has_sliding_
  std::vector<int32_t> positions_;    // (T) each token's position
  std::vector<int32_t> token_table_;  // (T) each token's slice
  // (groups, slices) each slice's table of each KV group
  std::vector<std::vector<absl::Span<const int32_t>>> block_tables_;
  std::vector<SequenceSlice> slices_;  // the step's (views unused)
  // Gated attention (ModelConfig::attn_output_gate), else empty.
  std::vector<float> qg_;         // (T, 2 q_dim) attn_q's query and gate rows
  std::vector<float> attn_gate_;  // (T, q_dim)
  std::vector<float> shexp_;      // (T, n_embd) when n_ff_shexp
  // Hybrid models, else empty: the state slots (uninitialised until a
  // slice starting at position 0 zeroes its slot), each layer's index
  // among the DeltaNet layers (-1 for attention), and DeltaNet scratch.
  std::unique_ptr<float[]> states_;
  int64_t state_floats_ = 0;              // per slot, every DeltaNet layer
  std::vector<int64_t> recurrent_index_;  // (n_layers)
  std::vector<float> ssm_qkv_;            // (T, conv_dim) projections
  std::vector<float> ssm_conv_;           // (T, conv_dim) after the convolution
  std::vector<float> ssm_z_;              // (T, inner)
  std::vector<float> ssm_ba_;             // (2T, v_heads): n betas, n alphas
  std::vector<float> ssm_o_;  // (T, inner) gated, normed head outputs
  std::vector<float> last_;   // (T, n_embd) rows that need logits
};

template <typename Fn>
void CpuEngine::ForRows(int64_t n_rows, int64_t row_width, Fn&& fn) {
  // Small steps (decode) stay on this thread: waking the pool costs more.
  constexpr int64_t kMinParallelElements = int64_t{1} << 15;
  if (n_rows * row_width < kMinParallelElements) {
    fn(int64_t{0}, n_rows);
  } else {
    pool_.ParallelFor(n_rows, fn);
  }
}

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_CPU_ENGINE_H_
