#include "engine/cpu/cpu_engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cpu/kernels/attention.h"

namespace paceline::engine::cpu {

absl::StatusOr<std::unique_ptr<CpuEngine>> CpuEngine::Create(
    std::shared_ptr<const ModelWeights> weights,
    const CpuEngineOptions& options) {
  if (weights == nullptr) return absl::InvalidArgumentError("no weights");
  const ModelConfig& c = weights->config();
  CpuEngineOptions o = options;
  if (o.block_size < 1 || o.block_size > kMaxAttentionBlockSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("block size ", o.block_size, " is not in [1, ",
                     kMaxAttentionBlockSize, "]"));
  }
  if (o.max_tokens_per_step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max tokens per step must be positive, got ", o.max_tokens_per_step));
  }
  if (o.num_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("number of KV blocks is negative: ", o.num_blocks));
  }
  KvLayout layout = PlanKvLayout(c, o.kv_window_release);
  if (o.num_blocks == 0) {
    o.num_blocks = static_cast<int32_t>(BlocksToHold(
        layout, o.block_size, c.context_length, o.max_tokens_per_step));
  }
  KvCacheShape shape;
  shape.n_layers = layout.slots;
  shape.n_kv_heads = c.n_kv_heads;
  shape.head_dim = c.head_dim;
  shape.block_size = o.block_size;
  shape.num_blocks = o.num_blocks;
  shape.dtype = o.kv_type;
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Create(shape));
  ASSIGN_OR_RETURN(std::vector<LayerProgram> programs, LayerPrograms(c));
  std::unique_ptr<CpuEngine> engine(
      new CpuEngine(std::move(weights), o, std::move(layout), std::move(cache),
                    std::move(programs)));
  RETURN_IF_ERROR(engine->PackMatrices());
  return engine;
}

namespace {

// Every matrix MatMul reads (a MoE layer's router and experts, a dense
// layer's FFN; the empty views of the other kind are skipped).
template <typename Fn>
absl::Status ForEachMatrix(const ModelWeights& weights, Fn&& fn) {
  for (const LayerWeights& w : weights.layers()) {
    for (const WeightView* v :
         {&w.attn_q, &w.attn_k, &w.attn_v, &w.attn_output, &w.ffn_gate,
          &w.ffn_up, &w.ffn_down, &w.ffn_gate_inp, &w.ffn_gate_shexp,
          &w.ffn_up_shexp, &w.ffn_down_shexp, &w.ssm_qkv, &w.ssm_z, &w.ssm_beta,
          &w.ssm_alpha, &w.ssm_ba, &w.ssm_out}) {
      if (v->rows > 0) RETURN_IF_ERROR(fn(*v));
    }
    for (const ExpertWeights& e : w.experts) {
      for (const WeightView* v : {&e.gate, &e.up, &e.down}) {
        RETURN_IF_ERROR(fn(*v));
      }
    }
  }
  return fn(weights.output());
}

// The config's RoPE, with the file's Llama 3 frequency factors if any.
RopeParams RopeParamsFor(const ModelWeights& weights) {
  return RopeParamsFromConfig(weights.config(), weights.rope_freq_factors());
}

bool ShouldPack(const WeightView& w, const CpuEngineOptions& options) {
  return options.pack_weights && MatMulPrefersPanels(w.type, w.cols);
}

}  // namespace

uint64_t CpuEngine::PackedBytes(const ModelWeights& weights,
                                const CpuEngineOptions& options) {
  uint64_t bytes = 0;
  (void)ForEachMatrix(weights, [&](const WeightView& w) {
    if (ShouldPack(w, options)) bytes += PackedMatrixBytes(w);
    return absl::OkStatus();
  });
  return bytes;
}

std::vector<WeightView> CpuEngine::Matrices(const ModelWeights& weights) {
  std::vector<WeightView> views;
  (void)ForEachMatrix(weights, [&](const WeightView& w) {
    views.push_back(w);
    return absl::OkStatus();
  });
  return views;
}

std::vector<WeightView*> CpuEngine::MatrixSlots() {
  std::vector<WeightView*> slots;
  for (LayerMatrices& m : matrices_) {
    for (WeightView* v :
         {&m.q, &m.k, &m.v, &m.o, &m.gate, &m.up, &m.down, &m.moe.router,
          &m.gate_shexp, &m.up_shexp, &m.down_shexp, &m.ssm_qkv, &m.ssm_z,
          &m.ssm_beta, &m.ssm_alpha, &m.ssm_ba, &m.ssm_out}) {
      if (v->rows > 0) slots.push_back(v);
    }
    for (ExpertWeights& e : m.moe.experts) {
      for (WeightView* v : {&e.gate, &e.up, &e.down}) slots.push_back(v);
    }
  }
  slots.push_back(&output_);
  return slots;
}

absl::Status CpuEngine::PackMatrices() {
  for (const LayerWeights& l : weights_->layers()) {
    matrices_.push_back(
        {l.attn_q, l.attn_k, l.attn_v, l.attn_output, l.ffn_gate, l.ffn_up,
         l.ffn_down, MoeLayerMatrices{l.ffn_gate_inp, l.experts},
         l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp, l.ssm_qkv, l.ssm_z,
         l.ssm_beta, l.ssm_alpha, l.ssm_ba, l.ssm_out});
  }
  output_ = weights_->output();
  const std::vector<WeightView*> slots = MatrixSlots();
  std::vector<WeightView> views;
  for (const WeightView* v : slots) views.push_back(*v);
  // Packed on the pool, a matrix at a time to whichever thread is free
  // (the output matrix alone can be a fifth of the model).
  std::vector<absl::StatusOr<PackedMatrix>> packed(views.size());
  std::atomic<size_t> next_matrix{0};
  pool_.ParallelFor(pool_.num_threads(), [&](int64_t, int64_t) {
    for (size_t i; (i = next_matrix.fetch_add(1)) < views.size();) {
      if (ShouldPack(views[i], options_)) packed[i] = PackForMatMul(views[i]);
    }
  });
  for (size_t i = 0; i < views.size(); ++i) {
    if (!ShouldPack(views[i], options_)) continue;
    if (!packed[i].ok()) return packed[i].status();
    *slots[i] = packed[i]->view();
    packed_bytes_ += packed[i]->bytes();
    packed_.push_back(*std::move(packed[i]));
  }
  kernel_summary_ = KernelSummary(slots);
  return absl::OkStatus();
}

std::string CpuEngine::KernelSummary(const std::vector<WeightView*>& slots) {
  // (type, layout) -> matrices, in type order.
  std::map<std::pair<GgmlType, WeightLayout>, int> counts;
  for (const WeightView* v : slots) ++counts[{v->type, v->layout}];
  std::string out;
  for (const auto& [key, count] : counts) {
    absl::StrAppend(&out, out.empty() ? "" : "; ",
                    GetGgmlTypeTraits(key.first).name, " x", count, " ",
                    MatMulKernelName(key.first, key.second));
  }
  return out;
}

CpuEngine::CpuEngine(std::shared_ptr<const ModelWeights> weights,
                     const CpuEngineOptions& options, KvLayout layout,
                     std::unique_ptr<KvCache> cache,
                     std::vector<LayerProgram> programs)
    : weights_(std::move(weights)),
      programs_(std::move(programs)),
      options_(options),
      kv_layout_(std::move(layout)),
      rope_(RopeParamsFor(*weights_)),
      rope_swa_(SlidingRopeParams(weights_->config())),
      has_sliding_(weights_->config().sliding_rope),
      cache_(std::move(cache)),
      pool_(options.num_threads) {
  const ModelConfig& c = weights_->config();
  const size_t t = static_cast<size_t>(options_.max_tokens_per_step);
  const size_t q_dim = static_cast<size_t>(c.n_heads * c.head_dim);
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads * c.head_dim);
  const size_t embd = static_cast<size_t>(c.n_embd);
  x_.resize(t * embd);
  h_.resize(t * embd);
  q_.resize(t * q_dim);
  k_.resize(t * kv_dim);
  v_.resize(t * kv_dim);
  att_.resize(t * q_dim);
  proj_.resize(t * embd);
  gate_.resize(t * static_cast<size_t>(c.n_ff));
  up_.resize(t * static_cast<size_t>(c.n_ff));
  cos_.resize(t * static_cast<size_t>(c.rope_dim / 2));
  sin_.resize(t * static_cast<size_t>(c.rope_dim / 2));
  if (has_sliding_) {
    cos_swa_.resize(cos_.size());
    sin_swa_.resize(sin_.size());
  }
  positions_.resize(t);
  token_table_.resize(t);
  block_tables_.resize(kv_layout_.groups.size());
  for (auto& tables : block_tables_) tables.reserve(t);
  limits_.n_vocab = c.n_vocab;
  limits_.block_size = options_.block_size;
  limits_.num_blocks = options_.num_blocks;
  limits_.max_tokens_per_step = options_.max_tokens_per_step;
  limits_.hidden_width = c.n_embd;
  if (kv_layout_.groups.size() > 1 || kv_layout_.groups[0].window > 0) {
    limits_.group_windows = kv_layout_.Windows();
  }
  last_.resize(t * embd);
  AllocateHybridBuffers();
  if (c.is_moe()) {
    moe_ = std::make_unique<MoeFfn>(c, options_.max_tokens_per_step);
    dense_bytes_ = weights_->MatMulBytes();
    for (size_t l = 0; l < weights_->layers().size(); ++l) {
      dense_bytes_ -= weights_->layers()[l].experts.size() *
                      weights_->ExpertBytes(static_cast<int64_t>(l));
    }
  }
}

void CpuEngine::AllocateHybridBuffers() {
  const ModelConfig& c = weights_->config();
  const size_t t = static_cast<size_t>(options_.max_tokens_per_step);
  const size_t q_dim = static_cast<size_t>(c.n_heads * c.head_dim);
  if (c.attn_output_gate) {
    qg_.resize(2 * t * q_dim);
    attn_gate_.resize(t * q_dim);
  }
  if (c.n_ff_shexp > 0) {
    shexp_.resize(t * static_cast<size_t>(c.n_embd));
    const size_t ff = static_cast<size_t>(std::max(c.n_ff, c.n_ff_shexp));
    gate_.resize(t * ff);
    up_.resize(t * ff);
  }
  if (c.NumRecurrentLayers() == 0) return;
  recurrent_index_.assign(static_cast<size_t>(c.n_layers), -1);
  int64_t r = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (c.IsRecurrentLayer(l)) recurrent_index_[l] = r++;
  }
  limits_.num_state_slots =
      options_.num_state_slots > 0 ? options_.num_state_slots : 16;
  state_floats_ = r * c.RecurrentStateFloats();
  states_.reset(new float[static_cast<size_t>(state_floats_) *
                          static_cast<size_t>(limits_.num_state_slots)]);
  const size_t conv = static_cast<size_t>(c.ssm_conv_dim());
  const size_t inner = static_cast<size_t>(c.ssm_value_dim());
  ssm_qkv_.resize(t * conv);
  ssm_conv_.resize(t * conv);
  ssm_z_.resize(t * inner);
  ssm_ba_.resize(t * 2 * static_cast<size_t>(c.ssm_v_heads));
  ssm_o_.resize(t * inner);
}

float* CpuEngine::State(int32_t slot, int64_t layer) {
  return states_.get() + slot * state_floats_ +
         recurrent_index_[layer] * config().RecurrentStateFloats();
}

absl::Status CpuEngine::CopyStates(
    absl::Span<const kvpager::StateCopy> copies) {
  const int32_t slots = limits_.num_state_slots;
  for (const kvpager::StateCopy& copy : copies) {
    if (copy.src < 0 || copy.src >= slots || copy.dst < 0 ||
        copy.dst >= slots) {
      return absl::InvalidArgumentError(absl::StrCat("state copy ", copy.src,
                                                     " -> ", copy.dst, ": ",
                                                     slots, " state slots"));
    }
  }
  for (const kvpager::StateCopy& copy : copies) {
    if (copy.src == copy.dst) continue;
    std::memcpy(states_.get() + copy.dst * state_floats_,
                states_.get() + copy.src * state_floats_,
                static_cast<size_t>(state_floats_) * sizeof(float));
  }
  return absl::OkStatus();
}

CpuEngine::~CpuEngine() = default;

absl::Status CpuEngine::MatMul(const WeightView& w, const float* x, int64_t n,
                               float* y) {
  return cpu::MatMul(w, x, n, y, pool_, matmul_scratch_);
}

absl::Status CpuEngine::MatMuls(std::initializer_list<WeightView> ws,
                                const float* x, int64_t n,
                                std::initializer_list<float*> ys) {
  // One pass of the pool for all of them when they can share the quantized
  // activations (files may mix types, e.g. a Q6_K V converted to Q8_0).
  bool same = true;
  for (const WeightView& w : ws) {
    same = same && w.type == ws.begin()->type && w.cols == ws.begin()->cols;
  }
  if (same) {
    return cpu::MatMulShared(absl::MakeConstSpan(ws.begin(), ws.size()), x, n,
                             absl::MakeConstSpan(ys.begin(), ys.size()), pool_,
                             matmul_scratch_);
  }
  auto y = ys.begin();
  for (const WeightView& w : ws) RETURN_IF_ERROR(MatMul(w, x, n, *y++));
  return absl::OkStatus();
}

absl::Status CpuEngine::Prepare(const ForwardBatch& batch,
                                absl::Span<float> logits) {
  RETURN_IF_ERROR(CheckForwardBatch(batch, logits.size(), limits_,
                                    absl::MakeSpan(token_table_)));
  for (auto& tables : block_tables_) tables.clear();
  slices_.assign(batch.sequences.begin(), batch.sequences.end());
  const bool grouped = block_tables_.size() > 1;
  for (const SequenceSlice& slice : batch.sequences) {
    for (int32_t i = 0; i < slice.token_count; ++i) {
      positions_[slice.token_begin + i] = slice.position_begin + i;
    }
    for (size_t g = 0; g < block_tables_.size(); ++g) {
      block_tables_[g].push_back(grouped ? slice.group_tables[g]
                                         : slice.block_table);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuEngine::Forward(const ForwardBatch& batch,
                                absl::Span<float> logits) {
  RETURN_IF_ERROR(Prepare(batch, logits));
  const ModelConfig& c = config();
  const int64_t n = batch.num_tokens();
  for (int64_t t = 0; t < n; ++t) {
    RETURN_IF_ERROR(weights_->Embed(batch.tokens[t], &x_[t * c.n_embd]));
  }
  if (c.embed_scale != 1.0) {  // gemma3: sqrt(n_embd)
    const float scale = static_cast<float>(c.embed_scale);
    for (int64_t i = 0; i < n * c.n_embd; ++i) x_[i] *= scale;
  }
  const int64_t half = c.rope_dim / 2;
  // A sin/cos pair costs about as much as 16 element-wise operations.
  ForRows(n, 16 * half, [&](int64_t b, int64_t e) {
    RopeAngles(&positions_[b], e - b, rope_, &cos_[b * half], &sin_[b * half]);
    if (!has_sliding_) return;
    RopeAngles(&positions_[b], e - b, rope_swa_, &cos_swa_[b * half],
               &sin_swa_[b * half]);
  });
  last_step_weight_bytes_ =
      moe_ != nullptr ? dense_bytes_ : weights_->MatMulBytesPerToken();
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    RETURN_IF_ERROR(RunLayer(layer, n));
  }
  WriteHidden(batch);
  return ComputeLogits(batch, logits);
}

void CpuEngine::WriteHidden(const ForwardBatch& batch) {
  const ModelConfig& c = config();
  int64_t rows = 0;
  for (const SequenceSlice& s : batch.sequences) {
    if (s.num_hidden == 0) continue;
    const int64_t end = s.token_begin + s.token_count;
    RmsNorm(&x_[(end - s.num_hidden) * c.n_embd],
            weights_->output_norm().data(), s.num_hidden, c.n_embd,
            static_cast<float>(c.rms_norm_eps), &batch.hidden[rows * c.n_embd]);
    rows += s.num_hidden;
  }
}

void CpuEngine::WriteKv(int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const int64_t bs = options_.block_size;
  const int64_t kv_slot = kv_layout_.slot_of_layer[layer];
  const std::vector<absl::Span<const int32_t>>& tables =
      block_tables_[kv_layout_.group_of_layer[layer]];
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = positions_[t];
    const int64_t block = tables[token_table_[t]][pos / bs];
    const int64_t slot = pos % bs;
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      const int64_t src = (t * c.n_kv_heads + h) * c.head_dim;
      cache_->WriteRow(kv_slot, block, 0, h, slot, &k_[src]);
      cache_->WriteRow(kv_slot, block, 1, h, slot, &v_[src]);
    }
  }
}

absl::Status CpuEngine::ComputeLogits(const ForwardBatch& batch,
                                      absl::Span<float> logits) {
  const ModelConfig& c = config();
  int64_t rows = 0;
  for (const SequenceSlice& s : batch.sequences) {
    const int64_t end = s.token_begin + s.token_count;
    for (int64_t t = end - s.num_logits; t < end; ++t, ++rows) {
      std::memcpy(&last_[rows * c.n_embd], &x_[t * c.n_embd],
                  static_cast<size_t>(c.n_embd) * sizeof(float));
    }
  }
  if (rows == 0) return absl::OkStatus();
  RmsNorm(last_.data(), weights_->output_norm().data(), rows, c.n_embd,
          static_cast<float>(c.rms_norm_eps), last_.data());
  return MatMul(output_, last_.data(), rows, logits.data());
}

absl::Status CpuEngine::CopyBlocks(
    absl::Span<const kvpager::BlockCopy> copies) {
  for (const kvpager::BlockCopy& copy : copies) {
    if (copy.src < 0 || copy.src >= options_.num_blocks || copy.dst < 0 ||
        copy.dst >= options_.num_blocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("block copy ", copy.src, " -> ", copy.dst,
                       ": the pool has ", options_.num_blocks, " blocks"));
    }
  }
  for (const kvpager::BlockCopy& copy : copies) {
    cache_->CopyBlock(copy.src, copy.dst);
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine::cpu
