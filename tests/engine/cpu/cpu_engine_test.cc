#include "engine/cpu/cpu_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/cpu/cpu_features.h"
#include "engine/model/model_shapes.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "kvpager/block_table.h"
#include "tests/engine/cpu/engine_test_util.h"
#include "tests/testing/stories260k_oracle.h"

// The CPU engine on the real stories260K model (../shared/models/README.md
// gives its exact greedy outputs) and on small random models: the greedy
// oracles, batch invariance, chunked prefill, block copies, and the
// checks on a malformed batch.

namespace paceline::engine::cpu {
namespace {

using ::paceline::engine::testing::Argmax;
using ::paceline::engine::testing::ContiguousBlocks;
using ::paceline::engine::testing::GenerateAlone;
using ::paceline::engine::testing::GreedyResult;

const std::string& kStories = ::paceline::testing::kStories260KPath;
const std::vector<int32_t>& kExpected64 = ::paceline::testing::kGreedy64Ids;
constexpr const char* kExpectedText64 = ::paceline::testing::kGreedy64Text;
constexpr const char* kExpectedText252 = ::paceline::testing::kGreedy252Text;

class StoriesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = OpenModel(kStories);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new LoadedModel(*std::move(model));
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

  std::unique_ptr<CpuEngine> MakeEngine(int32_t num_blocks = 64,
                                        int32_t max_tokens = 256,
                                        int threads = 2,
                                        GgmlType kv_type = GgmlType::kF32) {
    CpuEngineOptions options;
    options.kv_type = kv_type;
    options.num_blocks = num_blocks;
    options.max_tokens_per_step = max_tokens;
    options.num_threads = threads;
    auto engine = CpuEngine::Create(model_->weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  std::vector<int32_t> Encode(const std::string& text) const {
    return model_->tokenizer->Encode(text, /*add_bos=*/true);
  }

  // Five prompts interleaved in shared steps equal each run alone.
  void ExpectStoriesBatchInvariant(CpuEngine& engine) const;

  static LoadedModel* model_;
};

LoadedModel* StoriesTest::model_ = nullptr;

TEST_F(StoriesTest, Greedy64TokensMatchLlamaCpp) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Encode("Once upon a time");
  ASSERT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  auto result =
      GenerateAlone(*engine, prompt, 64, 0, ContiguousBlocks(*engine, 5 + 64));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->tokens, kExpected64);
  EXPECT_EQ(model_->tokenizer->Decode(result->tokens), kExpectedText64);
}

// The same tokens through every matmul kernel this CPU runs.
TEST_F(StoriesTest, Greedy64AtEveryIsaLevel) {
  const std::vector<int32_t> prompt = Encode("Once upon a time");
  for (int level = 0; level <= static_cast<int>(GetCpuFeatures().max_level);
       ++level) {
    SetIsaLevelCap(static_cast<IsaLevel>(level));
    auto engine = MakeEngine();
    auto result = GenerateAlone(*engine, prompt, 64, 0,
                                ContiguousBlocks(*engine, 5 + 64));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->tokens, kExpected64)
        << IsaLevelName(static_cast<IsaLevel>(level));
  }
  SetIsaLevelCap(IsaLevel::kAvx512);
}

TEST_F(StoriesTest, Greedy252TokensMatchRunC) {
  auto engine = MakeEngine(/*num_blocks=*/16, /*max_tokens=*/8, /*threads=*/1);
  const std::vector<int32_t> prompt = Encode("Once upon a time");
  auto result =
      GenerateAlone(*engine, prompt, 252, 0, ContiguousBlocks(*engine, 256));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(model_->tokenizer->Decode(result->tokens), kExpectedText252);
  EXPECT_TRUE(std::equal(kExpected64.begin(), kExpected64.end(),
                         result->tokens.begin()));
}

// How two runs of the same sequence must agree: the same tokens, and the
// same logits bit for bit. At every ISA level the matmul computes a token's
// row the same way whatever else is in the step (matmul_internal.h), so any
// difference would come from the engine's own code (attention, RoPE, norms,
// K/V placement).
void ExpectSameRun(const GreedyResult& got, const GreedyResult& want,
                   const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.logits, want.logits) << what;
}

// Runs the test body at the machine's kernels, then at the scalar ones.
class IsaScope {
 public:
  explicit IsaScope(IsaLevel level) { SetIsaLevelCap(level); }
  ~IsaScope() { SetIsaLevelCap(IsaLevel::kAvx512); }
};

// Every level this machine runs.
std::vector<IsaLevel> AllLevels() {
  std::vector<IsaLevel> levels;
  for (int l = static_cast<int>(GetCpuFeatures().max_level); l >= 0; --l) {
    levels.push_back(static_cast<IsaLevel>(l));
  }
  return levels;
}

// A long prompt (83 tokens), prefilled in chunks: the same K/V, so the
// same tokens and the same logits bit for bit.
TEST_F(StoriesTest, ChunkedPrefillMatchesOneShot) {
  const std::vector<int32_t> prompt = Encode(
      "Once upon a time, there was a little girl named Lily. She loved to "
      "play outside in the park. One day, she saw a big, red ball. She "
      "wanted to play with it, but it was too high. Lily's mom said, \"Lily, "
      "let's go to the park.\"");
  ASSERT_GT(prompt.size(), 64u);
  for (IsaLevel level : AllLevels()) {
    IsaScope isa(level);
    auto engine = MakeEngine();
    const std::vector<int32_t> blocks =
        ContiguousBlocks(*engine, prompt.size() + 24);
    auto one_shot = GenerateAlone(*engine, prompt, 24, 0, blocks);
    ASSERT_TRUE(one_shot.ok()) << one_shot.status();
    for (int64_t chunk : {1, 7, 64}) {
      auto chunked = GenerateAlone(*engine, prompt, 24, chunk, blocks);
      ASSERT_TRUE(chunked.ok()) << chunked.status();
      ExpectSameRun(*chunked, *one_shot,
                    absl::StrCat("chunk ", chunk, ", ", IsaLevelName(level)));
    }
  }
}

// llama.cpp made those ids with its default F16 KV cache: an F16 cache
// gives them too, at every ISA level.
TEST_F(StoriesTest, Greedy64TokensMatchLlamaCppWithAnF16Cache) {
  const std::vector<int32_t> prompt = Encode("Once upon a time");
  for (IsaLevel level : AllLevels()) {
    IsaScope isa(level);
    auto engine = MakeEngine(64, 256, 2, GgmlType::kF16);
    auto result = GenerateAlone(*engine, prompt, 64, 0,
                                ContiguousBlocks(*engine, 5 + 64));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->tokens, kExpected64) << IsaLevelName(level);
  }
}

// ---- Batch invariance: a small scheduler that interleaves sequences. ----

struct Sequence {
  std::vector<int32_t> tokens;  // prompt, then generated
  int64_t prompt_len = 0;
  int64_t computed = 0;  // positions whose K/V are in the blocks
  int64_t chunk = 0;     // prefill chunk size
  int64_t start_step = 0;
  std::vector<int32_t> table;
  GreedyResult out;
};

// Runs every sequence to `n_generate` tokens in shared steps of at most
// `budget` tokens. Sequences join at their start_step, prefill in their
// own chunk size, and take blocks from a shuffled free list as they grow,
// so their tables are scattered and interleaved in the pool.
absl::Status RunTogether(Engine& engine, std::vector<Sequence>& seqs,
                         int64_t n_generate, int64_t budget, uint32_t seed) {
  std::vector<int32_t> free_blocks(engine.num_blocks());
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  const int64_t n_vocab = engine.config().n_vocab;
  std::vector<float> logits;
  for (int64_t step = 0;; ++step) {
    ForwardBatch batch;
    std::vector<size_t> owners;  // sequence of each slice
    bool pending = false;
    for (size_t k = 0; k < seqs.size(); ++k) {
      // Rotate who goes first so that every order shows up.
      const size_t i = (k + step) % seqs.size();
      Sequence& s = seqs[i];
      if (static_cast<int64_t>(s.out.tokens.size()) == n_generate) continue;
      pending = true;
      if (step < s.start_step) continue;
      int64_t take = s.computed < s.prompt_len
                         ? std::min(s.chunk, s.prompt_len - s.computed)
                         : 1;
      take = std::min(take, budget - batch.num_tokens());
      if (take <= 0) continue;
      while (static_cast<int64_t>(s.table.size()) * engine.block_size() <
             s.computed + take) {
        if (free_blocks.empty()) return absl::ResourceExhaustedError("blocks");
        s.table.push_back(free_blocks.back());
        free_blocks.pop_back();
      }
      SequenceSlice slice;
      slice.token_begin = batch.num_tokens();
      slice.token_count = static_cast<int32_t>(take);
      slice.position_begin = static_cast<int32_t>(s.computed);
      slice.block_table = s.table;
      slice.num_logits =
          s.computed + take == static_cast<int64_t>(s.tokens.size()) ? 1 : 0;
      batch.tokens.insert(batch.tokens.end(), s.tokens.begin() + s.computed,
                          s.tokens.begin() + s.computed + take);
      batch.sequences.push_back(slice);
      owners.push_back(i);
    }
    if (!pending) return absl::OkStatus();
    if (batch.sequences.empty()) continue;
    logits.assign(NumLogitRows(batch) * n_vocab, 0.0f);
    RETURN_IF_ERROR(engine.Forward(batch, absl::MakeSpan(logits)));
    int64_t row = 0;
    for (size_t j = 0; j < batch.sequences.size(); ++j) {
      Sequence& s = seqs[owners[j]];
      s.computed += batch.sequences[j].token_count;
      if (batch.sequences[j].num_logits == 0) continue;
      const absl::Span<const float> r(&logits[row++ * n_vocab], n_vocab);
      s.out.logits.emplace_back(r.begin(), r.end());
      s.out.tokens.push_back(Argmax(r));
      s.tokens.push_back(s.out.tokens.back());
    }
  }
}

void ExpectBatchInvariant(CpuEngine& engine,
                          const std::vector<std::vector<int32_t>>& prompts,
                          int64_t n_generate) {
  const int64_t chunks[] = {3, 64, 7, 1, 16};
  std::vector<Sequence> seqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs[i].tokens = prompts[i];
    seqs[i].prompt_len = static_cast<int64_t>(prompts[i].size());
    seqs[i].chunk = chunks[i % 5];
    seqs[i].start_step = static_cast<int64_t>(2 * i);
  }
  ASSERT_TRUE(RunTogether(engine, seqs, n_generate, /*budget=*/48, 7).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone =
        GenerateAlone(engine, prompts[i], n_generate, 0,
                      ContiguousBlocks(engine, prompts[i].size() + n_generate));
    ASSERT_TRUE(alone.ok()) << alone.status();
    ExpectSameRun(seqs[i].out, *alone, absl::StrCat("prompt ", i));
  }
}

void StoriesTest::ExpectStoriesBatchInvariant(CpuEngine& engine) const {
  ExpectBatchInvariant(
      engine,
      {Encode("Once upon a time"), Encode("Tom had a big red dog"),
       Encode("The sun was shining and the birds were singing. Lily went "
              "outside to play with her friend"),
       Encode("One day"),
       Encode("There was a little boy who liked to eat cake. He ate a lot of "
              "cake every day, and his mom said")},
      40);
}

TEST_F(StoriesTest, BatchedGenerationMatchesEachAlone) {
  for (IsaLevel level : AllLevels()) {
    IsaScope isa(level);
    auto engine = MakeEngine(/*num_blocks=*/128);
    ExpectStoriesBatchInvariant(*engine);
  }
}

// The same bits with an F16 cache: F16 attention is as batch-invariant.
TEST_F(StoriesTest, BatchedGenerationMatchesEachAloneWithAnF16Cache) {
  for (IsaLevel level : AllLevels()) {
    IsaScope isa(level);
    auto engine = MakeEngine(128, 256, 2, GgmlType::kF16);
    ExpectStoriesBatchInvariant(*engine);
  }
}

// Random small models of the other architectures, in each weight type.
struct DummyCase {
  const char* arch;
  GgmlType type;
};

class DummyBatchTest : public ::testing::TestWithParam<DummyCase> {};

ModelConfig SmallConfig(const std::string& arch) {
  ModelConfig c;
  c.architecture = arch;
  c.name = "small-" + arch;
  c.n_layers = 2;
  c.n_embd = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = arch == "qwen3" ? 32 : 16;  // qwen3: not n_embd / n_heads
  c.n_ff = 96;
  c.n_vocab = 300;
  c.context_length = 512;
  c.rope_layout =
      arch == "llama" ? RopeLayout::kAdjacentPairs : RopeLayout::kNeoxHalves;
  c.rope_dim = c.head_dim;
  c.rope_freq_base = arch == "llama" ? 10000.0 : 1e6;
  c.rms_norm_eps = arch == "llama" ? 1e-5 : 1e-6;
  c.tied_output = arch != "llama";
  c.qkv_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3" || arch == "qwen3moe";
  if (arch == "qwen3moe") {  // 6 experts of width 32, 2 used per token
    c.n_expert = 6;
    c.n_expert_used = 2;
    c.n_ff_exp = 32;
  }
  return c;
}

TEST_P(DummyBatchTest, BatchedGenerationMatchesEachAlone) {
  const ModelConfig config = SmallConfig(GetParam().arch);
  auto weights = ModelWeights::Dummy(config, GetParam().type, 11);
  ASSERT_TRUE(weights.ok()) << weights.status();
  CpuEngineOptions options;
  options.num_blocks = 96;
  options.max_tokens_per_step = 64;
  options.num_threads = 2;
  auto engine = CpuEngine::Create(std::move(*weights), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> prompts;
  for (int len : {9, 1, 30, 4}) {
    std::vector<int32_t> p(len);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % config.n_vocab);
    prompts.push_back(p);
  }
  for (IsaLevel level : AllLevels()) {
    IsaScope isa(level);
    ExpectBatchInvariant(**engine, prompts, 12);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Archs, DummyBatchTest,
    ::testing::Values(DummyCase{"llama", GgmlType::kQ4_0},
                      DummyCase{"qwen2", GgmlType::kF16},
                      DummyCase{"qwen3", GgmlType::kQ8_0},
                      DummyCase{"qwen3", GgmlType::kBF16},
                      DummyCase{"qwen3moe", GgmlType::kQ8_0}),
    [](const ::testing::TestParamInfo<DummyCase>& info) {
      return std::string(info.param.arch) + "_" +
             std::string(GetGgmlTypeTraits(info.param.type).name);
    });

// Weights the engine repacks at creation (with AVX-512: Q8_0, Q4_0 and the
// float types) give the logits of the file's layout bit for bit, at every level
// (levels without a panel kernel unpack them).
TEST(CpuEnginePackingTest, PackedWeightsGiveTheFileLayoutsLogits) {
  const ModelConfig config = SmallConfig("llama");
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kF16,
                        GgmlType::kBF16, GgmlType::kF32}) {
    SCOPED_TRACE(GetGgmlTypeTraits(type).name);
    std::shared_ptr<const ModelWeights> weights =
        *ModelWeights::Dummy(config, type, 3);
    CpuEngineOptions options;
    options.num_blocks = 96;
    options.max_tokens_per_step = 64;
    options.num_threads = 2;
    options.pack_weights = false;
    auto plain = CpuEngine::Create(weights, options);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ((*plain)->packed_bytes(), 0u);
    options.pack_weights = true;
    auto packed = CpuEngine::Create(weights, options);
    ASSERT_TRUE(packed.ok()) << packed.status();
    if (!MatMulPrefersPanels(type, config.n_embd)) continue;
    EXPECT_GT((*packed)->packed_bytes(), 0u);
    EXPECT_EQ((*packed)->packed_bytes(), CpuEngine::PackedBytes(*weights, options));
    std::mt19937 rng(8);
    std::vector<int32_t> prompt(21);
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % config.n_vocab);
    for (IsaLevel level : AllLevels()) {
      IsaScope isa(level);
      auto want = GenerateAlone(**plain, prompt, 10, 0,
                                ContiguousBlocks(**plain, prompt.size() + 10));
      ASSERT_TRUE(want.ok()) << want.status();
      auto got = GenerateAlone(**packed, prompt, 10, 0,
                               ContiguousBlocks(**packed, prompt.size() + 10));
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectSameRun(*got, *want, std::string(IsaLevelName(level)));
    }
  }
}

// Copy-on-write: a second sequence shares the first one's full blocks and
// a copy of its partial last block, then continues exactly as the first.
TEST_F(StoriesTest, CopiedBlocksContinueTheSequence) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt =
      Encode("Once upon a time, there was a little girl named Lily. She");
  // Block 9 (the second) holds the prompt's last positions, partially.
  ASSERT_GT(prompt.size(), 16u);
  ASSERT_LT(prompt.size(), 32u);
  const std::vector<int32_t> table_a = {5, 9, 2};
  auto a = GenerateAlone(*engine, prompt, 20, 0, table_a);
  ASSERT_TRUE(a.ok()) << a.status();

  // B: prefill the prompt into A's layout again, then fork at the prompt.
  auto fresh = MakeEngine();
  std::vector<int32_t> table_b = {5, 9, 2};
  std::vector<float> logits(fresh->config().n_vocab);
  ForwardBatch batch;
  batch.tokens = prompt;
  batch.sequences.push_back(
      SequenceSlice{.token_begin = 0,
                    .token_count = static_cast<int32_t>(prompt.size()),
                    .position_begin = 0,
                    .block_table = table_b,
                    .num_logits = 1});
  ASSERT_TRUE(fresh->Forward(batch, absl::MakeSpan(logits)).ok());
  const kvpager::BlockCopy copies[] = {
      {9, 30}};  // the partial block (positions 16..)
  ASSERT_TRUE(fresh->CopyBlocks(copies).ok());
  table_b = {5, 30, 7};
  int32_t token = Argmax(logits);
  std::vector<int32_t> generated = {token};
  for (int i = 1; i < 20; ++i) {
    batch.tokens = {token};
    batch.sequences[0] = SequenceSlice{
        .token_begin = 0,
        .token_count = 1,
        .position_begin = static_cast<int32_t>(prompt.size()) + i - 1,
        .block_table = table_b,
        .num_logits = 1};
    ASSERT_TRUE(fresh->Forward(batch, absl::MakeSpan(logits)).ok());
    generated.push_back(token = Argmax(logits));
  }
  EXPECT_EQ(generated, a->tokens);
  const kvpager::BlockCopy bad[] = {{0, 64}};
  EXPECT_EQ(fresh->CopyBlocks(bad).code(), absl::StatusCode::kInvalidArgument);
}

// ---- Malformed batches: InvalidArgument, and nothing written. ----

TEST_F(StoriesTest, ForwardAndSampleSamplesOnTheHostAfterForward) {
  std::unique_ptr<CpuEngine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  EXPECT_FALSE(engine->samples_on_device());
  ::paceline::engine::testing::ExpectForwardAndSampleMatchesForward(*engine);
}

TEST_F(StoriesTest, RejectsMalformedBatches) {
  auto engine = MakeEngine(/*num_blocks=*/4, /*max_tokens=*/8);
  const std::vector<int32_t> table = {0, 1};
  const auto batch_of = [&](std::vector<int32_t> tokens,
                            std::vector<SequenceSlice> slices) {
    ForwardBatch b;
    b.tokens = std::move(tokens);
    b.sequences = std::move(slices);
    return b;
  };
  const SequenceSlice ok{.token_begin = 0,
                         .token_count = 2,
                         .position_begin = 0,
                         .block_table = table,
                         .num_logits = 1};
  std::vector<float> logits(512);
  ASSERT_TRUE(
      engine->Forward(batch_of({1, 403}, {ok}), absl::MakeSpan(logits)).ok());

  const auto expect_invalid = [&](const ForwardBatch& b, size_t n_logits) {
    std::vector<float> l(n_logits, 7.0f);
    const absl::Status s = engine->Forward(b, absl::MakeSpan(l));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    for (float x : l) ASSERT_EQ(x, 7.0f);
  };
  SequenceSlice s = ok;
  expect_invalid(batch_of({}, {}), 0);                          // empty
  expect_invalid(batch_of(std::vector<int32_t>(9, 1), {}), 0);  // too many
  expect_invalid(batch_of({1, 512}, {ok}), 512);                // bad id
  expect_invalid(batch_of({1, 403}, {ok}), 511);                // logits size
  expect_invalid(batch_of({1, 403, 5}, {ok}), 512);             // uncovered
  expect_invalid(batch_of({1, 403}, {ok, ok}), 1024);           // overlap
  s.token_count = 3;
  expect_invalid(batch_of({1, 403}, {s}), 512);  // past end
  s = ok;
  s.position_begin = 31;  // needs 3 blocks
  expect_invalid(batch_of({1, 403}, {s}), 512);
  const std::vector<int32_t> bad_table = {0, 4};
  s = ok;
  s.position_begin = 20;
  s.block_table = bad_table;  // block 4 of 4
  expect_invalid(batch_of({1, 403}, {s}), 512);
  s = ok;
  s.position_begin = -1;
  expect_invalid(batch_of({1, 403}, {s}), 512);
}

TEST(CpuEngineCreateTest, RejectsBadOptions) {
  auto weights = ModelWeights::Dummy(SmallConfig("llama"), GgmlType::kF32, 1);
  ASSERT_TRUE(weights.ok());
  std::shared_ptr<const ModelWeights> shared = std::move(*weights);
  CpuEngineOptions o;
  o.block_size = 0;
  EXPECT_FALSE(CpuEngine::Create(shared, o).ok());
  o = {};
  o.max_tokens_per_step = 0;
  EXPECT_FALSE(CpuEngine::Create(shared, o).ok());
  o = {};
  o.num_blocks = -1;
  EXPECT_FALSE(CpuEngine::Create(shared, o).ok());
  o = {};  // defaults: one full context of blocks
  auto engine = CpuEngine::Create(shared, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->num_blocks(), 512 / 16);
  EXPECT_EQ((*engine)->block_size(), 16);
}

}  // namespace
}  // namespace paceline::engine::cpu
