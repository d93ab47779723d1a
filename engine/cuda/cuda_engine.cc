#include "engine/cuda/cuda_engine.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels/embedding.h"
#include "engine/cuda/kernels/paged_attention.h"
#include "engine/cuda/kernels/qkv_rope.h"
#include "engine/cuda/kernels/rms_norm.h"
#include "engine/cuda/kernels/sampling.h"
#include "engine/cuda/kernels/scale.h"
#include "engine/cuda/kernels/swiglu.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "engine/model/rope_table.h"

namespace paceline::engine::cuda {
namespace {

absl::Status BadBatch(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("forward batch: ", what));
}

// F32 when every matrix is F32, BF16 when every one is BF16, else F16.
GgmlType ChooseDtype(const ModelWeights& w) {
  std::set<GgmlType> types = {w.token_embd().type, w.output().type};
  for (const LayerWeights& l : w.layers()) {
    for (const WeightView* v :
         {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.ffn_gate,
          &l.ffn_up, &l.ffn_down, &l.ffn_gate_inp, &l.ffn_gate_shexp,
          &l.ffn_up_shexp, &l.ffn_down_shexp, &l.ssm_qkv, &l.ssm_z, &l.ssm_beta,
          &l.ssm_alpha, &l.ssm_ba, &l.ssm_out}) {
      if (v->rows > 0) types.insert(v->type);  // MoE: no dense FFN
    }
    for (const ExpertWeights& e : l.experts) {
      types.insert({e.gate.type, e.up.type, e.down.type});
    }
  }
  if (types.size() == 1 && *types.begin() == GgmlType::kF32) {
    return GgmlType::kF32;
  }
  if (types.size() == 1 && *types.begin() == GgmlType::kBF16) {
    return GgmlType::kBF16;
  }
  return GgmlType::kF16;
}

// How one matrix is stored on the device: quantized as in the file when the
// kernels take its type (and T is F16), else as T.
struct Storage {
  bool quantized = false;
  GgmlType quant = GgmlType::kQ8_0;
  bool operator==(const Storage& o) const {
    return quantized == o.quantized && (!quantized || quant == o.quant);
  }
};

Storage StorageOf(const WeightView& v, GgmlType dtype) {
  Storage s;
  s.quantized =
      dtype == GgmlType::kF16 && v.layout == WeightLayout::kRows &&
      IsDeviceBlockType(v.type) && v.cols % GgmlBlockElems(v.type) == 0 &&
      static_cast<int64_t>(v.row_bytes) == GgmlRowBytesOf(v.type, v.cols);
  if (s.quantized) s.quant = v.type;
  return s;
}

// A run of consecutive parts of a fused group with the same storage.
struct PartRun {
  size_t first = 0;
  size_t count = 0;
  int64_t rows = 0;
  Storage storage;
};

std::vector<PartRun> PartRuns(const std::vector<const WeightView*>& parts,
                              GgmlType dtype) {
  std::vector<PartRun> runs;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Storage s = StorageOf(*parts[i], dtype);
    if (runs.empty() || !(runs.back().storage == s)) {
      runs.push_back(PartRun{i, 0, 0, s});
    }
    ++runs.back().count;
    runs.back().rows += parts[i]->rows;
  }
  return runs;
}

uint64_t RunBytes(const PartRun& run, int64_t cols, GgmlType dtype) {
  const uint64_t rows = static_cast<uint64_t>(run.rows);
  if (run.storage.quantized) {
    const GgmlType q = run.storage.quant;
    return rows * (cols / GgmlBlockElems(q)) * GgmlBlockBytes(q);
  }
  return rows * cols * GgmlBlockBytes(dtype);
}

// Device bytes of a fused group as UploadGroup stores it.
uint64_t GroupBytes(const std::vector<const WeightView*>& parts,
                    GgmlType dtype) {
  uint64_t bytes = 0;
  for (const PartRun& run : PartRuns(parts, dtype)) {
    bytes += RunBytes(run, parts[0]->cols, dtype);
  }
  return bytes;
}

// How the token embedding is stored: in its file type when the kernels
// take it and it is not also the output matrix (a tied head multiplies it
// through cuBLAS, as T).
Storage EmbeddingStorage(const ModelWeights& w, GgmlType dtype) {
  if (w.output().data == w.token_embd().data) return Storage{};
  return StorageOf(w.token_embd(), dtype);
}

uint64_t EmbeddingBytes(const ModelWeights& w, GgmlType dtype) {
  const WeightView& e = w.token_embd();
  if (EmbeddingStorage(w, dtype).quantized) {
    return static_cast<uint64_t>(e.rows) * e.row_bytes;
  }
  return static_cast<uint64_t>(e.rows) * e.cols * GgmlBlockBytes(dtype);
}

// The fused groups of a layer: Wq|Wk|Wv, Wo, Wgate|Wup, Wdown; a MoE
// layer has the router and each expert's Wgate|Wup and Wdown instead of
// the dense FFN's, and its shared expert's Wgate|Wup and Wdown if any; a
// DeltaNet layer Wqkv|Wz|Wbeta|Walpha (or Wba) and Wssm_out instead of
// attention's.
std::vector<const WeightView*> DeltaNetInputs(const LayerWeights& l) {
  if (l.ssm_ba.rows > 0) return {&l.ssm_qkv, &l.ssm_z, &l.ssm_ba};
  return {&l.ssm_qkv, &l.ssm_z, &l.ssm_beta, &l.ssm_alpha};
}

std::vector<std::vector<const WeightView*>> LayerGroups(const LayerWeights& l) {
  std::vector<std::vector<const WeightView*>> groups;
  if (l.ssm_qkv.rows > 0) {
    groups.push_back(DeltaNetInputs(l));
    groups.push_back({&l.ssm_out});
  } else {
    groups.push_back({&l.attn_q, &l.attn_k, &l.attn_v});
    groups.push_back({&l.attn_output});
  }
  if (l.experts.empty()) {
    groups.push_back({&l.ffn_gate, &l.ffn_up});
    groups.push_back({&l.ffn_down});
    return groups;
  }
  groups.push_back({&l.ffn_gate_inp});
  for (const ExpertWeights& e : l.experts) {
    groups.push_back({&e.gate, &e.up});
    groups.push_back({&e.down});
  }
  if (l.ffn_gate_shexp.rows > 0) {
    groups.push_back({&l.ffn_gate_shexp, &l.ffn_up_shexp});
    groups.push_back({&l.ffn_down_shexp});
  }
  return groups;
}

// CudaEngineOptions::num_state_slots as the engine keeps them.
int32_t StateSlots(const ModelConfig& c, const CudaEngineOptions& o) {
  if (c.NumRecurrentLayers() == 0) return 0;
  return o.num_state_slots > 0 ? o.num_state_slots : 16;
}

std::vector<int64_t> RecurrentIndex(const ModelConfig& c) {
  std::vector<int64_t> index(static_cast<size_t>(c.n_layers), -1);
  int64_t r = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (c.IsRecurrentLayer(l)) index[l] = r++;
  }
  return index;
}

cudaDataType_t CudaType(GgmlType d) {
  switch (d) {
    case GgmlType::kF32:
      return CUDA_R_32F;
    case GgmlType::kF16:
      return CUDA_R_16F;
    case GgmlType::kBF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;  // not a device dtype (ChooseDtype's three)
  }
}

}  // namespace

struct CudaEngine::Resources {
  // A step's shape as a graph sees it: tokens, logit rows, then the
  // attention plan (tiled, splits, split length) of the full layers and
  // of each sliding window.
  using GraphKey = std::vector<int64_t>;

  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  // Shapes seen once (run directly, warming cuBLAS up) and captured graphs.
  std::set<GraphKey> seen;
  std::map<GraphKey, cudaGraphExec_t> graphs;

  void ClearGraphs() {
    for (auto& [key, exec] : graphs) cudaGraphExecDestroy(exec);
    graphs.clear();
    seen.clear();
  }
  ~Resources() {
    ClearGraphs();
    if (cublas != nullptr) cublasDestroy(cublas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

cudaStream_t CudaEngine::stream() const { return res_->stream; }

CudaEngineFootprint CudaEngine::Footprint(const ModelWeights& weights,
                                          const CudaEngineOptions& options) {
  const ModelConfig& c = weights.config();
  CudaEngineFootprint f;
  f.dtype = ChooseDtype(weights);
  f.kv_dtype = options.kv_dtype.value_or(f.dtype);
  for (const LayerWeights& l : weights.layers()) {
    for (const auto& group : LayerGroups(l)) {
      f.weight_bytes += GroupBytes(group, f.dtype);
    }
  }
  f.weight_bytes += EmbeddingBytes(weights, f.dtype);
  if (weights.output().data != weights.token_embd().data) {
    f.weight_bytes += GroupBytes({&weights.output()}, f.dtype);
  }
  f.kv_bytes_per_token = 2 * GgmlRowBytesOf(f.kv_dtype, c.head_dim) *
                         (c.n_layers - c.NumRecurrentLayers()) * c.n_kv_heads;
  f.state_bytes = static_cast<uint64_t>(StateSlots(c, options)) *
                  static_cast<uint64_t>(c.RecurrentStateBytes());
  return f;
}

absl::Status CudaEngine::CheckKvDtype(const ModelWeights& weights,
                                      GgmlType kv_dtype) {
  if (kv_dtype != GgmlType::kF32 && kv_dtype != GgmlType::kF16 &&
      kv_dtype != GgmlType::kBF16 && kv_dtype != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache dtype ", absl::AsciiStrToLower(GgmlTypeName(kv_dtype)),
        " is not supported by the CUDA backend: use f32, f16 or "
        "q8_0"));
  }
  const int64_t head_dim = weights.config().head_dim;
  const int64_t q8_block = GgmlBlockElems(GgmlType::kQ8_0);
  if (kv_dtype == GgmlType::kQ8_0 && head_dim % q8_block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache dtype q8_0 needs a head size that is a multiple of ",
        q8_block, "; this model's head_dim is ", head_dim, ": use f16"));
  }
  const GgmlType dtype = ChooseDtype(weights);
  if (kv_dtype == GgmlType::kBF16 && dtype != GgmlType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache dtype bf16 needs BF16 weights; this model runs in ",
        GgmlTypeName(dtype), ": use f32, f16 or q8_0"));
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::DeviceMemory(int device, uint64_t* free_bytes,
                                      uint64_t* total_bytes) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  size_t free = 0, total = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free, &total));
  *free_bytes = free;
  *total_bytes = total;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaEngine>> CudaEngine::Create(
    std::shared_ptr<const ModelWeights> weights,
    const CudaEngineOptions& options) {
  if (weights == nullptr) return absl::InvalidArgumentError("no weights");
  ASSIGN_OR_RETURN(std::vector<CudaDeviceInfo> devices, ListCudaDevices());
  if (devices.empty() || options.device < 0 ||
      options.device >= static_cast<int>(devices.size())) {
    return absl::FailedPreconditionError("no CUDA device");
  }
  const ModelConfig& c = weights->config();
  CudaEngineOptions o = options;
  if (o.block_size < 1 || o.block_size > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("block size ", o.block_size, " is not in [1, 256]"));
  }
  if (o.max_tokens_per_step < 1 || o.max_tokens_per_step > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("max tokens per step ",
                                                   o.max_tokens_per_step,
                                                   " is not in [1, 65535]"));
  }
  if (o.num_state_slots < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("number of state slots is negative: ", o.num_state_slots));
  }
  if (o.num_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("number of KV blocks is negative: ", o.num_blocks));
  }
  if (o.num_blocks == 0) {
    o.num_blocks = static_cast<int32_t>((c.context_length + o.block_size - 1) /
                                        o.block_size);
  }
  if (int64_t{o.num_blocks} * o.block_size >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError("KV pool has 2^31 slots or more");
  }
  if (c.head_dim > kMaxAttentionHeadDim || c.head_dim > kMaxQkvHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "head size ", c.head_dim, " is over ", kMaxAttentionHeadDim));
  }
  const GgmlType dtype = ChooseDtype(*weights);
  const GgmlType kv_dtype = o.kv_dtype.value_or(dtype);
  RETURN_IF_ERROR(CheckKvDtype(*weights, kv_dtype));
  o.kv_dtype = kv_dtype;
  ASSIGN_OR_RETURN(std::vector<LayerProgram> programs, LayerPrograms(c));
  RETURN_IF_ERROR(CheckPrograms(programs));
  KvLayout layout = PlanKvLayout(c, o.kv_window_release);
  std::unique_ptr<CudaEngine> engine(
      new CudaEngine(std::move(weights), o, dtype, kv_dtype,
                     std::move(programs), std::move(layout)));
  RETURN_IF_ERROR(engine->Init());
  return engine;
}

CudaEngine::CudaEngine(std::shared_ptr<const ModelWeights> weights,
                       const CudaEngineOptions& options, GgmlType dtype,
                       GgmlType kv_dtype, std::vector<LayerProgram> programs,
                       KvLayout kv_layout)
    : weights_(std::move(weights)),
      programs_(std::move(programs)),
      kv_layout_(std::move(kv_layout)),
      options_(options),
      dtype_(dtype),
      kv_dtype_(kv_dtype),
      num_state_slots_(StateSlots(weights_->config(), options)),
      recurrent_index_(RecurrentIndex(weights_->config())),
      res_(std::make_unique<Resources>()) {
  for (const LayerProgram& program : programs_) {
    for (const Op& op : program.ops) {
      if (op.kind == OpKind::kAttention && op.window > 0 &&
          std::find(windows_.begin(), windows_.end(), op.window) ==
              windows_.end()) {
        windows_.push_back(op.window);
      }
    }
  }
}

CudaEngine::~CudaEngine() {
  if (res_->stream != nullptr) cudaStreamSynchronize(res_->stream);
}

absl::Status CudaEngine::Init() {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&res_->stream, cudaStreamNonBlocking));
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&res_->cublas));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(res_->cublas, res_->stream));
  // No TF32: F32 models multiply in full FP32, as the CPU engine does.
  CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(res_->cublas, CUBLAS_DEFAULT_MATH));
  // A workspace of our own: cuBLAS allocates nothing inside a step (and so
  // nothing inside a graph capture).
  RETURN_IF_ERROR(cublas_workspace_.Allocate(size_t{32} << 20));
  CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(
      res_->cublas, cublas_workspace_.get(), cublas_workspace_.bytes()));
  // A MoE layer syncs with the host (its routing), which a graph cannot.
  graphs_enabled_ = options_.cuda_graphs && !config().is_moe();
  RETURN_IF_ERROR(UploadWeights());

  RETURN_IF_ERROR(kv_pool_.Allocate(static_cast<uint64_t>(kv_layout_.slots) *
                                    static_cast<uint64_t>(options_.num_blocks) *
                                    KvBlockBytes()));
  CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(kv_pool_.get(), 0, kv_pool_.bytes(), res_->stream));
  RETURN_IF_ERROR(AllocateWorkspace());
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(res_->stream));
  return absl::OkStatus();
}

absl::Status CudaEngine::UploadFloats(const std::vector<float>& v,
                                      DeviceBuffer* out) {
  RETURN_IF_ERROR(out->Allocate(v.size() * sizeof(float)));
  if (v.empty()) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaMemcpy(
      out->get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status CudaEngine::UploadMatrix(const WeightView& w, void* dst) {
  const size_t elem = GgmlBlockBytes(dtype_);
  const size_t row_out = static_cast<size_t>(w.cols) * elem;
  if (w.type == dtype_ && w.row_bytes == row_out) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst, w.data, w.rows * w.row_bytes, cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }
  static std::set<std::pair<GgmlType, GgmlType>>* logged =
      new std::set<std::pair<GgmlType, GgmlType>>;
  if (logged->insert({w.type, dtype_}).second) {
    std::fprintf(stderr, "cuda engine: converting %s weights to %s at load\n",
                 std::string(GetGgmlTypeTraits(w.type).name).c_str(),
                 GgmlTypeName(dtype_));
  }
  // Converted in chunks of rows through a host staging buffer.
  const int64_t chunk_rows =
      std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(1, w.cols));
  std::vector<float> row(static_cast<size_t>(w.cols));
  std::vector<uint8_t> staging(static_cast<size_t>(chunk_rows) * row_out);
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r0 = 0; r0 < w.rows; r0 += chunk_rows) {
    const int64_t n = std::min(chunk_rows, w.rows - r0);
    for (int64_t r = 0; r < n; ++r) {
      RETURN_IF_ERROR(DequantizeRow(w.type, src + (r0 + r) * w.row_bytes,
                                    row.data(), w.cols));
      uint8_t* out = staging.data() + r * row_out;
      if (dtype_ == GgmlType::kF32) {
        std::memcpy(out, row.data(), row_out);
      } else {
        auto* o16 = reinterpret_cast<uint16_t*>(out);
        for (int64_t i = 0; i < w.cols; ++i) {
          o16[i] = dtype_ == GgmlType::kF16 ? FloatToHalf(row[i])
                                            : FloatToBFloat16(row[i]);
        }
      }
    }
    CUDA_RETURN_IF_ERROR(cudaMemcpy(static_cast<uint8_t*>(dst) + r0 * row_out,
                                    staging.data(), n * row_out,
                                    cudaMemcpyHostToDevice));
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::UploadWeights() {
  const ModelConfig& c = config();
  const ModelWeights& w = *weights_;
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const LayerWeights& lw = w.layers()[i];
    Layer& l = layers_[i];
    RETURN_IF_ERROR(UploadFloats(lw.attn_norm, &l.attn_norm));
    RETURN_IF_ERROR(UploadFloats(lw.ffn_norm, &l.ffn_norm));
    if (c.post_norms) {
      RETURN_IF_ERROR(UploadFloats(lw.post_attn_norm, &l.post_attn_norm));
      RETURN_IF_ERROR(UploadFloats(lw.post_ffn_norm, &l.post_ffn_norm));
    }
    if (c.attn_output_bias) RETURN_IF_ERROR(UploadFloats(lw.o_bias, &l.o_bias));
    if (c.attn_sinks) {
      RETURN_IF_ERROR(UploadFloats(lw.attn_sinks, &l.attn_sinks));
    }
    if (c.IsRecurrentLayer(i)) {
      RETURN_IF_ERROR(UploadDeltaNet(lw, &l));
    } else {
      RETURN_IF_ERROR(
          UploadGroup({&lw.attn_q, &lw.attn_k, &lw.attn_v}, &l.qkv));
      RETURN_IF_ERROR(UploadGroup({&lw.attn_output}, &l.attn_output));
    }
    if (c.qkv_bias) {
      std::vector<float> bias(lw.q_bias);
      bias.insert(bias.end(), lw.k_bias.begin(), lw.k_bias.end());
      bias.insert(bias.end(), lw.v_bias.begin(), lw.v_bias.end());
      RETURN_IF_ERROR(UploadFloats(bias, &l.qkv_bias));
    }
    if (c.qk_norm) {
      RETURN_IF_ERROR(UploadFloats(lw.q_norm, &l.q_norm));
      RETURN_IF_ERROR(UploadFloats(lw.k_norm, &l.k_norm));
    }
    if (c.is_moe()) {
      RETURN_IF_ERROR(UploadMoe(lw, &l));
      continue;
    }
    RETURN_IF_ERROR(UploadGroup({&lw.ffn_gate, &lw.ffn_up}, &l.gate_up));
    RETURN_IF_ERROR(UploadGroup({&lw.ffn_down}, &l.ffn_down));
  }
  const Storage embd = EmbeddingStorage(w, dtype_);
  embd_quantized_ = embd.quantized;
  embd_quant_ = embd.quant;
  RETURN_IF_ERROR(token_embd_.Allocate(EmbeddingBytes(w, dtype_)));
  if (embd_quantized_) {
    CUDA_RETURN_IF_ERROR(cudaMemcpy(token_embd_.get(), w.token_embd().data,
                                    token_embd_.bytes(),
                                    cudaMemcpyHostToDevice));
  } else {
    RETURN_IF_ERROR(UploadMatrix(w.token_embd(), token_embd_.get()));
  }
  weight_bytes_ += token_embd_.bytes();
  output_tied_ = w.output().data == w.token_embd().data;
  if (!output_tied_) RETURN_IF_ERROR(UploadGroup({&w.output()}, &output_));
  RETURN_IF_ERROR(UploadFloats(w.output_norm(), &output_norm_));
  LogWeightBytes();

  // RoPE frequencies and magnitude from the table cpu::RopeAngles reads
  // too, with the file's Llama 3 frequency factors if any.
  const RopeTable table = MakeRopeTable(c, w.rope_freq_factors());
  rope_mscale_ = table.mscale;
  RETURN_IF_ERROR(UploadRopeTable(table, &inv_freq_));
  const bool local_rope = std::any_of(
      programs_.begin(), programs_.end(), [](const LayerProgram& p) {
        return std::any_of(p.ops.begin(), p.ops.end(),
                           [](const Op& op) { return op.local_rope; });
      });
  if (local_rope) {
    // The sliding layers' table as the CPU engine builds it
    // (cpu::SlidingRopeParams): the base rope_freq_base_swa, no scaling,
    // no frequency factors.
    ModelConfig sliding = c;
    sliding.rope_freq_base = c.rope_freq_base_swa;
    sliding.rope_scaling = RopeScaling::kNone;
    sliding.rope_scaling_factor = 1.0;
    const RopeTable swa = MakeRopeTable(sliding);
    rope_mscale_swa_ = swa.mscale;
    RETURN_IF_ERROR(UploadRopeTable(swa, &inv_freq_swa_));
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::UploadRopeTable(const RopeTable& table,
                                         DeviceBuffer* inv_freq) {
  const size_t half = table.inv_freq.size();
  RETURN_IF_ERROR(
      inv_freq->Allocate(std::max<size_t>(1, half) * sizeof(double)));
  if (half > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemcpy(inv_freq->get(), table.inv_freq.data(),
                                    half * sizeof(double),
                                    cudaMemcpyHostToDevice));
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::UploadGroup(
    const std::vector<const WeightView*>& parts, Matrix* m) {
  m->rows = 0;
  m->cols = parts[0]->cols;
  for (const PartRun& run : PartRuns(parts, dtype_)) {
    MatrixPart& part = m->parts.emplace_back();
    part.quantized = run.storage.quantized;
    part.quant = run.storage.quant;
    part.row_begin = m->rows;
    part.rows = run.rows;
    m->rows += run.rows;
    RETURN_IF_ERROR(part.data.Allocate(RunBytes(run, m->cols, dtype_)));
    weight_bytes_ += part.data.bytes();
    auto* dst = part.data.as<uint8_t>();
    for (size_t i = run.first; i < run.first + run.count; ++i) {
      const WeightView& p = *parts[i];
      if (part.quantized) {
        const size_t bytes = p.rows * p.row_bytes;
        CUDA_RETURN_IF_ERROR(
            cudaMemcpy(dst, p.data, bytes, cudaMemcpyHostToDevice));
        dst += bytes;
      } else {
        RETURN_IF_ERROR(UploadMatrix(p, dst));
        dst += static_cast<size_t>(p.rows) * p.cols * GgmlBlockBytes(dtype_);
      }
    }
  }
  return absl::OkStatus();
}

void CudaEngine::LogWeightBytes() const {
  std::map<std::string, uint64_t> by_type;
  const auto add = [&by_type, this](const Matrix& m) {
    for (const MatrixPart& p : m.parts) {
      by_type[p.quantized ? GgmlTypeName(p.quant) : GgmlTypeName(dtype_)] +=
          p.data.bytes();
    }
  };
  uint64_t model_bytes = 0;
  const auto model = [&model_bytes](const WeightView& v) {
    model_bytes += static_cast<uint64_t>(v.rows) * v.row_bytes;
  };
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    for (const Matrix* m :
         {&l.qkv, &l.attn_output, &l.gate_up, &l.ffn_down, &l.router,
          &l.shexp_gate_up, &l.shexp_down, &l.ssm_in, &l.ssm_out}) {
      add(*m);
    }
    for (const Matrix& m : l.expert_gate_up) add(m);
    for (const Matrix& m : l.expert_down) add(m);
    for (const auto& group : LayerGroups(weights_->layers()[i])) {
      for (const WeightView* v : group) model(*v);
    }
  }
  if (!output_tied_) {
    add(output_);
    model(weights_->output());
  }
  std::string types;
  for (const auto& [name, bytes] : by_type) {
    absl::StrAppend(&types, types.empty() ? "" : ", ", name, " ",
                    absl::StrFormat("%.2f", bytes / 1048576.0));
  }
  const uint64_t matrices = weight_bytes_ - token_embd_.bytes();
  const char* embd =
      embd_quantized_ ? GgmlTypeName(embd_quant_) : GgmlTypeName(dtype_);
  std::fprintf(stderr,
               "cuda engine: weights on the device %.2f MiB: matrices %.2f "
               "MiB (%s; %.2f MiB in the model's types), embedding %.2f MiB "
               "%s\n",
               weight_bytes_ / 1048576.0, matrices / 1048576.0, types.c_str(),
               model_bytes / 1048576.0, token_embd_.bytes() / 1048576.0, embd);
}

uint64_t CudaEngine::MatMulBytesPerToken() const {
  uint64_t bytes = 0;
  const auto add = [&bytes](const Matrix& m) {
    for (const MatrixPart& p : m.parts) bytes += p.data.bytes();
  };
  const uint64_t used = static_cast<uint64_t>(config().n_expert_used);
  for (const Layer& l : layers_) {
    for (const Matrix* m :
         {&l.qkv, &l.attn_output, &l.gate_up, &l.ffn_down, &l.shexp_gate_up,
          &l.shexp_down, &l.ssm_in, &l.ssm_out}) {
      add(*m);
    }
    if (!l.expert_down.empty()) {  // the router and n_expert_used experts
      add(l.router);
      uint64_t expert = 0;
      for (const MatrixPart& p : l.expert_gate_up[0].parts) {
        expert += p.data.bytes();
      }
      for (const MatrixPart& p : l.expert_down[0].parts) {
        expert += p.data.bytes();
      }
      bytes += used * expert;
    }
  }
  if (output_tied_) return bytes + token_embd_.bytes();
  add(output_);
  return bytes;
}

absl::Status CudaEngine::AllocateWorkspace() {
  const ModelConfig& c = config();
  const size_t t = static_cast<size_t>(options_.max_tokens_per_step);
  const size_t elem = GgmlBlockBytes(dtype_);
  const size_t q_dim = static_cast<size_t>(c.n_heads * c.head_dim);
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads * c.head_dim);
  const size_t embd = static_cast<size_t>(c.n_embd);
  // The dense FFN's or the shared expert's.
  const size_t ff = static_cast<size_t>(std::max(c.n_ff, c.n_ff_shexp));
  RETURN_IF_ERROR(x_.Allocate(t * embd * sizeof(float)));
  const bool uses_proj = std::any_of(
      programs_.begin(), programs_.end(), [](const LayerProgram& p) {
        return std::any_of(p.ops.begin(), p.ops.end(), [](const Op& op) {
          return op.src == Buf::kProj || op.dst == Buf::kProj;
        });
      });
  if (uses_proj) RETURN_IF_ERROR(proj_.Allocate(t * embd * sizeof(float)));
  RETURN_IF_ERROR(h_.Allocate(t * embd * elem));
  RETURN_IF_ERROR(qkv_.Allocate(t * (q_dim + 2 * kv_dim) * sizeof(float)));
  RETURN_IF_ERROR(att_.Allocate(t * q_dim * elem));
  RETURN_IF_ERROR(gate_up_.Allocate(t * 2 * ff * sizeof(float)));
  RETURN_IF_ERROR(act_.Allocate(t * ff * elem));
  logit_chunk_rows_ = std::min<int64_t>(options_.max_tokens_per_step, 256);
  RETURN_IF_ERROR(logits_.Allocate(static_cast<size_t>(logit_chunk_rows_) *
                                   c.n_vocab * sizeof(float)));
  size_t dequant_elems = 0;
  const auto need = [&dequant_elems](const Matrix& m) {
    for (const MatrixPart& p : m.parts) {
      if (p.quantized) {
        dequant_elems =
            std::max(dequant_elems, static_cast<size_t>(p.rows * m.cols));
      }
    }
  };
  for (const Layer& l : layers_) {
    for (const Matrix* m :
         {&l.qkv, &l.attn_output, &l.gate_up, &l.ffn_down, &l.router,
          &l.shexp_gate_up, &l.shexp_down, &l.ssm_in, &l.ssm_out}) {
      need(*m);
    }
    for (const Matrix& m : l.expert_gate_up) need(m);
    for (const Matrix& m : l.expert_down) need(m);
  }
  need(output_);
  RETURN_IF_ERROR(dequant_.Allocate(dequant_elems * elem));
  partial_rows_ = 4096;
  RETURN_IF_ERROR(partial_.Allocate(static_cast<size_t>(partial_rows_) *
                                    (c.head_dim + 2) * sizeof(float)));
  // Block tables: enough for every token's slice at the full context in
  // every group, up to 4M entries; Prepare grows it past that.
  const int64_t blocks_per_seq = std::min<int64_t>(
      (c.context_length + options_.block_size - 1) / options_.block_size,
      options_.num_blocks);
  table_capacity_ = std::min<int64_t>(int64_t{options_.max_tokens_per_step} *
                                          std::max<int64_t>(1, blocks_per_seq) *
                                          kv_layout_.num_groups(),
                                      int64_t{1} << 22);
  const size_t meta_bytes =
      (TablesSection() * t + static_cast<size_t>(table_capacity_)) *
      sizeof(int32_t);
  RETURN_IF_ERROR(meta_host_.Allocate(meta_bytes));
  RETURN_IF_ERROR(meta_device_.Allocate(meta_bytes));
  RETURN_IF_ERROR(sampling_host_.Allocate(t * sizeof(RowSampling)));
  RETURN_IF_ERROR(sampling_device_.Allocate(t * sizeof(RowSampling)));
  RETURN_IF_ERROR(tokens_host_.Allocate(t * sizeof(int32_t)));
  RETURN_IF_ERROR(tokens_device_.Allocate(t * sizeof(int32_t)));
  if (c.is_moe()) RETURN_IF_ERROR(AllocateMoeWorkspace());
  return AllocateHybridWorkspace();
}

size_t CudaEngine::KvBlockBytes() const {
  const ModelConfig& c = config();
  return size_t{2} * c.n_kv_heads * options_.block_size *
         GgmlRowBytesOf(kv_dtype_, c.head_dim);
}

void* CudaEngine::KvLayer(int64_t layer) const {
  const size_t per_slot =
      static_cast<size_t>(options_.num_blocks) * KvBlockBytes();
  return kv_pool_.as<uint8_t>() + kv_layout_.slot_of_layer[layer] * per_slot;
}

absl::Status CudaEngine::Prepare(const ForwardBatch& batch,
                                 absl::Span<float> logits) {
  const int64_t n = batch.num_tokens();
  const int64_t tk = options_.max_tokens_per_step;
  const int64_t bs = options_.block_size;
  if (n < 1 || n > tk) {
    return BadBatch(absl::StrCat(n, " tokens; want 1 to ", tk));
  }
  int32_t* meta = meta_host_.as<int32_t>();
  int32_t* owner = meta + kTableOffsets * tk;  // slice of each token, for now
  BatchLimits limits;
  limits.n_vocab = config().n_vocab;
  limits.block_size = options_.block_size;
  limits.num_blocks = options_.num_blocks;
  limits.max_tokens_per_step = options_.max_tokens_per_step;
  limits.hidden_width = config().n_embd;
  const int64_t groups = kv_layout_.num_groups();
  if (groups > 1 || kv_layout_.groups[0].window > 0) {
    limits.group_windows = kv_layout_.Windows();
  }
  limits.num_state_slots = num_state_slots_;
  RETURN_IF_ERROR(CheckForwardBatch(batch, logits.size(), limits,
                                    absl::MakeSpan(owner, n)));
  int64_t table_entries = 0;
  for (const SequenceSlice& slice : batch.sequences) {
    table_entries += groups * BlocksNeeded(slice, options_.block_size);
  }
  // The batch is valid: grow the table buffer if needed, then fill.
  if (table_entries > table_capacity_) {
    std::fprintf(
        stderr, "cuda engine: growing the block-table buffer to %lld entries\n",
        static_cast<long long>(table_entries));
    std::vector<int32_t> keep(owner, owner + n);
    const size_t meta_bytes =
        static_cast<size_t>(TablesSection() * tk + table_entries) *
        sizeof(int32_t);
    RETURN_IF_ERROR(meta_host_.Allocate(meta_bytes));
    RETURN_IF_ERROR(meta_device_.Allocate(meta_bytes));
    table_capacity_ = table_entries;
    meta = meta_host_.as<int32_t>();
    std::copy(keep.begin(), keep.end(), meta + kTableOffsets * tk);
  }
  int32_t* tokens = meta + kTokens * tk;
  int32_t* positions = meta + kPositions * tk;
  int32_t* logit_rows = meta + kLogitRows * tk;
  int32_t* tables = meta + TablesSection() * tk;
  std::copy(batch.tokens.begin(), batch.tokens.end(), tokens);
  int64_t offset = 0;
  max_context_ = 0;
  logit_rows_ = 0;
  num_slices_ = static_cast<int64_t>(batch.sequences.size());
  if (num_state_slots_ > 0) {  // the DeltaNet kernels' slices
    int32_t* slices = meta + SlicesSection() * tk;
    for (const SequenceSlice& slice : batch.sequences) {
      slices[0] = slice.token_begin;
      slices[1] = slice.token_count;
      slices[2] = slice.state_slot;
      slices[3] = slice.position_begin;
      slices += kDeltaNetSliceInts;
    }
  }
  for (const SequenceSlice& slice : batch.sequences) {
    const int64_t end = int64_t{slice.position_begin} + slice.token_count;
    const int64_t blocks_needed = (end + bs - 1) / bs;
    for (int32_t i = 0; i < slice.token_count; ++i) {
      positions[slice.token_begin + i] = slice.position_begin + i;
    }
    // Each group's table (a windowed group's entries before its window
    // may be kNoBlock: copied, never read), and where each token's K/V go
    // in that group's blocks.
    for (int64_t g = 0; g < groups; ++g) {
      const absl::Span<const int32_t> table =
          groups > 1 ? slice.group_tables[g] : slice.block_table;
      std::copy(table.begin(), table.begin() + blocks_needed, tables + offset);
      int32_t* slots = meta + SlotsSection(g) * tk;
      int32_t* table_offsets = meta + OffsetsSection(g) * tk;
      for (int32_t i = 0; i < slice.token_count; ++i) {
        const int32_t t = slice.token_begin + i;
        const int64_t pos = int64_t{slice.position_begin} + i;
        slots[t] = static_cast<int32_t>(table[pos / bs] * bs + pos % bs);
        table_offsets[t] = static_cast<int32_t>(offset);
      }
      offset += blocks_needed;
    }
    const int32_t last = slice.token_begin + slice.token_count;
    for (int32_t t = last - slice.num_logits; t < last; ++t) {
      logit_rows[logit_rows_++] = t;
    }
    max_context_ = std::max(max_context_, end);
  }
  // Attention query tiles: each slice's tokens, kAttentionTileTokens at a
  // time. The tiled kernel runs when tiles hold two tokens on average
  // (prefill chunks), the per-token one otherwise (decode).
  int32_t* tiles = meta + kTiles * tk;
  int32_t n_tiles = 0;
  for (const SequenceSlice& slice : batch.sequences) {
    for (int32_t i = 0; i < slice.token_count; i += kAttentionTileTokens) {
      tiles[1 + 2 * n_tiles] = slice.token_begin + i;
      tiles[2 + 2 * n_tiles] =
          std::min(kAttentionTileTokens, slice.token_count - i);
      ++n_tiles;
    }
  }
  tiles[0] = n_tiles;
  use_tiles_ =
      int64_t{n_tiles} * 2 <= n && config().head_dim <= kMaxTiledHeadDim;
  meta_used_ = TablesSection() * tk + offset;
  return absl::OkStatus();
}

absl::Status CudaEngine::Gemm(const void* w, int64_t out_rows, int64_t in_cols,
                              const void* x, int64_t n, float* y, int64_t ldy,
                              float beta) {
  // Column-major view: Y^T (out_rows, n) = W (in_cols, out_rows)^T · X^T
  // (in_cols, n), where W and X are the row-major matrices as stored.
  const float alpha = 1.0f;
  const cudaDataType_t type = CudaType(dtype_);
  CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
      res_->cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out_rows),
      static_cast<int>(n), static_cast<int>(in_cols), &alpha, w, type,
      static_cast<int>(in_cols), x, type, static_cast<int>(in_cols), &beta, y,
      CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::Status CudaEngine::Gemm(const Matrix& w, const void* x, int64_t n,
                              float* y, float beta) {
  for (const MatrixPart& p : w.parts) {
    float* yp = y + p.row_begin;
    if (!p.quantized) {
      RETURN_IF_ERROR(
          Gemm(p.data.get(), p.rows, w.cols, x, n, yp, w.rows, beta));
    } else if (n <= kMaxGemvTokens) {
      CUDA_RETURN_IF_ERROR(LaunchQuantizedGemv(p.quant, p.data.get(), p.rows,
                                               w.cols, dtype_, x, n, beta, yp,
                                               w.rows, res_->stream));
    } else {
      CUDA_RETURN_IF_ERROR(LaunchDequantize(p.quant, p.data.get(), p.rows,
                                            w.cols, dtype_, dequant_.get(),
                                            res_->stream));
      RETURN_IF_ERROR(
          Gemm(dequant_.get(), p.rows, w.cols, x, n, yp, w.rows, beta));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::RunForward(const ForwardBatch& batch,
                                    absl::Span<float> logits) {
  const int64_t capacity_before = table_capacity_;
  RETURN_IF_ERROR(Prepare(batch, logits));
  // A grown metadata buffer moved: graphs captured with the old one are
  // stale.
  if (table_capacity_ != capacity_before) res_->ClearGraphs();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  const int64_t n = batch.num_tokens();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(meta_device_.get(), meta_host_.get(),
                                       meta_used_ * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, res_->stream));
  bool ran = false;
  RETURN_IF_ERROR(RunStepGraph(n, logit_rows_, &ran));
  if (!ran) RETURN_IF_ERROR(RunStep(n, logit_rows_));
  return absl::OkStatus();
}

absl::Status CudaEngine::CopyHidden(const ForwardBatch& batch) {
  const int64_t width = config().n_embd;
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  int64_t rows = 0;
  for (const SequenceSlice& s : batch.sequences) {
    if (s.num_hidden == 0) continue;
    const int64_t first = s.token_begin + s.token_count - s.num_hidden;
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        batch.hidden.data() + rows * width, x_.as<float>() + first * width,
        static_cast<size_t>(s.num_hidden) * row_bytes, cudaMemcpyDeviceToHost,
        res_->stream));
    rows += s.num_hidden;
  }
  return absl::OkStatus();
}

void CudaEngine::NormalizeHidden(const ForwardBatch& batch) const {
  const int64_t width = config().n_embd;
  const std::vector<float>& weight = weights_->output_norm();
  const double eps = config().rms_norm_eps;
  for (size_t r = 0; r * width < batch.hidden.size(); ++r) {
    float* row = batch.hidden.data() + r * width;
    double sum = 0;
    for (int64_t i = 0; i < width; ++i) sum += double{row[i]} * row[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / width + eps));
    for (int64_t i = 0; i < width; ++i) row[i] = row[i] * scale * weight[i];
  }
}

absl::Status CudaEngine::Forward(const ForwardBatch& batch,
                                 absl::Span<float> logits) {
  RETURN_IF_ERROR(RunForward(batch, logits));
  RETURN_IF_ERROR(CopyHidden(batch));
  RETURN_IF_ERROR(ComputeLogits(logit_rows_, logits));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(res_->stream));
  NormalizeHidden(batch);
  return absl::OkStatus();
}

absl::Status CudaEngine::UploadSampling(
    absl::Span<const RowSampling> sampling) {
  const size_t words = static_cast<size_t>(MaskWords(config().n_vocab));
  const size_t mask_bytes = sampling.size() * words * sizeof(uint32_t);
  const bool masked = std::any_of(
      sampling.begin(), sampling.end(),
      [](const RowSampling& r) { return r.in_engine && r.allowed != nullptr; });
  if (masked && masks_host_.bytes() < mask_bytes) {
    const size_t capacity = static_cast<size_t>(options_.max_tokens_per_step) *
                            words * sizeof(uint32_t);
    RETURN_IF_ERROR(masks_host_.Allocate(std::max(capacity, mask_bytes)));
    RETURN_IF_ERROR(masks_device_.Allocate(masks_host_.bytes()));
  }
  RowSampling* staged = sampling_host_.as<RowSampling>();
  size_t used = 0;  // masked rows staged
  for (size_t j = 0; j < sampling.size(); ++j) {
    staged[j] = sampling[j];
    if (!sampling[j].in_engine || sampling[j].allowed == nullptr) continue;
    std::copy_n(sampling[j].allowed, words,
                masks_host_.as<uint32_t>() + used * words);
    staged[j].allowed = masks_device_.as<uint32_t>() + used * words;
    ++used;
  }
  if (used > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(masks_device_.get(), masks_host_.get(),
                                         used * words * sizeof(uint32_t),
                                         cudaMemcpyHostToDevice, res_->stream));
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sampling_device_.get(),
                                       sampling_host_.get(),
                                       sampling.size() * sizeof(RowSampling),
                                       cudaMemcpyHostToDevice, res_->stream));
  return absl::OkStatus();
}

absl::Status CudaEngine::ForwardAndSample(
    const ForwardBatch& batch, absl::Span<const RowSampling> sampling,
    absl::Span<int32_t> tokens, absl::Span<float> logits,
    const std::function<void()>& before_sampling) {
  RETURN_IF_ERROR(CheckSamplingRows(batch, sampling.size(), tokens.size()));
  RETURN_IF_ERROR(RunForward(batch, logits));
  RETURN_IF_ERROR(CopyHidden(batch));
  // The forward pass is queued on the stream; the masks finish meanwhile.
  if (before_sampling) before_sampling();
  const int64_t rows = logit_rows_;
  RETURN_IF_ERROR(UploadSampling(sampling));
  RETURN_IF_ERROR(ComputeLogits(rows, logits, sampling.data()));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(tokens_host_.get(), tokens_device_.get(),
                      static_cast<size_t>(rows) * sizeof(int32_t),
                      cudaMemcpyDeviceToHost, res_->stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(res_->stream));
  NormalizeHidden(batch);
  const int32_t* sampled = tokens_host_.as<int32_t>();
  for (int64_t j = 0; j < rows; ++j) {
    if (sampling[j].in_engine) tokens[j] = sampled[j];
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::RunStep(int64_t n, int64_t rows) {
  const ModelConfig& c = config();
  const int64_t tk = options_.max_tokens_per_step;
  const int32_t* tokens = meta_device_.as<int32_t>() + kTokens * tk;
  if (embd_quantized_) {
    CUDA_RETURN_IF_ERROR(
        LaunchQuantizedEmbedding(embd_quant_, token_embd_.get(), tokens, n,
                                 c.n_embd, x_.as<float>(), res_->stream));
  } else {
    CUDA_RETURN_IF_ERROR(LaunchEmbedding(dtype_, token_embd_.get(), tokens, n,
                                         c.n_embd, x_.as<float>(),
                                         res_->stream));
  }
  if (c.embed_scale != 1.0) {  // gemma3: sqrt(n_embd), as the CPU engine
    CUDA_RETURN_IF_ERROR(
        LaunchAffine(x_.as<float>(), x_.as<float>(), n * c.n_embd,
                     static_cast<float>(c.embed_scale), 0.0f, res_->stream));
  }
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    RETURN_IF_ERROR(RunLayer(layer, n));
  }
  if (rows > 0 && rows <= logit_chunk_rows_) {
    RETURN_IF_ERROR(LogitsChunk(0, rows));
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::RunStepGraph(int64_t n, int64_t rows, bool* ran) {
  *ran = false;
  if (!graphs_enabled_ || n > kMaxGraphTokens || rows > logit_chunk_rows_) {
    return absl::OkStatus();
  }
  const ModelConfig& c = config();
  PagedAttentionParams att;  // only what the plan depends on
  att.n_tokens = n;
  att.n_heads = c.n_heads;
  att.max_context = max_context_;
  att.partial = partial_.as<float>();
  att.partial_rows = partial_rows_;
  att.head_dim = c.head_dim;
  att.tiles = use_tiles_ ? meta_device_.as<int32_t>() +
                               kTiles * options_.max_tokens_per_step
                         : nullptr;
  // The DeltaNet kernels' grids have a block row per slice.
  Resources::GraphKey key = {n, rows, num_state_slots_ > 0 ? num_slices_ : 0};
  for (size_t w = 0; w <= windows_.size(); ++w) {
    att.window = w == 0 ? 0 : windows_[w - 1];
    const PagedAttentionPlan plan = PlanPagedAttention(att);
    key.insert(key.end(), {plan.tiled ? 1 : 0, plan.splits, plan.split_len});
  }
  auto it = res_->graphs.find(key);
  if (it == res_->graphs.end()) {
    // The first time a shape runs directly (cuBLAS picks and loads its
    // kernels); the second time it is captured.
    if (res_->seen.insert(key).second) return absl::OkStatus();
    if (res_->graphs.size() >= 128) res_->ClearGraphs();
    // Any failure from here on turns graphs off; the step then runs
    // directly.
    const cudaError_t begin =
        cudaStreamBeginCapture(res_->stream, cudaStreamCaptureModeThreadLocal);
    absl::Status body;
    cudaError_t end = cudaErrorUnknown;
    cudaGraph_t graph = nullptr;
    if (begin == cudaSuccess) {
      body = RunStep(n, rows);
      end = cudaStreamEndCapture(res_->stream, &graph);
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaErrorUnknown;
    if (begin == cudaSuccess && body.ok() && end == cudaSuccess) {
      inst = cudaGraphInstantiate(&exec, graph, 0);
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (inst != cudaSuccess) {
      cudaGetLastError();  // clear a sticky capture error
      graphs_enabled_ = false;
      res_->ClearGraphs();
      const cudaError_t first = begin != cudaSuccess ? begin
                                : end != cudaSuccess ? end
                                                     : inst;
      std::fprintf(stderr,
                   "cuda engine: CUDA graph capture failed (%s; %s); "
                   "running steps without graphs\n",
                   std::string(body.message()).c_str(),
                   cudaGetErrorName(first));
      return absl::OkStatus();
    }
    it = res_->graphs.emplace(key, exec).first;
  }
  CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second, res_->stream));
  *ran = true;
  return absl::OkStatus();
}

absl::Status CudaEngine::LogitsChunk(int64_t begin, int64_t count) {
  const ModelConfig& c = config();
  const int64_t tk = options_.max_tokens_per_step;
  const int32_t* logit_rows = meta_device_.as<int32_t>() + kLogitRows * tk;
  CUDA_RETURN_IF_ERROR(LaunchRmsNorm(
      dtype_, x_.as<float>(), nullptr, logit_rows + begin, count, c.n_embd,
      output_norm_.as<float>(), static_cast<float>(c.rms_norm_eps), h_.get(),
      res_->stream));
  if (output_tied_) {
    return Gemm(token_embd_.get(), c.n_vocab, c.n_embd, h_.get(), count,
                logits_.as<float>(), c.n_vocab, 0.0f);
  }
  return Gemm(output_, h_.get(), count, logits_.as<float>(), 0.0f);
}

// Rows up to logit_chunk_rows_ are already in logits_ (RunStep); more go
// chunk by chunk.
absl::Status CudaEngine::ComputeLogits(int64_t rows, absl::Span<float> logits,
                                       const RowSampling* sampling) {
  const int64_t vocab = config().n_vocab;
  const size_t row_bytes = static_cast<size_t>(vocab) * sizeof(float);
  for (int64_t begin = 0; begin < rows; begin += logit_chunk_rows_) {
    const int64_t count = std::min(logit_chunk_rows_, rows - begin);
    if (rows > logit_chunk_rows_) RETURN_IF_ERROR(LogitsChunk(begin, count));
    if (sampling == nullptr) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          logits.data() + begin * vocab, logits_.get(), count * row_bytes,
          cudaMemcpyDeviceToHost, res_->stream));
      continue;
    }
    CUDA_RETURN_IF_ERROR(
        LaunchSampleRows(logits_.as<float>(), count, vocab,
                         sampling_device_.as<RowSampling>() + begin,
                         tokens_device_.as<int32_t>() + begin, res_->stream));
    // The host-sampled rows' logits, a run of consecutive rows per copy.
    for (int64_t j = 0; j < count;) {
      if (sampling[begin + j].in_engine) {
        ++j;
        continue;
      }
      int64_t end = j + 1;
      while (end < count && !sampling[begin + end].in_engine) ++end;
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          logits.data() + (begin + j) * vocab, logits_.as<float>() + j * vocab,
          (end - j) * row_bytes, cudaMemcpyDeviceToHost, res_->stream));
      j = end;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::CopyBlocks(
    absl::Span<const kvpager::BlockCopy> copies) {
  for (const kvpager::BlockCopy& copy : copies) {
    if (copy.src < 0 || copy.src >= options_.num_blocks || copy.dst < 0 ||
        copy.dst >= options_.num_blocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("block copy ", copy.src, " -> ", copy.dst,
                       ": the pool has ", options_.num_blocks, " blocks"));
    }
  }
  if (copies.empty()) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  const size_t block_bytes = KvBlockBytes();
  for (const kvpager::BlockCopy& copy : copies) {
    // Every slot: the block holds one group's layers, whichever it is.
    for (int64_t slot = 0; slot < kv_layout_.slots; ++slot) {
      auto* base =
          kv_pool_.as<uint8_t>() +
          slot * static_cast<size_t>(options_.num_blocks) * block_bytes;
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          base + copy.dst * block_bytes, base + copy.src * block_bytes,
          block_bytes, cudaMemcpyDeviceToDevice, res_->stream));
    }
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(res_->stream));
  return absl::OkStatus();
}

}  // namespace paceline::engine::cuda
