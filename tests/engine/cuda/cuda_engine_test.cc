// The CUDA engine against the CPU engine: the stories260K greedy oracle
// token for token, small random models of each architecture (llama,
// qwen2 with QKV bias, qwen3 with Q/K norm, qwen3moe, gemma3 with sliding
// windows, post-norms and GeGLU, gpt-oss with sinks, biases and a biased
// MoE) step by step over chunked
// prefill, mixed prefill + decode steps, scattered and copied blocks, and
// K-quant files against their dequantized weights — every logit row within
// tolerance of the CPU engine's; the oracle's qwen3moe files; and the
// hybrids' files (DeltaNet state slots: sequences together and alone, a
// copied slot).

#include "engine/cuda/cuda_engine.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cuda/cuda_device.h"
#include "engine/model/layer_program.h"
#include "engine/model/model_shapes.h"
#include "engine/model_loader.h"
#include "engine/sampling/row_sampling.h"
#include "gtest/gtest.h"
#include "kvpager/block_table.h"
#include "tests/engine/cpu/engine_test_util.h"
#include "tests/engine/cuda/cuda_test_util.h"
#include "tests/engine/cuda/file_type_weights.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/oracle_logits.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::engine::cuda {
namespace {

using ::paceline::engine::testing::Argmax;
using ::paceline::engine::testing::ContiguousBlocks;
using ::paceline::engine::testing::GenerateAlone;

TEST(CudaEngineCreateTest, NoDeviceIsFailedPrecondition) {
  auto devices = ListCudaDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  if (!devices->empty()) GTEST_SKIP() << "this machine has a CUDA device";
  auto shape = FindModelShape("stories15m");
  ASSERT_TRUE(shape.ok());
  shape->n_layers = 1;
  auto weights = ModelWeights::Dummy(*shape, GgmlType::kF32, 1);
  ASSERT_TRUE(weights.ok()) << weights.status();
  auto engine = CudaEngine::Create(std::move(*weights), CudaEngineOptions{});
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine.status().message(), "no CUDA device");
}

// Gemma 3's shape at test size: 3 layers, sliding window 32 on layers 0
// and 1 (RoPE base 1e4, unscaled), global layer 2 (base 1e6, linear x8),
// the embedding x 16, an attention scale of its own, post-norms, GeGLU,
// a tied head; as arch/gemma3.cc reads a file's keys.
ModelConfig Gemma3Config() {
  auto shape = FindModelShape("stories15m");
  EXPECT_TRUE(shape.ok()) << shape.status();
  ModelConfig c = *shape;
  c.architecture = "gemma3";
  c.n_layers = 3;
  c.n_embd = 256;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.rope_dim = 64;
  c.n_ff = 384;
  c.n_vocab = 512;
  c.context_length = 1024;
  c.rms_norm_eps = 1e-6;
  c.rope_layout = RopeLayout::kNeoxHalves;
  c.rope_freq_base = 1e6;
  c.rope_scaling = RopeScaling::kLinear;
  c.rope_scaling_factor = 8;
  c.rope_freq_base_swa = 1e4;
  c.sliding_window = 32;
  c.swa_period = 3;
  c.sliding_rope = true;
  c.qk_norm = true;
  c.post_norms = true;
  c.ffn_activation = FfnActivation::kGeluTanh;
  c.embed_scale = 16;
  c.attention_scale = 0.1;
  c.tied_output = true;
  return c;
}

// gpt-oss's shape at test size: 2 layers, layer 0 sliding (window 32),
// layer 1 full, YaRN (factor 4 over an original context of 256), Q/K/V
// and output biases, attention sinks, 8 experts (4 used) with a biased
// router, biased experts and SwiGLU-OAI; as arch/gpt_oss.cc configures it.
ModelConfig GptOssConfig() {
  auto shape = FindModelShape("stories110m-moe");
  EXPECT_TRUE(shape.ok()) << shape.status();
  ModelConfig c = *shape;
  c.architecture = "gpt-oss";
  c.n_layers = 2;
  c.n_embd = 256;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.rope_dim = 64;
  c.n_vocab = 512;
  c.context_length = 1024;
  c.n_expert = 8;
  c.n_expert_used = 4;
  c.n_ff_exp = 128;
  c.rope_layout = RopeLayout::kNeoxHalves;
  c.rope_freq_base = 150000;
  c.rope_scaling = RopeScaling::kYarn;
  c.rope_scaling_factor = 4;
  c.rope_original_context = 256;
  c.sliding_window = 32;
  c.swa_period = 2;
  c.qkv_bias = true;
  c.attn_output_bias = true;
  c.attn_sinks = true;
  c.moe_biases = true;
  c.ffn_activation = FfnActivation::kSwigluOai;
  return c;
}

// Gemma 3's and gpt-oss's layer programs pass the engine's check
// (CudaModelTest runs them); an operation the engine has no kernels or buffers
// for is refused, naming the layer and the operation, rather than run wrong.
TEST(CudaProgramTest, RunsGemma3AndGptOssAndRefusesWhatItLacks) {
  auto gpt_oss = LayerPrograms(GptOssConfig());
  ASSERT_TRUE(gpt_oss.ok()) << gpt_oss.status();
  EXPECT_TRUE(CudaEngine::CheckPrograms(*gpt_oss).ok())
      << CudaEngine::CheckPrograms(*gpt_oss);
  auto programs = LayerPrograms(Gemma3Config());
  ASSERT_TRUE(programs.ok()) << programs.status();
  EXPECT_TRUE(CudaEngine::CheckPrograms(*programs).ok())
      << CudaEngine::CheckPrograms(*programs);
  // Unsupported: a mixture of experts whose output is kept apart from the
  // residual (this engine's MoE adds into x), and a norm of attention's
  // T-typed output.
  Op moe = ops::FeedForward(Buf::kH, Buf::kProj, /*moe=*/true,
                            /*accumulate=*/false);
  Op norm_att = ops::RmsNorm(Buf::kAtt, Buf::kH, Weight::kAttnNorm);
  for (const Op& op : {moe, norm_att}) {
    std::vector<LayerProgram> bad = *programs;
    bad[1].ops.insert(bad[1].ops.begin() + 2, op);
    const absl::Status s = CudaEngine::CheckPrograms(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_NE(s.message().find("operation 2 of layer 1"), std::string::npos)
        << s;
  }
}

TEST(CudaEngineFootprintTest, DtypeAndBytesFromTheWeights) {
  auto shape = FindModelShape("qwen2-0.5b");  // tied output
  ASSERT_TRUE(shape.ok());
  shape->n_layers = 1;
  shape->n_vocab = 1024;
  const uint64_t q_dim = shape->n_heads * shape->head_dim;
  const uint64_t kv_dim = shape->n_kv_heads * shape->head_dim;
  const uint64_t matrices = (q_dim + 2 * kv_dim) * shape->n_embd +
                            shape->n_embd * q_dim +
                            3 * shape->n_ff * shape->n_embd;
  const uint64_t embedding = shape->n_vocab * shape->n_embd;
  const struct {
    GgmlType type;
    GgmlType dtype;
  } cases[] = {{GgmlType::kF32, GgmlType::kF32},
               {GgmlType::kF16, GgmlType::kF16},
               {GgmlType::kBF16, GgmlType::kBF16},
               {GgmlType::kQ8_0, GgmlType::kF16},
               {GgmlType::kQ4_0, GgmlType::kF16}};
  for (const auto& c : cases) {
    auto weights = ModelWeights::Dummy(*shape, c.type, 1);
    ASSERT_TRUE(weights.ok()) << weights.status();
    const CudaEngineFootprint f = CudaEngine::Footprint(**weights);
    EXPECT_EQ(f.dtype, c.dtype) << GetGgmlTypeTraits(c.type).name;
    const uint64_t elem = GgmlBlockBytes(c.dtype);
    // Q8_0 and Q4_0 matrices stay quantized; the embedding is T.
    const uint64_t matrix_bytes = c.type == GgmlType::kQ8_0 ? matrices / 32 * 34
                                  : c.type == GgmlType::kQ4_0
                                      ? matrices / 32 * 18
                                      : matrices * elem;
    EXPECT_EQ(f.weight_bytes, matrix_bytes + embedding * elem);
    EXPECT_EQ(f.kv_dtype, c.dtype);
    EXPECT_EQ(f.kv_bytes_per_token, 2 * elem * kv_dim);
    // Another KV type changes the KV bytes only: Q8_0 34 bytes per 32.
    CudaEngineOptions q8;
    q8.kv_dtype = GgmlType::kQ8_0;
    const CudaEngineFootprint fq = CudaEngine::Footprint(**weights, q8);
    EXPECT_EQ(fq.dtype, c.dtype);
    EXPECT_EQ(fq.weight_bytes, f.weight_bytes);
    EXPECT_EQ(fq.kv_dtype, GgmlType::kQ8_0);
    EXPECT_EQ(fq.kv_bytes_per_token, 2 * kv_dim / 32 * 34);
  }
}

class CudaStoriesTest : public testing::GpuTest {};

TEST_F(CudaStoriesTest, Greedy64TokensMatchCpuAndLlamaCpp) {
  auto model = OpenModel(::paceline::testing::kStories260KPath);
  ASSERT_TRUE(model.ok()) << model.status();
  CudaEngineOptions options;
  options.num_blocks = 64;
  options.max_tokens_per_step = 256;
  auto gpu = CudaEngine::Create(model->weights, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->dtype(), GgmlType::kF32);
  cpu::CpuEngineOptions cpu_options;
  cpu_options.kv_type = GgmlType::kF32;  // the reference's cache
  cpu_options.num_blocks = 64;
  cpu_options.num_threads = 2;
  auto cpu_engine = cpu::CpuEngine::Create(model->weights, cpu_options);
  ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();
  const std::vector<int32_t>& prompt =
      ::paceline::testing::kOnceUponATimePrompt;
  for (int64_t chunk : {0, 2}) {
    SCOPED_TRACE(chunk);
    auto want = GenerateAlone(**cpu_engine, prompt, 64, chunk,
                              ContiguousBlocks(**cpu_engine, 5 + 64));
    ASSERT_TRUE(want.ok()) << want.status();
    // Blocks in reverse order: scattered, not 0, 1, 2, ...
    std::vector<int32_t> blocks = ContiguousBlocks(**gpu, 5 + 64, 50);
    std::reverse(blocks.begin(), blocks.end());
    auto got = GenerateAlone(**gpu, prompt, 64, chunk, blocks);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->tokens, ::paceline::testing::kGreedy64Ids);
    EXPECT_EQ(got->tokens, want->tokens);
    for (size_t i = 0; i < got->logits.size(); ++i) {
      testing::ExpectClose(got->logits[i], want->logits[i], 1e-4, 1e-4,
                           "stories260K logits");
    }
  }
}

// A small model of `architecture`'s layout: 2 layers, GQA 8/2, head 64;
// "gemma3": Gemma3Config(); "gpt-oss": GptOssConfig().
ModelConfig SmallConfig(const std::string& shape_name) {
  if (shape_name == "gemma3") return Gemma3Config();
  if (shape_name == "gpt-oss") return GptOssConfig();
  auto shape = FindModelShape(shape_name);
  EXPECT_TRUE(shape.ok()) << shape.status();
  ModelConfig c = *shape;
  c.n_layers = 2;
  c.n_embd = 256;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.rope_dim = 64;
  c.n_ff = 384;
  c.n_vocab = 512;
  c.context_length = 1024;
  if (c.is_moe()) c.n_ff_exp = 128;  // 8 experts, 2 used
  return c;
}

struct ModelCase {
  const char* shape;  // its architecture's flags are kept
  GgmlType type;
  double tol;  // atol and rtol, relative to the largest |logit|
  // MoE: experts per layer when not the shape's. As many as are used
  // makes routing unable to flip between the engines (quantized types
  // round the router's input differently on each).
  int64_t n_expert = 0;
  // A KV cache type for both engines; unset: each engine's default (CUDA
  // the device dtype, the CPU F32).
  std::optional<GgmlType> kv = std::nullopt;
};

void PrintTo(const ModelCase& mc, std::ostream* os) {
  *os << mc.shape << " " << GetGgmlTypeTraits(mc.type).name;
  if (mc.kv.has_value()) *os << " KV " << GgmlTypeName(*mc.kv);
}

// The oracle's qwen3moe files (../shared/oracle: 8 experts, 2 used):
// the first reference prompt and 8 greedy tokens, logits within tolerance
// of the CPU engine's (itself checked against llama.cpp's by
// oracle_logits_test).
class CudaMoeFileTest : public testing::GpuTest {};

TEST_F(CudaMoeFileTest, OracleQwen3MoeFilesMatchCpu) {
  const std::vector<int32_t> prompt = {1, 75, 465, 498, 130, 79, 122, 101};
  for (const auto& [name, tol] :
       {std::pair<const char*, double>{"qwen3moe-base-f32", 1e-4},
        std::pair<const char*, double>{"qwen3moe-base-q8_0", 5e-2}}) {
    SCOPED_TRACE(name);
    const std::string path =
        ::paceline::testing::SharedPath("oracle/models/") + name + ".gguf";
    auto model = OpenModel(path);
    if (!model.ok()) GTEST_SKIP() << path << ": " << model.status();
    CudaEngineOptions options;
    options.num_blocks = 8;
    options.max_tokens_per_step = 16;
    auto gpu = CudaEngine::Create(model->weights, options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    cpu::CpuEngineOptions cpu_options;
    cpu_options.kv_type = GgmlType::kF32;  // the reference's cache
    cpu_options.num_blocks = 8;
    cpu_options.max_tokens_per_step = 16;
    cpu_options.num_threads = 2;
    auto cpu_engine = cpu::CpuEngine::Create(model->weights, cpu_options);
    ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();
    const std::vector<int32_t> blocks = ContiguousBlocks(**gpu, 16);
    auto want = GenerateAlone(**cpu_engine, prompt, 8, 0, blocks);
    auto got = GenerateAlone(**gpu, prompt, 8, 3, blocks);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->tokens, want->tokens);
    for (size_t i = 0; i < got->logits.size(); ++i) {
      float scale = 0;
      for (float x : want->logits[i]) scale = std::max(scale, std::fabs(x));
      testing::ExpectClose(got->logits[i], want->logits[i], tol * scale, tol,
                           "qwen3moe logits");
    }
  }
}

// The oracle-next hybrids (qwen35: DeltaNet layers 0-2, gated attention
// layer 3; qwen3next: fused ssm_ba, grouped key heads, a MoE with a shared
// expert; the quantized files in their file types, F16 activations,
// against the CPU engine on the same weights widened to F32): two sequences in
// state slots 2 and 0 over chunked prefill and decode steps together, every
// logit row within `tol` of the largest |logit| of the CPU engine's on the same
// script; each sequence alone (slot 1 of a second engine) gives the rows it
// gave together, within `tol` too (attention's split plan and cuBLAS's
// algorithm follow the step's shape: on the emulation F32 rows differ by
// 1e-6, F16 ones by 1e-3 of the largest |logit|; a state leaking between
// slots would be O(1)); and a third sequence continued from a copy of the
// first's blocks and state slot (CopyStates 2 -> 3) gives the first's rows
// when both are fed the same tokens in one step: bit for bit on the
// emulation, within 1e-5 of the largest |logit| on a GPU. Measured on the
// emulation (2026-12-07), the worst |cuda - cpu| over the largest |logit|:
// qwen35 F32 1.4e-6, qwen3next F32 9.6e-7, qwen35moe Q8_0 6.3e-4,
// qwen3next Q4_K_M 3.0e-3 (with random prompts, qwen35 Q4_K_M 1.4e-3,
// qwen35moe Q4_K_M 3.4e-3).
struct HybridCase {
  const char* file;  // ../shared/oracle-next/models/FILE.gguf
  double tol;
};

void PrintTo(const HybridCase& hc, std::ostream* os) { *os << hc.file; }

class CudaHybridFileTest : public testing::GpuTest,
                           public ::testing::WithParamInterface<HybridCase> {};

TEST_P(CudaHybridFileTest, SlotsTogetherAloneAndCopiedMatchCpu) {
  const HybridCase& hc = GetParam();
  const std::string path = (::paceline::testing::OracleNextDir() / "models" /
                            (std::string(hc.file) + ".gguf"))
                               .string();
  auto quantized = testing::LoadRetyped(path, testing::ViewTypes::kFileTypes);
  if (!quantized.ok() && absl::IsNotFound(quantized.status())) {
    GTEST_SKIP() << quantized.status();
  }
  ASSERT_TRUE(quantized.ok()) << quantized.status();
  auto widened = testing::LoadRetyped(path, testing::ViewTypes::kF32);
  ASSERT_TRUE(widened.ok()) << widened.status();
  const ModelConfig& c = quantized->weights->config();
  ASSERT_GT(c.NumRecurrentLayers(), 0);
  constexpr int32_t kBlocks = 16, kBlockSize = 16;
  CudaEngineOptions options;
  options.num_blocks = kBlocks;
  options.block_size = kBlockSize;
  options.max_tokens_per_step = 64;
  options.kv_dtype = GgmlType::kF32;  // the reference's cache
  options.num_state_slots = 4;
  auto gpu = CudaEngine::Create(quantized->weights, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->num_state_slots(), 4);
  const CudaEngineFootprint f =
      CudaEngine::Footprint(*quantized->weights, options);
  EXPECT_EQ(f.state_bytes, 4 * static_cast<uint64_t>(c.RecurrentStateBytes()));
  EXPECT_EQ(f.weight_bytes, (*gpu)->weight_bytes());
  // K and V rows of the attention layers only.
  EXPECT_EQ(f.kv_bytes_per_token,
            2 * sizeof(float) * c.head_dim * c.n_kv_heads *
                static_cast<uint64_t>(c.n_layers - c.NumRecurrentLayers()));
  auto alone = CudaEngine::Create(quantized->weights, options);
  ASSERT_TRUE(alone.ok()) << alone.status();
  cpu::CpuEngineOptions cpu_options;
  cpu_options.kv_type = GgmlType::kF32;
  cpu_options.num_blocks = kBlocks;
  cpu_options.block_size = kBlockSize;
  cpu_options.max_tokens_per_step = 64;
  cpu_options.num_threads = 2;
  cpu_options.num_state_slots = 4;
  auto cpu_engine = cpu::CpuEngine::Create(widened->weights, cpu_options);
  ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();
  const int64_t vocab = c.n_vocab;

  // Sequence s: blocks tables[s], state slot slots[s]; 2 starts as a copy
  // of 0.
  const std::vector<std::vector<int32_t>> tables = {
      {0, 1, 2, 3}, {4, 5}, {6, 7, 8, 9}};
  const std::vector<int32_t> slots = {2, 0, 3};
  std::vector<std::vector<int32_t>> prompts = {std::vector<int32_t>(37),
                                               std::vector<int32_t>(5)};
  // Fixed prompts: the quantized MoE files' routers see F16 activations
  // here, F32 on the CPU, and a random prompt now and then meets a near-tie
  // (seen once in 20 runs: one row 0.10 of the largest |logit| apart).
  std::mt19937 prompt_rng(1);
  for (auto& p : prompts) {
    for (int32_t& t : p) {
      t = static_cast<int32_t>(1 + prompt_rng() % (vocab - 1));
    }
  }
  std::vector<int32_t> done(3, 0);  // positions fed per sequence
  std::vector<int32_t> next(3, 0);  // next decode token per sequence
  // Every slice of sequences 0 and 1 as run together: its tokens, first
  // position and logit row, for the replay alone.
  struct Fed {
    int seq;
    std::vector<int32_t> tokens;
    int32_t position_begin;
    std::vector<float> row;
  };
  std::vector<Fed> fed;
  double max_rel = 0;  // the worst |gpu - cpu| over the largest |logit|
  // One step of (sequence, prompt tokens or 0 for one decode token), every
  // slice with its last row; returns the GPU's rows.
  const auto step = [&](const std::vector<std::pair<int, int32_t>>& parts) {
    ForwardBatch batch;
    for (const auto& [seq, count] : parts) {
      SequenceSlice slice;
      slice.token_begin = batch.num_tokens();
      slice.position_begin = done[seq];
      slice.block_table = tables[seq];
      slice.num_logits = 1;
      slice.state_slot = slots[seq];
      if (count > 0) {
        const auto& p = prompts[seq];
        batch.tokens.insert(batch.tokens.end(), p.begin() + done[seq],
                            p.begin() + done[seq] + count);
        slice.token_count = count;
      } else {
        batch.tokens.push_back(next[seq]);
        slice.token_count = 1;
      }
      batch.sequences.push_back(slice);
    }
    std::vector<float> want(parts.size() * vocab), got(want.size(), NAN);
    EXPECT_TRUE((*cpu_engine)->Forward(batch, absl::MakeSpan(want)).ok());
    const absl::Status s = (*gpu)->Forward(batch, absl::MakeSpan(got));
    EXPECT_TRUE(s.ok()) << s;
    float scale = 0;
    for (float x : want) scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < got.size(); ++i) {
      max_rel = std::max(
          max_rel, static_cast<double>(std::fabs(got[i] - want[i])) / scale);
    }
    testing::ExpectClose(got, want, hc.tol * scale, hc.tol, "logits");
    for (size_t i = 0; i < parts.size(); ++i) {
      const SequenceSlice& slice = batch.sequences[i];
      const int seq = parts[i].first;
      if (seq < 2) {
        const auto first = batch.tokens.begin() + slice.token_begin;
        fed.push_back(
            Fed{seq, std::vector<int32_t>(first, first + slice.token_count),
                slice.position_begin,
                std::vector<float>(got.begin() + i * vocab,
                                   got.begin() + (i + 1) * vocab)});
      }
      done[seq] += slice.token_count;
      next[seq] = Argmax(
          absl::MakeSpan(want).subspan(i * vocab, static_cast<size_t>(vocab)));
    }
    return got;
  };
  // Chunked prefill of 0 (16 + 21) beside the whole prompt of 1, then
  // same-shape decode steps (on a GPU, a dense model's second is captured
  // as a CUDA graph).
  step({{0, 16}, {1, 5}});
  step({{1, 0}, {0, 21}});
  for (int i = 0; i < 4; ++i) step({{0, 0}, {1, 0}});
  // Sequence 2 continues from a copy of 0's blocks and state.
  std::vector<kvpager::BlockCopy> copies;
  for (int b = 0; b < (done[0] + kBlockSize - 1) / kBlockSize; ++b) {
    copies.push_back({tables[0][b], tables[2][b]});
  }
  const std::vector<kvpager::StateCopy> state_copies = {{slots[0], slots[2]}};
  for (Engine* e : {static_cast<Engine*>(gpu->get()),
                    static_cast<Engine*>(cpu_engine->get())}) {
    ASSERT_TRUE(e->CopyBlocks(copies).ok());
    ASSERT_TRUE(e->CopyStates(state_copies).ok());
  }
  const std::vector<kvpager::StateCopy> bad = {{0, 4}};  // slot 4 of 4
  EXPECT_EQ((*gpu)->CopyStates(bad).code(), absl::StatusCode::kInvalidArgument);
  done[2] = done[0];
  const double exact_tol = testing::kEmulated ? 0.0 : 1e-5;
  for (int i = 0; i < 3; ++i) {
    next[2] = next[0];
    const std::vector<float> got = step({{2, 0}, {0, 0}});
    const std::vector<float> copied(got.begin(), got.begin() + vocab);
    const std::vector<float> original(got.begin() + vocab, got.end());
    float scale = 0;
    for (float x : original) scale = std::max(scale, std::fabs(x));
    testing::ExpectClose(copied, original, exact_tol * scale, 0,
                         "copied state");
  }
  // Each of 0 and 1 alone, in slot 1, the same slices in the same order.
  for (int seq : {0, 1}) {
    SCOPED_TRACE(seq);
    for (const Fed& f : fed) {
      if (f.seq != seq) continue;
      ForwardBatch batch;
      batch.tokens = f.tokens;
      batch.sequences.push_back(
          SequenceSlice{.token_begin = 0,
                        .token_count = static_cast<int32_t>(f.tokens.size()),
                        .position_begin = f.position_begin,
                        .block_table = tables[seq],
                        .num_logits = 1,
                        .state_slot = 1});
      std::vector<float> got(vocab, NAN);
      ASSERT_TRUE((*alone)->Forward(batch, absl::MakeSpan(got)).ok());
      float scale = 0;
      for (float x : f.row) scale = std::max(scale, std::fabs(x));
      testing::ExpectClose(got, f.row, hc.tol * scale, hc.tol, "alone");
    }
  }
  std::cout << hc.file << ": max |cuda - cpu| " << max_rel
            << " of the largest |logit|\n";
}

INSTANTIATE_TEST_SUITE_P(
    Files, CudaHybridFileTest,
    ::testing::Values(HybridCase{"qwen35-base-f32", 1e-4},
                      HybridCase{"qwen3next-base-f32", 1e-4},
                      HybridCase{"qwen35moe-base-q8_0", 2e-2},
                      HybridCase{"qwen3next-base-q4_k_m", 2e-2}),
    [](const auto& info) {
      std::string s = info.param.file;
      for (char& ch : s) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return s;
    });

class CudaModelTest : public testing::GpuTest,
                      public ::testing::WithParamInterface<ModelCase> {};

// The same script of steps on both engines; every logit row compared.
TEST_P(CudaModelTest, MatchesCpuOverChunkedPrefillDecodeAndCopies) {
  const ModelCase& mc = GetParam();
  ModelConfig config = SmallConfig(mc.shape);
  if (mc.n_expert > 0) config.n_expert = config.n_expert_used = mc.n_expert;
  auto weights = ModelWeights::Dummy(config, mc.type, seed_);
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::shared_ptr<const ModelWeights> shared = std::move(*weights);
  constexpr int32_t kBlocks = 96, kBlockSize = 16;
  CudaEngineOptions options;
  options.num_blocks = kBlocks;
  options.block_size = kBlockSize;
  options.max_tokens_per_step = 128;
  options.kv_dtype = mc.kv;
  auto gpu = CudaEngine::Create(shared, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  // The same without CUDA graphs: identical logits, bit for bit.
  options.cuda_graphs = false;
  auto direct = CudaEngine::Create(shared, options);
  ASSERT_TRUE(direct.ok()) << direct.status();
  cpu::CpuEngineOptions cpu_options;
  cpu_options.kv_type = GgmlType::kF32;  // the reference's cache
  cpu_options.num_blocks = kBlocks;
  cpu_options.block_size = kBlockSize;
  cpu_options.max_tokens_per_step = 128;
  cpu_options.num_threads = 2;
  if (mc.kv.has_value()) cpu_options.kv_type = testing::CpuKvType(*mc.kv);
  auto cpu_engine = cpu::CpuEngine::Create(shared, cpu_options);
  ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();
  const int64_t vocab = shared->config().n_vocab;

  // Three sequences, each with 10 scattered blocks (160 positions).
  std::vector<int32_t> ids(kBlocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng_);
  std::vector<std::vector<int32_t>> tables(4);
  for (int s = 0; s < 4; ++s) {
    tables[s].assign(ids.begin() + s * 10, ids.begin() + s * 10 + 10);
  }
  std::vector<std::vector<int32_t>> prompts = {std::vector<int32_t>(37),
                                               std::vector<int32_t>(5),
                                               std::vector<int32_t>(70)};
  for (auto& p : prompts) {
    for (int32_t& t : p) t = static_cast<int32_t>(rng_() % vocab);
  }
  std::vector<int32_t> done(4, 0);  // positions written per sequence
  std::vector<int32_t> next(4, 0);  // next decode token per sequence

  struct Part {
    int seq;
    int32_t count;  // prompt tokens, or 0 for one decode token
    bool logits;
  };
  const auto step = [&](const std::vector<Part>& parts) {
    ForwardBatch batch;
    for (const Part& part : parts) {
      SequenceSlice slice;
      slice.token_begin = batch.num_tokens();
      slice.position_begin = done[part.seq];
      slice.block_table = tables[part.seq];
      slice.num_logits = part.logits ? 1 : 0;
      if (part.count > 0) {
        const auto& p = prompts[part.seq];
        batch.tokens.insert(batch.tokens.end(), p.begin() + done[part.seq],
                            p.begin() + done[part.seq] + part.count);
        slice.token_count = part.count;
      } else {
        batch.tokens.push_back(next[part.seq]);
        slice.token_count = 1;
      }
      batch.sequences.push_back(slice);
    }
    const size_t rows = static_cast<size_t>(NumLogitRows(batch));
    std::vector<float> want(rows * vocab), got(rows * vocab, NAN);
    ASSERT_TRUE((*cpu_engine)->Forward(batch, absl::MakeSpan(want)).ok());
    const absl::Status s = (*gpu)->Forward(batch, absl::MakeSpan(got));
    ASSERT_TRUE(s.ok()) << s;
    std::vector<float> got_direct(rows * vocab, NAN);
    ASSERT_TRUE((*direct)->Forward(batch, absl::MakeSpan(got_direct)).ok());
    testing::ExpectClose(got, got_direct, 0, 0, "graphs vs direct");
    float scale = 0;
    for (float x : want) scale = std::max(scale, std::fabs(x));
    testing::ExpectClose(got, want, mc.tol * scale, mc.tol, "logits");
    size_t row = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const SequenceSlice& slice = batch.sequences[i];
      done[parts[i].seq] += slice.token_count;
      if (slice.num_logits > 0) {
        next[parts[i].seq] = Argmax(absl::MakeSpan(want).subspan(
            row * vocab, static_cast<size_t>(vocab)));
        ++row;
      }
    }
  };
  // Chunked prefill of 0 (16 + 21) beside the whole prompt of 1.
  step({{0, 16, false}, {1, 5, true}});
  step({{1, 0, true}, {0, 21, true}});
  // 2's long prompt in one step while 0 and 1 decode.
  step({{0, 0, true}, {2, 70, true}, {1, 0, true}});
  // Same-shape decode steps: the second is captured as a graph, the rest
  // replay it.
  for (int i = 0; i < 6; ++i) step({{2, 0, true}, {0, 0, true}, {1, 0, true}});
  // Copy-on-write: sequence 3 continues from a copy of 0's blocks.
  std::vector<kvpager::BlockCopy> copies;
  for (int b = 0; b < (done[0] + kBlockSize - 1) / kBlockSize; ++b) {
    copies.push_back({tables[0][b], tables[3][b]});
  }
  ASSERT_TRUE((*cpu_engine)->CopyBlocks(copies).ok());
  ASSERT_TRUE((*gpu)->CopyBlocks(copies).ok());
  ASSERT_TRUE((*direct)->CopyBlocks(copies).ok());
  done[3] = done[0];
  next[3] = next[0];
  for (int i = 0; i < 4; ++i) step({{3, 0, true}, {0, 0, true}});
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, CudaModelTest,
    ::testing::Values(
        ModelCase{"stories15m", GgmlType::kF32, 1e-4},
        ModelCase{"qwen2-0.5b", GgmlType::kF32, 1e-4},
        ModelCase{"qwen3-0.6b", GgmlType::kF32, 1e-4},
        ModelCase{"qwen3-0.6b", GgmlType::kF16, 2e-2},
        ModelCase{"llama-1b", GgmlType::kBF16, 5e-2},
        ModelCase{"qwen3-0.6b", GgmlType::kQ8_0, 5e-2},
        ModelCase{"llama-1b", GgmlType::kQ4_0, 5e-2},
        ModelCase{"stories110m-moe", GgmlType::kF32, 1e-4},
        ModelCase{"stories110m-moe", GgmlType::kQ8_0, 5e-2, 2},
        // Sliding windows crossed by every sequence (37, 70, 5 + decode
        // positions over a window of 32), post-norms, GeGLU, a tied head.
        // F32 at 1e-3: GeGLU's F16 rounding of the gate (as llama.cpp's
        // table) turns a last-bit difference into an F16 step, and the
        // post-norms scale it up; a 1-ulp change of the embedding scale
        // alone moves the CPU engine's own logits by 6e-5 of the largest.
        // Measured here 0.9e-4 to 2.5e-4 over six seeds.
        ModelCase{"gemma3", GgmlType::kF32, 1e-3},
        ModelCase{"gemma3", GgmlType::kF16, 2e-2},
        ModelCase{"gemma3", GgmlType::kQ8_0, 5e-2},
        // Sinks, biases, the windowed layer 0, YaRN, the biased router and
        // experts with SwiGLU-OAI; Q8_0 with every expert used (no routing
        // flips).
        ModelCase{"gpt-oss", GgmlType::kF32, 1e-4},
        ModelCase{"gpt-oss", GgmlType::kQ8_0, 5e-2, 4},
        // MXFP4 matrices kept as MXFP4 on the device (GEMV and dequantize).
        ModelCase{"gpt-oss", GgmlType::kMXFP4, 5e-2, 4},
        // KV types apart from the device dtype; the block copies move Q8_0
        // rows too. Both engines quantize K/V that differ by rounding, so a
        // Q8_0 level flips now and then (measured up to 9e-4), and the CPU's
        // F16 attention rounds q and weights (3e-4).
        ModelCase{"qwen3-0.6b", GgmlType::kF32, 5e-3, 0, GgmlType::kQ8_0},
        ModelCase{"stories15m", GgmlType::kF32, 2e-3, 0, GgmlType::kF16},
        ModelCase{"qwen2-0.5b", GgmlType::kF16, 2e-2, 0, GgmlType::kF32},
        ModelCase{"llama-1b", GgmlType::kBF16, 5e-2, 0, GgmlType::kQ8_0}),
    [](const auto& info) {
      std::string name = std::string(info.param.shape) + "_" +
                         std::string(GetGgmlTypeTraits(info.param.type).name);
      if (info.param.kv.has_value()) {
        name += std::string("_kv_") + GgmlTypeName(*info.param.kv);
      }
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// K-quant files (oracle models: Q2_K holds Q2_K, Q3_K and Q6_K matrices,
// Q3_K_M Q3_K, Q4_K, Q5_K and Q6_K, mixed inside fused groups) in their
// file types against the CPU engine on the same weights widened to F32 by
// DequantizeRow: a 12-token prefill (dequantize + cuBLAS), then steps of 6
// and 2 tokens (the quantized GEMV), every logit row compared.
class CudaKQuantFileTest : public testing::GpuTest,
                           public ::testing::WithParamInterface<const char*> {};

TEST_P(CudaKQuantFileTest, MatchesCpuOnDequantizedWeights) {
  const std::string path =
      ::paceline::testing::SharedPath("oracle/models/") + GetParam() + ".gguf";
  auto quantized = testing::LoadRetyped(path, testing::ViewTypes::kFileTypes);
  if (!quantized.ok() && absl::IsNotFound(quantized.status())) {
    GTEST_SKIP() << quantized.status();
  }
  ASSERT_TRUE(quantized.ok()) << quantized.status();
  auto widened = testing::LoadRetyped(path, testing::ViewTypes::kF32);
  ASSERT_TRUE(widened.ok()) << widened.status();
  CudaEngineOptions options;
  options.num_blocks = 8;
  options.max_tokens_per_step = 32;
  auto gpu = CudaEngine::Create(quantized->weights, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->dtype(), GgmlType::kF16);
  // Every matrix in its file type: as many bytes as the file's tensors;
  // Footprint knows it before the upload.
  EXPECT_EQ((*gpu)->MatMulBytesPerToken(), quantized->file_matrix_bytes);
  EXPECT_EQ((*gpu)->weight_bytes(),
            CudaEngine::Footprint(*quantized->weights).weight_bytes);
  cpu::CpuEngineOptions cpu_options;
  cpu_options.kv_type = GgmlType::kF32;  // the reference's cache
  cpu_options.num_blocks = 8;
  cpu_options.max_tokens_per_step = 32;
  cpu_options.num_threads = 2;
  auto cpu_engine = cpu::CpuEngine::Create(widened->weights, cpu_options);
  ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();
  const int64_t vocab = quantized->weights->config().n_vocab;
  const std::vector<std::vector<int32_t>> tables = {{3, 0}, {5}};
  std::vector<int32_t> done = {0, 0};
  const auto step = [&](const std::vector<std::pair<int, int32_t>>& parts) {
    ForwardBatch batch;
    for (const auto& [seq, count] : parts) {
      batch.sequences.push_back(SequenceSlice{.token_begin = batch.num_tokens(),
                                              .token_count = count,
                                              .position_begin = done[seq],
                                              .block_table = tables[seq],
                                              .num_logits = 1});
      for (int32_t i = 0; i < count; ++i) {
        batch.tokens.push_back(static_cast<int32_t>(rng_() % vocab));
      }
      done[seq] += count;
    }
    std::vector<float> want(parts.size() * vocab), got(want.size(), NAN);
    ASSERT_TRUE((*cpu_engine)->Forward(batch, absl::MakeSpan(want)).ok());
    const absl::Status s = (*gpu)->Forward(batch, absl::MakeSpan(got));
    ASSERT_TRUE(s.ok()) << s;
    float scale = 0;
    for (float x : want) scale = std::max(scale, std::fabs(x));
    testing::ExpectClose(got, want, 2e-2 * scale, 2e-2, "logits");
  };
  step({{0, 12}});
  step({{1, 5}, {0, 1}});
  step({{0, 1}, {1, 1}});
}

INSTANTIATE_TEST_SUITE_P(Files, CudaKQuantFileTest,
                         ::testing::Values("llama-base-q2_k",
                                           "llama-base-q3_k_m"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

// The paths the step script above does not reach: a long context decoded
// alone (attention split over the context, merged), and more logit rows
// than one chunk (300 > 256, no graph).
class CudaLongStepTest : public testing::GpuTest {};

TEST_F(CudaLongStepTest, SplitContextsAndChunkedLogitsMatchCpu) {
  ModelConfig config = SmallConfig("qwen3-0.6b");
  config.n_layers = 1;
  auto weights = ModelWeights::Dummy(config, GgmlType::kF32, seed_);
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::shared_ptr<const ModelWeights> shared = std::move(*weights);
  constexpr int32_t kSeqs = 300, kLong = 600;
  constexpr int32_t kBlocks = kSeqs + kLong / 16 + 1;
  CudaEngineOptions options;
  options.num_blocks = kBlocks;
  options.max_tokens_per_step = 1024;
  auto gpu = CudaEngine::Create(shared, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  cpu::CpuEngineOptions cpu_options;
  cpu_options.kv_type = GgmlType::kF32;  // the reference's cache
  cpu_options.num_blocks = kBlocks;
  cpu_options.max_tokens_per_step = 1024;
  cpu_options.num_threads = 2;
  auto cpu_engine = cpu::CpuEngine::Create(shared, cpu_options);
  ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();
  const int64_t vocab = config.n_vocab;
  const auto run = [&](const ForwardBatch& batch) {
    const size_t rows = static_cast<size_t>(NumLogitRows(batch));
    std::vector<float> want(rows * vocab), got(rows * vocab, NAN);
    ASSERT_TRUE((*cpu_engine)->Forward(batch, absl::MakeSpan(want)).ok());
    const absl::Status s = (*gpu)->Forward(batch, absl::MakeSpan(got));
    ASSERT_TRUE(s.ok()) << s;
    float scale = 0;
    for (float x : want) scale = std::max(scale, std::fabs(x));
    testing::ExpectClose(got, want, 1e-4 * scale, 1e-4, "logits");
  };

  // One long sequence: two 300-token chunks, then 3 decode steps alone.
  std::vector<int32_t> table(kLong / 16 + 1);
  std::iota(table.begin(), table.end(), kSeqs);
  std::reverse(table.begin(), table.end());
  ForwardBatch batch;
  batch.sequences.resize(1);
  batch.sequences[0].block_table = table;
  for (int32_t begin = 0; begin < kLong + 3;) {
    const int32_t count = begin < kLong ? 300 : 1;
    batch.tokens.resize(count);
    for (int32_t& t : batch.tokens) t = static_cast<int32_t>(rng_() % vocab);
    batch.sequences[0].token_count = count;
    batch.sequences[0].position_begin = begin;
    batch.sequences[0].num_logits = 1;
    run(batch);
    begin += count;
  }

  // 300 sequences of one block: 3 prompt tokens each, then one decode.
  std::vector<std::vector<int32_t>> tables(kSeqs);
  for (int32_t s = 0; s < kSeqs; ++s) tables[s] = {s};
  for (int32_t step = 0; step < 2; ++step) {
    const int32_t count = step == 0 ? 3 : 1;
    batch = ForwardBatch();
    for (int32_t s = 0; s < kSeqs; ++s) {
      batch.sequences.push_back(
          SequenceSlice{.token_begin = batch.num_tokens(),
                        .token_count = count,
                        .position_begin = step == 0 ? 0 : 3,
                        .block_table = tables[s],
                        .num_logits = 1});
      for (int32_t i = 0; i < count; ++i) {
        batch.tokens.push_back(static_cast<int32_t>(rng_() % vocab));
      }
    }
    run(batch);
  }

  // The last decode step again through ForwardAndSample: rows in both logit
  // chunks, every third one left to the host, mixed filters. Each sampled
  // token must be SampleRow's over this engine's own logits for the step.
  std::vector<float> logits(kSeqs * vocab);
  ASSERT_TRUE((*gpu)->Forward(batch, absl::MakeSpan(logits)).ok());
  std::vector<RowSampling> sampling(kSeqs);
  for (int32_t s = 0; s < kSeqs; ++s) {
    sampling[s].in_engine = s % 3 != 0;
    sampling[s].temperature = s % 2 == 0 ? 0.0f : 0.7f;
    sampling[s].top_k = s % 5 == 1 ? 10 : 0;
    sampling[s].top_p = s % 7 == 3 ? 0.8f : 1.0f;
    sampling[s].uniform = (s + 0.5) / kSeqs;
  }
  std::vector<int32_t> tokens(kSeqs, -5);
  std::vector<float> returned(kSeqs * vocab, NAN);
  const absl::Status sampled = (*gpu)->ForwardAndSample(
      batch, sampling, absl::MakeSpan(tokens), absl::MakeSpan(returned));
  ASSERT_TRUE(sampled.ok()) << sampled;
  for (int32_t s = 0; s < kSeqs; ++s) {
    const auto row = absl::MakeConstSpan(logits.data() + s * vocab, vocab);
    if (sampling[s].in_engine) {
      EXPECT_EQ(tokens[s], SampleRow(row, sampling[s])) << "row " << s;
    } else {
      EXPECT_EQ(tokens[s], -5) << "row " << s;
      EXPECT_TRUE(
          std::equal(row.begin(), row.end(), returned.begin() + s * vocab))
          << "row " << s;
    }
  }
}

TEST_F(CudaStoriesTest, ForwardAndSampleSamplesOnTheDevice) {
  auto model = OpenModel(::paceline::testing::kStories260KPath);
  ASSERT_TRUE(model.ok()) << model.status();
  CudaEngineOptions options;
  options.num_blocks = 64;
  auto gpu = CudaEngine::Create(model->weights, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE((*gpu)->samples_on_device());
  ::paceline::engine::testing::ExpectForwardAndSampleMatchesForward(**gpu);
}

TEST_F(CudaStoriesTest, MalformedBatchIsInvalidArgument) {
  auto shape = FindModelShape("stories15m");
  ASSERT_TRUE(shape.ok());
  shape->n_layers = 1;
  auto weights = ModelWeights::Dummy(*shape, GgmlType::kF16, 1);
  ASSERT_TRUE(weights.ok());
  std::shared_ptr<const ModelWeights> shared = std::move(*weights);
  CudaEngineOptions options;
  options.num_blocks = 4;
  auto gpu = CudaEngine::Create(shared, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->dtype(), GgmlType::kF16);
  EXPECT_EQ((*gpu)->weight_bytes(),
            CudaEngine::Footprint(*shared).weight_bytes);
  const std::vector<int32_t> table = {0, 1};
  ForwardBatch batch;
  batch.tokens = {1, 2, 3};
  batch.sequences = {SequenceSlice{.token_begin = 0,
                                   .token_count = 3,
                                   .position_begin = 0,
                                   .block_table = table,
                                   .num_logits = 1}};
  std::vector<float> logits(32000);
  EXPECT_TRUE((*gpu)->Forward(batch, absl::MakeSpan(logits)).ok());
  batch.tokens[1] = 40000;
  EXPECT_EQ((*gpu)->Forward(batch, absl::MakeSpan(logits)).code(),
            absl::StatusCode::kInvalidArgument);
  batch.tokens[1] = 2;
  batch.sequences[0].position_begin = 30;  // needs 3 blocks
  EXPECT_EQ((*gpu)->Forward(batch, absl::MakeSpan(logits)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*gpu)->CopyBlocks({{kvpager::BlockCopy{0, 4}}}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paceline::engine::cuda
