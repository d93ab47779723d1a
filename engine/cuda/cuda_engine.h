#ifndef PACELINE_ENGINE_CUDA_CUDA_ENGINE_H_
#define PACELINE_ENGINE_CUDA_CUDA_ENGINE_H_

// The CUDA backend of Engine (engine.h): the CPU engine's forward pass
// (cpu/cpu_engine.h: llama / Mistral, qwen2, qwen3, qwen3moe, gemma3,
// gpt-oss and the hybrids qwen35, qwen35moe, qwen3next) on
// one device, with the KV block pool in device memory.
//
// Per step, with n = the step's tokens (T = the device dtype: F32, F16 or
// BF16, from the weights; KV = the cache's type: CudaEngineOptions::
// kv_dtype, T unless asked):
//   x = embedding rows (float)     LaunchEmbedding / LaunchQuantizedEmbedding
//       (times ModelConfig::embed_scale when it is not 1: LaunchAffine)
//   per layer, its architecture's program (model/layer_program.h; the
//   operations in cuda_layer.cc); for llama, qwen2 and qwen3:
//     h = RMSNorm(x) · attn_norm                (T)      LaunchRmsNorm
//     qkv = h [Wq; Wk; Wv]                      (float)  cuBLAS, one GEMM
//     bias, Q/K norm, RoPE; K/V -> paged slots  (KV)     LaunchQkvRope
//     a = paged causal attention (GQA)          (T)      LaunchPagedAttention
//         (query tiles of 16 tokens when the step is mostly prefill, one
//         block per token otherwise)
//     x += a Wo                                          cuBLAS, beta = 1
//     h = RMSNorm(x) · ffn_norm                 (T)
//     gu = h [Wgate; Wup]                       (float)  cuBLAS, one GEMM
//     s = silu(gu_gate) * gu_up                 (T)      LaunchSwiGlu
//     x += s Wdown                                       cuBLAS, beta = 1
//     (qwen3moe instead, cuda_engine_moe.cc:
//     r = h Wrouter; top-k per token            (float)  LaunchMoeRoute
//     expert ids -> host, sync; rows grouped by expert on the host
//     per selected expert: gather its rows, gu = x_e [Wg|Wu]_e, swiglu,
//       y_e = s_e Wdown_e                                cuBLAS / GEMV
//     x += sum over rank of w * y               (float)  LaunchMoeCombine
//     The host round trip per layer is why MoE steps run without CUDA
//     graphs.)
//     gemma3: the sliding layers' RoPE from a second table (base
//     rope_freq_base_swa, unscaled) and attention over their last
//     `window` positions; attention scaled by ModelConfig::attention_scale;
//     the sub-layers' outputs into p instead of x (beta = 0), then
//       p = RMSNorm(p) · post_norm; x += p; h = RMSNorm(x) · next norm
//                                               (T)      LaunchAddRmsNorm
//     in one kernel; s = gelu(gu_gate) * gu_up   (T)      LaunchGeluTanhGlu
//     gpt-oss: Q/K/V biases (as qwen2's), YaRN RoPE, attention with each
//     head's sink logit (and windows), the output's bias after its GEMM
//     (LaunchAddRowBias); the MoE with the router's and experts' biases
//     and SwiGLU-OAI (LaunchSwigluOai); MXFP4 experts stay MXFP4.
//     The hybrids (qwen35, qwen35moe, qwen3next; cuda_delta_net.cc):
//     gated attention's Wq rows hold per head the query then a gate
//     (split by LaunchSplitQueryGate; the attention output times
//     sigmoid(gate), LaunchSigmoidGate); a Gated DeltaNet layer is
//       p = h [Wqkv; Wz; Wbeta; Walpha]         (float)  cuBLAS, one GEMM
//       causal conv + SiLU, per-slot state      (float)  LaunchDeltaNetConv
//       delta rule + gated RMSNorm per value    (T)      LaunchDeltaNetRule
//         head, a token at a time, state matrices float32 in the slot
//       p = o Wssm_out; x += p                           cuBLAS; AddRmsNorm
//     and the MoE adds a shared expert times sigmoid(h . w_gate)
//                                                        LaunchSigmoidGatedAdd
//   hidden = RMSNorm(x[last num_hidden tokens of each slice]) (embeddings:
//     the x rows copied to the caller's host span, normalized there)
//   logits = RMSNorm(x[last token of each slice that wants them]) Wout
//     (float, copied to the caller's host span; or, in ForwardAndSample,
//     rows sampled on the device by LaunchSampleRows and only token ids
//     copied)
// GEMMs take T operands and accumulate in float (cublasGemmEx,
// CUBLAS_COMPUTE_32F; F32 models use plain FP32, no TF32).
//
// Weights are uploaded once at creation. T is F32 when every matrix is
// F32, BF16 when every matrix is BF16, F16 otherwise. Q8_0, Q4_0, K-quant
// (Q2_K .. Q6_K) and MXFP4 matrices stay in their file type
// (kernels/quantized_matmul.h:
// a dequantizing GEMV for steps of up to 8 tokens, dequantize-then-cuBLAS
// above); a fused group (Wq|Wk|Wv, Wgate|Wup) whose parts differ in type is
// stored as runs of same-typed parts, one GEMV or GEMM each. The token
// embedding keeps its file type too (rows dequantized as they are gathered)
// unless it is also the output head. Everything else (F32 in a mixed model, a
// tied embedding of another type) is converted to T at load, with one line per
// conversion kind on stderr, and one line gives the weights' device bytes by
// type. The KV pool (block layout and row encodings as cpu/kv_cache.h, rows of
// KV; a block holds one KV group's layer slots, model/kv_layout.h: every
// layer without kv_window_release), the step workspace (sized for
// max_tokens_per_step) and the step's metadata buffers are allocated up front
// with cudaMalloc / cudaMallocHost: a step allocates nothing, except that the
// block-table buffer grows (rarely, logged) when a step's tables outgrow it.
// All work runs on one stream; Forward returns after the logits are on the
// host. ForwardAndSample samples the rows it is asked to on the device
// (kernels/sampling.h, after each chunk of logits) and copies back their token
// ids and only the other rows' logits.
//
// Results match the CPU engine with the same KV type within rounding
// (exactly the same math, in float for F32 models; the K/V bytes written
// are the CPU engine's, but attention reads them as floats where the CPU's
// F16 attention also rounds q and the weights to F16: attention.h);
// batch invariance holds within rounding only:
// cuBLAS picks its algorithm by the step's shape, and attention splits
// long contexts when a step has few (token, head) pairs.
//
// Thread-safety: as Engine. The engine makes its device current on the
// calling thread in every call.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/kernels/delta_net.h"
#include "engine/cuda/kernels/quantized_matmul.h"
#include "engine/engine.h"
#include "engine/gguf/ggml_type_layout.h"
#include "engine/model/kv_layout.h"
#include "engine/model/layer_program.h"
#include "engine/model/rope_table.h"
#include "engine/model/weights.h"

namespace paceline::engine::cuda {

struct CudaEngineOptions {
  int device = 0;
  int32_t block_size = 16;  // tokens per KV block, 1 .. 256
  // KV blocks in the pool; 0 = enough for one sequence of the model's full
  // context. Allocated (device memory) at creation.
  int32_t num_blocks = 0;
  // The KV cache's element type (kernels/kv_dtype.cuh); unset = the device
  // dtype. F32, F16 and Q8_0 go with any device dtype (Q8_0 needs a head size
  // that is a multiple of 32), BF16 only with BF16 weights: CheckKvDtype.
  std::optional<GgmlType> kv_dtype;
  int32_t max_tokens_per_step = 512;  // 1 .. 65535
  // Sliding windows give their KV blocks back (model/kv_layout.h, as
  // cpu::CpuEngineOptions::kv_window_release): a block holds one KV group's
  // layers, kv_group_windows() names the groups, and a step brings one
  // block table per group (SequenceSlice::group_tables). Off: one group of
  // every layer, the plain block_table.
  bool kv_window_release = false;
  // Replay steps of up to kMaxGraphTokens tokens (decode) as CUDA graphs:
  // one graph per (tokens, logit rows, attention split plan), captured the
  // second time that shape runs. The kernels are the same either way, so
  // the results are identical; a failed capture turns graphs off (logged).
  bool cuda_graphs = true;
  // Recurrent-state slots of a hybrid model (Engine::num_state_slots; each
  // ModelConfig::RecurrentStateBytes of device memory, allocated at
  // creation); 0 = 16. Ignored (none) for a model without DeltaNet layers.
  int32_t num_state_slots = 0;
};

// What an engine for given weights holds on the device, known before it is
// created: for sizing the KV pool (num_blocks) from the free device memory.
struct CudaEngineFootprint {
  GgmlType dtype = GgmlType::kF16;     // weights and activations
  GgmlType kv_dtype = GgmlType::kF16;  // the KV cache
  uint64_t weight_bytes = 0;           // every uploaded matrix
  uint64_t kv_bytes_per_token = 0;     // K and V rows, attention layers
  // The recurrent-state slots (options.num_state_slots of a hybrid model).
  uint64_t state_bytes = 0;
};

class CudaEngine final : public Engine {
 public:
  // For `options.kv_dtype` (only that field is read), whether or not
  // CheckKvDtype accepts it.
  static CudaEngineFootprint Footprint(const ModelWeights& weights,
                                       const CudaEngineOptions& options = {});
  // InvalidArgument, naming the head size or the device dtype, when this
  // model's K/V cannot be kept as `kv_dtype`: Q8_0 with a head size that is
  // not a multiple of 32, or BF16 beside non-BF16 weights.
  static absl::Status CheckKvDtype(const ModelWeights& weights,
                                   GgmlType kv_dtype);
  // Free and total memory of `device` now (cudaMemGetInfo).
  static absl::Status DeviceMemory(int device, uint64_t* free_bytes,
                                   uint64_t* total_bytes);

  // FailedPrecondition "no CUDA device" when the machine has none (or not
  // `options.device`); InvalidArgument for out-of-range options, a head
  // size over 512 or a KV type CheckKvDtype refuses; Internal (with
  // file:line) for CUDA / cuBLAS failures, including running out of device
  // memory for weights, KV pool or workspace.
  static absl::StatusOr<std::unique_ptr<CudaEngine>> Create(
      std::shared_ptr<const ModelWeights> weights,
      const CudaEngineOptions& options);
  // Unimplemented naming the layer and operation when a program holds one
  // this engine does not run (cuda_layer.cc); Create checks the model's.
  static absl::Status CheckPrograms(const std::vector<LayerProgram>& programs);

  CudaEngine(const CudaEngine&) = delete;
  CudaEngine& operator=(const CudaEngine&) = delete;
  ~CudaEngine() override;

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
  GgmlType dtype() const { return dtype_; }
  GgmlType kv_dtype() const { return kv_dtype_; }
  // Device bytes of the uploaded weights and of the KV pool.
  uint64_t weight_bytes() const { return weight_bytes_; }
  uint64_t kv_pool_bytes() const { return kv_pool_.bytes(); }
  // Weight bytes one decode step reads (every matrix once): the numerator
  // of the bandwidth roofline.
  uint64_t MatMulBytesPerToken() const;

  absl::Status Forward(const ForwardBatch& batch,
                       absl::Span<float> logits) override;
  // Rows sampled in the engine are sampled on the device
  // (kernels/sampling.h); only their token ids and the other rows' logits
  // are copied back.
  bool samples_on_device() const override { return true; }
  bool returns_hidden() const override { return true; }
  absl::Status ForwardAndSample(
      const ForwardBatch& batch, absl::Span<const RowSampling> sampling,
      absl::Span<int32_t> tokens, absl::Span<float> logits,
      const std::function<void()>& before_sampling = {}) override;
  absl::Status CopyBlocks(absl::Span<const kvpager::BlockCopy> copies) override;
  int32_t num_state_slots() const override { return num_state_slots_; }
  // Device-to-device copies on the engine's stream; returns once done.
  absl::Status CopyStates(absl::Span<const kvpager::StateCopy> copies) override;

 private:
  // Rows [row_begin, row_begin + rows) of a Matrix in one storage: T, or
  // quantized blocks (kernels/quantized_matmul.h) as the file has them.
  struct MatrixPart {
    DeviceBuffer data;
    bool quantized = false;
    GgmlType quant = GgmlType::kQ8_0;
    int64_t row_begin = 0;
    int64_t rows = 0;
  };
  // A weight matrix on the device, row-major (rows, cols), as parts in row
  // order: one per run of same-typed matrices of a fused group (Q4_K_M's
  // Wq|Wk|Wv is Q4_K Wq|Wk, then Q6_K Wv), so each keeps its file type.
  struct Matrix {
    std::vector<MatrixPart> parts;
    int64_t rows = 0;
    int64_t cols = 0;
  };
  struct Layer {
    DeviceBuffer attn_norm;       // (n_embd) float
    Matrix qkv;                   // (q_dim + 2 kv_dim, n_embd): Wq | Wk | Wv
    DeviceBuffer qkv_bias;        // (q_dim + 2 kv_dim) float, qwen2 only
    DeviceBuffer q_norm;          // (head_dim) float, qwen3 only
    DeviceBuffer k_norm;          // (head_dim) float, qwen3 only
    Matrix attn_output;           // (n_embd, q_dim)
    DeviceBuffer ffn_norm;        // (n_embd) float
    DeviceBuffer post_attn_norm;  // (n_embd) float, gemma3 only
    DeviceBuffer post_ffn_norm;   // (n_embd) float, gemma3 only
    DeviceBuffer o_bias;          // (n_embd) float, gpt-oss only
    DeviceBuffer attn_sinks;      // (n_heads) float, gpt-oss only
    Matrix gate_up;               // (2 n_ff, n_embd): Wgate | Wup
    Matrix ffn_down;              // (n_embd, n_ff)
    // Mixture of experts (qwen3moe) in place of gate_up / ffn_down.
    Matrix router;                       // (n_expert, n_embd)
    std::vector<Matrix> expert_gate_up;  // (n_expert) of (2 n_ff_exp, n_embd)
    std::vector<Matrix> expert_down;     // (n_expert) of (n_embd, n_ff_exp)
    // The MoE biases (gpt-oss only): the router's (n_expert) float; each
    // expert's gate | up (n_expert, 2 n_ff_exp) and down (n_expert,
    // n_embd) float.
    DeviceBuffer router_bias;
    DeviceBuffer expert_gate_up_bias;
    DeviceBuffer expert_down_bias;
    // The shared expert (ModelConfig::n_ff_shexp > 0), else empty.
    Matrix shexp_gate_up;     // (2 n_ff_shexp, n_embd): Wgate | Wup
    Matrix shexp_down;        // (n_embd, n_ff_shexp)
    DeviceBuffer shexp_gate;  // (n_embd) float, ffn_gate_inp_shexp
    // A Gated DeltaNet layer (ModelConfig::IsRecurrentLayer; qkv,
    // attn_output and the Q/K norms empty then), else empty. conv =
    // ssm_conv_dim(), inner = ssm_value_dim(), nv = ssm_v_heads.
    // (conv + inner + 2 nv, n_embd): Wqkv | Wz | Wbeta | Walpha (or Wba)
    Matrix ssm_in;
    DeviceBuffer ssm_conv1d;   // (conv, conv_kernel) float
    DeviceBuffer ssm_a;        // (nv) float
    DeviceBuffer ssm_dt_bias;  // (nv) float
    DeviceBuffer ssm_norm;     // (ssm_state_size) float
    Matrix ssm_out;            // (n_embd, inner)
  };
  struct Resources;  // stream, cuBLAS handle, captured graphs
  // Step metadata sections (int32 offsets in units of Tk); each KV group
  // g has its slots and table offsets (group 0 at kSlots, kTableOffsets,
  // the others from kGroupSections on: SlotsSection, OffsetsSection), then
  // the block tables (TablesSection).
  enum MetaSection : int64_t {
    kTokens = 0,
    kPositions = 1,
    kSlots = 2,
    kTableOffsets = 3,
    kLogitRows = 4,
    kTiles = 5,  // 1 + 2 Tk entries: count, then (first token, tokens) pairs
    kGroupSections = 8,
  };
  static int64_t SlotsSection(int64_t g) {
    return g == 0 ? kSlots : kGroupSections + 2 * (g - 1);
  }
  static int64_t OffsetsSection(int64_t g) {
    return g == 0 ? kTableOffsets : kGroupSections + 2 * (g - 1) + 1;
  }
  // A hybrid model's slices, kDeltaNetSliceInts int32 each
  // (kernels/delta_net.h): kDeltaNetSliceInts sections; none without
  // DeltaNet layers.
  int64_t SlicesSection() const {
    return kGroupSections + 2 * (kv_layout_.num_groups() - 1);
  }
  int64_t TablesSection() const {
    return SlicesSection() + (num_state_slots_ > 0 ? kDeltaNetSliceInts : 0);
  }
  static constexpr int64_t kMaxGraphTokens = 256;

  CudaEngine(std::shared_ptr<const ModelWeights> weights,
             const CudaEngineOptions& options, GgmlType dtype,
             GgmlType kv_dtype, std::vector<LayerProgram> programs,
             KvLayout kv_layout);
  absl::Status Init();
  absl::Status UploadWeights();
  // Uploads the row-wise concatenation of `parts` (same cols) into `m`.
  absl::Status UploadGroup(const std::vector<const WeightView*>& parts,
                           Matrix* m);
  // Writes `w` as w.rows rows of T at `dst` (device).
  absl::Status UploadMatrix(const WeightView& w, void* dst);
  absl::Status UploadFloats(const std::vector<float>& v, DeviceBuffer* out);
  // table.inv_freq as doubles into `inv_freq`.
  absl::Status UploadRopeTable(const RopeTable& table, DeviceBuffer* inv_freq);
  absl::Status AllocateWorkspace();
  // Checks the batch and fills the pinned metadata; returns the number of
  // block-table entries written.
  absl::Status Prepare(const ForwardBatch& batch, absl::Span<float> logits);
  // The step's device work up to the logits: embedding, layers, and (for
  // rows <= logit_chunk_rows_) the logits into logits_. Captured as a graph
  // or run directly.
  absl::Status RunStep(int64_t n, int64_t rows);
  // RunStep through a graph when one applies; false in *ran when not.
  absl::Status RunStepGraph(int64_t n, int64_t rows, bool* ran);
  // The layer's program, an operation at a time (cuda_layer.cc), except
  // that a residual add runs in one kernel with the norms around it.
  absl::Status RunLayer(int64_t layer, int64_t n);
  absl::Status RunOp(const Op& op, int64_t layer, int64_t n);
  // An add (dst += src, both float) with, when given, the in-place norm
  // of its source before it and the norm of its destination into h after
  // it: one LaunchAddRmsNorm.
  absl::Status Residual(const Op* post, const Op& add, const Op* pre,
                        int64_t layer, int64_t n);
  absl::Status QkvRope(const Op& op, int64_t layer, int64_t n);
  absl::Status Attention(const Op& op, int64_t layer, int64_t n);
  absl::Status FeedForward(const Op& op, int64_t layer, int64_t n);
  // A Gated DeltaNet layer of every slice (cuda_delta_net.cc).
  absl::Status DeltaNet(const Op& op, int64_t layer, int64_t n);
  // The MoE's gated shared expert on h_, added into x_ (cuda_delta_net.cc).
  absl::Status SharedExpert(int64_t layer, int64_t n);
  // A DeltaNet layer's weights; the hybrids' workspace and state slots
  // (cuda_delta_net.cc).
  absl::Status UploadDeltaNet(const LayerWeights& lw, Layer* l);
  absl::Status AllocateHybridWorkspace();
  // out = act(gate_up's gate half, its up half) (kernels/swiglu.h):
  //   gate_up: (n, 2 ff) float; out: (n, ff) T
  absl::Status Activate(FfnActivation activation, const float* gate_up,
                        int64_t n, int64_t ff, void* out);
  // A step buffer's rows (Buf::kX and kProj float, kH and kAtt T).
  void* Rows(Buf buf) const;
  float* FloatRows(Buf buf) const { return static_cast<float*>(Rows(buf)); }
  const DeviceBuffer& NormWeight(Weight w, int64_t layer) const;
  // The MoE FFN of `layer` on h_, added into x_ (cuda_engine_moe.cc).
  absl::Status RunMoe(int64_t layer, int64_t n);
  // Fills moe_rows_host_ and moe_offsets_ from moe_route_host_'s experts.
  void GroupByExpert(int64_t n);
  absl::Status UploadMoe(const LayerWeights& lw, Layer* l);
  absl::Status AllocateMoeWorkspace();
  cudaStream_t stream() const;  // res_->stream, for code outside the .cc
  // Final norm and output GEMM of rows [begin, begin + count) into logits_.
  absl::Status LogitsChunk(int64_t begin, int64_t count);
  // Prepare and RunStep(Graph): the step up to its logits.
  absl::Status RunForward(const ForwardBatch& batch, absl::Span<float> logits);
  // The slices' hidden rows (SequenceSlice::num_hidden): CopyHidden queues
  // their x rows' copy into batch.hidden; once the stream has synchronized,
  // NormalizeHidden applies the output norm there (the rows are few: one
  // per embedding, or a prompt's for mean pooling).
  absl::Status CopyHidden(const ForwardBatch& batch);
  void NormalizeHidden(const ForwardBatch& batch) const;
  // Every logit row to `logits`; or, with `sampling` (one entry per row,
  // already in sampling_device_), the in_engine rows sampled into
  // tokens_device_ and only the others' logits copied.
  // Copies `sampling` into sampling_host_ with each row's mask staged in
  // masks_host_ and pointed at its place in masks_device_, then uploads
  // both.
  absl::Status UploadSampling(absl::Span<const RowSampling> sampling);
  absl::Status ComputeLogits(int64_t rows, absl::Span<float> logits,
                             const RowSampling* sampling = nullptr);
  // y (n, ldy) float, columns [0, out_rows) = x (n, in_cols) T · W^T,
  // W (out_rows, in_cols) T; y = beta * y + ... (beta 0 or 1).
  absl::Status Gemm(const void* w, int64_t out_rows, int64_t in_cols,
                    const void* x, int64_t n, float* y, int64_t ldy,
                    float beta);
  // The same for a Matrix of any storage, y (n, w.rows): one GEMV or GEMM
  // per part.
  absl::Status Gemm(const Matrix& w, const void* x, int64_t n, float* y,
                    float beta);
  // One line on stderr: the device bytes of the weights by storage type,
  // beside the bytes the model holds them in.
  void LogWeightBytes() const;
  // Bytes of one block of one layer slot: K and V rows of every KV head.
  size_t KvBlockBytes() const;
  // The layer's blocks: its slot's (num_blocks) blocks of the pool. An
  // attention layer's only: a DeltaNet layer has no slot (-1).
  void* KvLayer(int64_t layer) const;

  // Constant after construction.
  const std::shared_ptr<const ModelWeights> weights_;
  const std::vector<LayerProgram> programs_;  // (n_layers)
  // The layers' KV groups and slots: a block holds kv_layout_.slots layers
  // of one group (one group of every layer, slot = layer, without release).
  const KvLayout kv_layout_;
  const CudaEngineOptions options_;
  const GgmlType dtype_;
  const GgmlType kv_dtype_;
  // State slots (options_.num_state_slots or 16 for a hybrid model, else
  // 0), and each layer's index among the DeltaNet layers (-1: attention).
  const int32_t num_state_slots_;
  const std::vector<int64_t> recurrent_index_;  // (n_layers)
  std::unique_ptr<Resources> res_;
  std::vector<Layer> layers_;
  DeviceBuffer token_embd_;  // (n_vocab, n_embd) T or embd_quant_
  bool embd_quantized_ = false;
  GgmlType embd_quant_ = GgmlType::kQ8_0;
  Matrix output_;             // (n_vocab, n_embd); empty when tied
  bool output_tied_ = false;  // the output matrix is token_embd_
  DeviceBuffer output_norm_;  // (n_embd) float
  DeviceBuffer inv_freq_;     // (rope_dim / 2) double
  double rope_mscale_ = 1.0;  // RopeTable::mscale
  // The sliding layers' RoPE (Op::local_rope; rope_freq_base_swa,
  // unscaled), when a program has them.
  DeviceBuffer inv_freq_swa_;  // (rope_dim / 2) double
  double rope_mscale_swa_ = 1.0;
  // The distinct nonzero attention windows of the programs: each adds its
  // attention plan to a CUDA graph's key.
  std::vector<int64_t> windows_;
  uint64_t weight_bytes_ = 0;
  // (slots, num_blocks, 2, n_kv_heads, block_size) rows of
  // GgmlRowBytesOf(kv_dtype_, head_dim) bytes
  DeviceBuffer kv_pool_;

  // Step workspace, Tk = max_tokens_per_step; q_dim = n_heads * head_dim,
  // kv_dim = n_kv_heads * head_dim.
  DeviceBuffer x_;        // (Tk, n_embd) float, the residual stream
  DeviceBuffer h_;        // (Tk, n_embd) T, normed sub-layer input
  DeviceBuffer qkv_;      // (Tk, q_dim + 2 kv_dim) float
  DeviceBuffer att_;      // (Tk, q_dim) T
  DeviceBuffer gate_up_;  // (Tk, 2 n_ff) float
  DeviceBuffer act_;      // (Tk, n_ff) T
  // (Tk, n_embd) float, a sub-layer's output (Buf::kProj) when a program
  // keeps it apart from x_ (gemma3's post-norms); else not allocated.
  DeviceBuffer proj_;
  DeviceBuffer logits_;  // (logit_chunk_rows_, n_vocab) float
  int64_t logit_chunk_rows_ = 0;
  DeviceBuffer dequant_;  // (largest quantized part) T, for n > 8
  DeviceBuffer cublas_workspace_;
  DeviceBuffer partial_;  // (partial_rows_, head_dim + 2) float
  int64_t partial_rows_ = 0;
  // MoE step workspace; R = Tk * n_expert_used rows, one per (token, rank),
  // grouped by expert.
  DeviceBuffer router_logits_;  // (Tk, n_expert) float
  DeviceBuffer moe_route_;      // experts (Tk, k) int32 | weights (Tk, k) float
  PinnedBuffer moe_route_host_;       // experts (Tk, k) int32, copied back
  PinnedBuffer moe_rows_host_;        // row_token (R) | row_of (R) int32
  DeviceBuffer moe_rows_;             // the same, on the device
  DeviceBuffer moe_x_;                // (R, n_embd) T, gathered inputs
  DeviceBuffer moe_gate_up_;          // (R, 2 n_ff_exp) float
  DeviceBuffer moe_act_;              // (R, n_ff_exp) T
  DeviceBuffer moe_y_;                // (R, n_embd) float, expert outputs
  DeviceBuffer shexp_y_;  // (Tk, n_embd) float, the shared expert's output
  // Gated attention (ModelConfig::attn_output_gate), else not allocated.
  DeviceBuffer qg_;         // (Tk, 2 q_dim + 2 kv_dim) float: Wq(+gate)|Wk|Wv
  DeviceBuffer attn_gate_;  // (Tk, q_dim) float
  // DeltaNet layers, else not allocated; conv, inner, nv as Layer's.
  DeviceBuffer ssm_in_;    // (Tk, conv + inner + 2 nv) float, projections
  DeviceBuffer ssm_conv_;  // (Tk, conv) float, after the convolution
  DeviceBuffer ssm_o_;     // (Tk, inner) T, gated normed head outputs
  // (num_state_slots_, DeltaNet layers, RecurrentStateFloats) float: per
  // slot and layer kernels/delta_net.h's convolution state, then matrices.
  DeviceBuffer states_;
  std::vector<int64_t> moe_fill_;     // (n_expert) GroupByExpert's scratch
  std::vector<int64_t> moe_offsets_;  // (n_expert + 1) first row of each
  // Engine-side sampling: per logit row (up to Tk) its parameters (pinned,
  // mirrored on the device) and token.
  PinnedBuffer sampling_host_;
  DeviceBuffer sampling_device_;
  PinnedBuffer tokens_host_;
  DeviceBuffer tokens_device_;
  // The masked rows' token masks (token_mask.h), MaskWords(n_vocab) words a
  // row, staged and uploaded per step; allocated at the first masked step.
  PinnedBuffer masks_host_;
  DeviceBuffer masks_device_;
  // Step metadata (int32), pinned on the host and mirrored on the device:
  //   tokens (Tk) | positions (Tk) | slot_mapping (Tk) | table_offsets (Tk)
  //   | logit_rows (Tk) | attention tiles (3 Tk) | per KV group past the
  //   first: slot_mapping (Tk) | table_offsets (Tk) | with state slots,
  //   the slices (4 Tk: kernels/delta_net.h) | block tables, every
  //   group's (table_capacity_)
  PinnedBuffer meta_host_;
  DeviceBuffer meta_device_;
  int64_t table_capacity_ = 0;
  int64_t meta_used_ = 0;    // int32s of the current step's metadata
  int64_t max_context_ = 0;  // largest position + 1 of the current step
  int64_t logit_rows_ = 0;   // rows of the current step
  int64_t num_slices_ = 0;   // slices of the current step
  bool use_tiles_ = false;   // tiled attention this step (prefill chunks)
  bool graphs_enabled_ = false;
};

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_CUDA_ENGINE_H_
