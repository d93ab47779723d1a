// Each CUDA kernel against the CPU engine's own code (engine/cpu/ops.h,
// attention.h, delta_net.h; row_sampling.h for sampling) on fresh random
// inputs, outputs poisoned with NaN before the launch, in every element
// type.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <numeric>
#include <vector>

#include "absl/types/span.h"
#include "engine/cpu/delta_net.h"
#include "engine/cpu/kernels/attention.h"
#include "engine/cpu/kv_cache.h"
#include "engine/cpu/moe_ffn.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/kernels/delta_net.h"
#include "engine/cuda/kernels/embedding.h"
#include "engine/cuda/kernels/gates.h"
#include "engine/cuda/kernels/moe.h"
#include "engine/cuda/kernels/paged_attention.h"
#include "engine/cuda/kernels/qkv_rope.h"
#include "engine/cuda/kernels/rms_norm.h"
#include "engine/cuda/kernels/sampling.h"
#include "engine/cuda/kernels/scale.h"
#include "engine/cuda/kernels/swiglu.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "engine/sampling/row_sampling.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace paceline::engine::cuda {
namespace {

using testing::Decode;
using testing::DefaultRtol;
using testing::Download;
using testing::DownloadBytes;
using testing::Encode;
using testing::ExpectClose;
using testing::Poisoned;
using testing::RoundAll;
using testing::Upload;

class KernelTest : public testing::GpuTest,
                   public ::testing::WithParamInterface<GgmlType> {
 protected:
  GgmlType dtype() const { return GetParam(); }
  size_t elem() const { return GgmlBlockBytes(GetParam()); }
};

TEST_P(KernelTest, EmbeddingGathersRows) {
  constexpr int64_t kVocab = 300, kDim = 200, kTokens = 37;
  const std::vector<float> table = RoundAll(dtype(), Random(kVocab * kDim));
  std::vector<int32_t> tokens(kTokens);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng_() % kVocab);
  DeviceBuffer d_table, d_tokens, d_out;
  ASSERT_TRUE(Upload(Encode(dtype(), table), &d_table).ok());
  ASSERT_TRUE(Upload(tokens, &d_tokens).ok());
  ASSERT_TRUE(Poisoned(kTokens * kDim * sizeof(float), &d_out).ok());
  ASSERT_EQ(LaunchEmbedding(dtype(), d_table.get(), d_tokens.as<int32_t>(),
                            kTokens, kDim, d_out.as<float>(), nullptr),
            cudaSuccess);
  std::vector<float> ref;
  for (int32_t t : tokens) {
    ref.insert(ref.end(), table.begin() + t * kDim,
               table.begin() + (t + 1) * kDim);
  }
  ExpectClose(Download(GgmlType::kF32, d_out, kTokens * kDim), ref, 0, 0,
              "embedding");
}

TEST_P(KernelTest, RmsNormWithResidualAndRowGather) {
  constexpr int64_t kRows = 9, kDim = 1000;
  const float eps = 1e-5f;
  const std::vector<float> x = Random(kRows * kDim, 2.0f);
  const std::vector<float> res = Random(kRows * kDim);
  const std::vector<float> w = Random(kDim);
  // Distinct rows: a fused residual add writes each gathered row once.
  const std::vector<int32_t> rows = {8, 0, 3};
  for (bool fused : {false, true}) {
    for (bool gather : {false, true}) {
      const int64_t n_out = gather ? static_cast<int64_t>(rows.size()) : kRows;
      DeviceBuffer d_x, d_res, d_rows, d_w, d_out;
      ASSERT_TRUE(Upload(x, &d_x).ok());
      ASSERT_TRUE(Upload(res, &d_res).ok());
      ASSERT_TRUE(Upload(rows, &d_rows).ok());
      ASSERT_TRUE(Upload(w, &d_w).ok());
      ASSERT_TRUE(Poisoned(n_out * kDim * elem(), &d_out).ok());
      ASSERT_EQ(LaunchRmsNorm(dtype(), d_x.as<float>(),
                              fused ? d_res.as<float>() : nullptr,
                              gather ? d_rows.as<int32_t>() : nullptr, n_out,
                              kDim, d_w.as<float>(), eps, d_out.get(), nullptr),
                cudaSuccess);
      std::vector<float> sum = x;
      if (fused) cpu::AddInPlace(sum.data(), res.data(), kRows * kDim);
      std::vector<float> normed(kRows * kDim);
      cpu::RmsNorm(sum.data(), w.data(), kRows, kDim, eps, normed.data());
      std::vector<float> ref;
      for (int64_t r = 0; r < n_out; ++r) {
        const int64_t s = gather ? rows[r] : r;
        ref.insert(ref.end(), normed.begin() + s * kDim,
                   normed.begin() + (s + 1) * kDim);
      }
      ExpectClose(Download(dtype(), d_out, n_out * kDim), ref, 1e-6,
                  DefaultRtol(dtype()), "rms norm out");
      // x gets the residual in the rows the kernel normed (all without a
      // gather), and keeps its values elsewhere.
      std::vector<float> want_x = x;
      for (int64_t r = 0; r < n_out; ++r) {
        const int64_t s = gather ? rows[r] : r;
        std::copy_n(&sum[s * kDim], kDim, &want_x[s * kDim]);
      }
      ExpectClose(Download(GgmlType::kF32, d_x, kRows * kDim), want_x, 0, 0,
                  "rms norm residual");
    }
  }
}

TEST_P(KernelTest, SwiGlu) {
  constexpr int64_t kTokens = 13, kFf = 700;
  const std::vector<float> gu = Random(kTokens * 2 * kFf, 3.0f);
  DeviceBuffer d_gu, d_out;
  ASSERT_TRUE(Upload(gu, &d_gu).ok());
  ASSERT_TRUE(Poisoned(kTokens * kFf * elem(), &d_out).ok());
  ASSERT_EQ(LaunchSwiGlu(dtype(), d_gu.as<float>(), kTokens, kFf, d_out.get(),
                         nullptr),
            cudaSuccess);
  std::vector<float> ref(kTokens * kFf);
  for (int64_t t = 0; t < kTokens; ++t) {
    cpu::SwiGlu(&gu[t * 2 * kFf], &gu[t * 2 * kFf + kFf], kFf, &ref[t * kFf]);
  }
  ExpectClose(Download(dtype(), d_out, kTokens * kFf), ref, 1e-6,
              DefaultRtol(dtype()), "swiglu");
}

// SwiGLU-OAI against cpu::SwigluOai: gates and ups spread over the clamps
// at 7 and -7 (the gate clamped above only), and the clamps themselves.
TEST_P(KernelTest, SwigluOai) {
  constexpr int64_t kTokens = 9, kFf = 500;
  std::vector<float> gu = Random(kTokens * 2 * kFf, 6.0f);
  const float edges[] = {7.0f, -7.0f, 7.001f, -7.001f, -30.0f, 0.0f};
  for (size_t i = 0; i < std::size(edges); ++i) {
    gu[i] = edges[i];             // token 0's gates
    gu[kFf + 10 + i] = edges[i];  // its ups
  }
  DeviceBuffer d_gu, d_out;
  ASSERT_TRUE(Upload(gu, &d_gu).ok());
  ASSERT_TRUE(Poisoned(kTokens * kFf * elem(), &d_out).ok());
  ASSERT_EQ(LaunchSwigluOai(dtype(), d_gu.as<float>(), kTokens, kFf,
                            d_out.get(), nullptr),
            cudaSuccess);
  std::vector<float> ref(kTokens * kFf);
  for (int64_t t = 0; t < kTokens; ++t) {
    cpu::SwigluOai(&gu[t * 2 * kFf], &gu[t * 2 * kFf + kFf], kFf,
                   &ref[t * kFf]);
  }
  ExpectClose(Download(dtype(), d_out, kTokens * kFf), ref, 1e-6,
              DefaultRtol(dtype()), "swiglu-oai");
}

// A bias added to every row of a strided matrix; the columns past it kept.
class AddRowBiasTest : public testing::GpuTest {};

TEST_F(AddRowBiasTest, AddsTheBiasToEachRow) {
  constexpr int64_t kRows = 13, kDim = 300, kLd = 310;
  const std::vector<float> y = Random(kRows * kLd);
  const std::vector<float> bias = Random(kDim);
  DeviceBuffer d_y, d_bias;
  ASSERT_TRUE(Upload(y, &d_y).ok());
  ASSERT_TRUE(Upload(bias, &d_bias).ok());
  ASSERT_EQ(LaunchAddRowBias(d_bias.as<float>(), kRows, kDim, d_y.as<float>(),
                             kLd, nullptr),
            cudaSuccess);
  std::vector<float> want = y;
  for (int64_t r = 0; r < kRows; ++r) {
    cpu::AddInPlace(&want[r * kLd], bias.data(), kDim);
  }
  ExpectClose(Download(GgmlType::kF32, d_y, kRows * kLd), want, 0, 0,
              "row bias");
}

// GeGLU against cpu::GeluTanhGlu (llama.cpp's F16 GELU table): gates
// spread over both cut-offs (-10, 10), the cut-offs themselves, and values
// either side of them.
TEST_P(KernelTest, GeluTanhGlu) {
  constexpr int64_t kTokens = 11, kFf = 700;
  std::vector<float> gu = Random(kTokens * 2 * kFf, 6.0f);
  const float edges[] = {-10.0f, 10.0f, -10.001f, 10.001f, -9.999f,
                         9.999f, 0.0f,  -0.0f,    1e-4f,   -3.0f};
  for (size_t i = 0; i < std::size(edges); ++i) gu[i] = edges[i];
  DeviceBuffer d_gu, d_out;
  ASSERT_TRUE(Upload(gu, &d_gu).ok());
  ASSERT_TRUE(Poisoned(kTokens * kFf * elem(), &d_out).ok());
  ASSERT_EQ(LaunchGeluTanhGlu(dtype(), d_gu.as<float>(), kTokens, kFf,
                              d_out.get(), nullptr),
            cudaSuccess);
  std::vector<float> ref(kTokens * kFf);
  for (int64_t t = 0; t < kTokens; ++t) {
    cpu::GeluTanhGlu(&gu[t * 2 * kFf], &gu[t * 2 * kFf + kFf], kFf,
                     &ref[t * kFf]);
  }
  // One F16 step of the GELU (2^-11 relative) apart at most: the device's
  // tanhf may round a value to the other side of an F16 midpoint.
  ExpectClose(Download(dtype(), d_out, kTokens * kFf), ref, 1e-6,
              std::max(DefaultRtol(dtype()), 1e-3), "geglu");
}

// A sub-layer's output joining the residual between two norms (gemma3),
// against the CPU engine's ops run one after the other: every combination
// of the norm before (in place on y) and the norm after (into out).
TEST_P(KernelTest, AddRmsNormAgainstTheOpsInTurn) {
  constexpr int64_t kRows = 7, kDim = 900;
  const float eps = 1e-6f;
  const std::vector<float> x = Random(kRows * kDim, 2.0f);
  const std::vector<float> y = Random(kRows * kDim, 30.0f);
  const std::vector<float> y_w = Random(kDim);
  const std::vector<float> w = Random(kDim);
  for (bool post : {false, true}) {
    for (bool pre : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "post " << post << " pre " << pre);
      DeviceBuffer d_x, d_y, d_yw, d_w, d_out;
      ASSERT_TRUE(Upload(x, &d_x).ok());
      ASSERT_TRUE(Upload(y, &d_y).ok());
      ASSERT_TRUE(Upload(y_w, &d_yw).ok());
      ASSERT_TRUE(Upload(w, &d_w).ok());
      ASSERT_TRUE(Poisoned(kRows * kDim * elem(), &d_out).ok());
      ASSERT_EQ(LaunchAddRmsNorm(
                    dtype(), d_y.as<float>(), post ? d_yw.as<float>() : nullptr,
                    d_x.as<float>(), kRows, kDim,
                    pre ? d_w.as<float>() : nullptr, eps, d_out.get(), nullptr),
                cudaSuccess);
      std::vector<float> want_y = y;
      if (post) {
        cpu::RmsNorm(y.data(), y_w.data(), kRows, kDim, eps, want_y.data());
      }
      std::vector<float> want_x = x;
      cpu::AddInPlace(want_x.data(), want_y.data(), kRows * kDim);
      ExpectClose(Download(GgmlType::kF32, d_y, kRows * kDim), want_y, 0, 1e-6,
                  "normed y");
      ExpectClose(Download(GgmlType::kF32, d_x, kRows * kDim), want_x, 1e-6,
                  1e-6, "x + y");
      if (!pre) {
        // Untouched: still the poison.
        const std::vector<float> out = Download(dtype(), d_out, kRows * kDim);
        EXPECT_TRUE(std::all_of(out.begin(), out.end(),
                                [](float v) { return std::isnan(v); }));
        continue;
      }
      std::vector<float> want_out(kRows * kDim);
      cpu::RmsNorm(want_x.data(), w.data(), kRows, kDim, eps, want_out.data());
      ExpectClose(Download(dtype(), d_out, kRows * kDim), want_out, 1e-6,
                  DefaultRtol(dtype()), "normed x");
    }
  }
}

// RMSNorm of a float buffer in place (a post-norm on its own): F32 only.
class RmsNormInPlaceTest : public testing::GpuTest {};

TEST_F(RmsNormInPlaceTest, MatchesTheCpuNorm) {
  constexpr int64_t kRows = 5, kDim = 640;
  const float eps = 1e-6f;
  const std::vector<float> x = Random(kRows * kDim, 3.0f);
  const std::vector<float> w = Random(kDim);
  DeviceBuffer d_x, d_w;
  ASSERT_TRUE(Upload(x, &d_x).ok());
  ASSERT_TRUE(Upload(w, &d_w).ok());
  ASSERT_EQ(
      LaunchRmsNorm(GgmlType::kF32, d_x.as<float>(), nullptr, nullptr, kRows,
                    kDim, d_w.as<float>(), eps, d_x.get(), nullptr),
      cudaSuccess);
  std::vector<float> ref(kRows * kDim);
  cpu::RmsNorm(x.data(), w.data(), kRows, kDim, eps, ref.data());
  ExpectClose(Download(GgmlType::kF32, d_x, kRows * kDim), ref, 1e-6, 1e-6,
              "in-place rms norm");
}

// The mixture-of-experts kernels: gather by row list (exact), and the
// rank-ordered weighted combine added into x, against plain loops.
TEST_P(KernelTest, MoeGatherCopiesTheListedRows) {
  constexpr int64_t kTokens = 9, kDim = 130, kRows = 14;
  const std::vector<float> x = RoundAll(dtype(), Random(kTokens * kDim, 2.0f));
  std::vector<int32_t> row_token(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    row_token[r] = static_cast<int32_t>((r * 5 + 3) % kTokens);
  }
  DeviceBuffer d_x, d_rows, d_out;
  ASSERT_TRUE(
      testing::UploadBytes(Encode(dtype(), x).data(), x.size() * elem(), &d_x)
          .ok());
  ASSERT_TRUE(Upload(row_token, &d_rows).ok());
  ASSERT_TRUE(Poisoned(kRows * kDim * elem(), &d_out).ok());
  ASSERT_EQ(LaunchMoeGather(dtype(), d_x.get(), d_rows.as<int32_t>(), kRows,
                            kDim, d_out.get(), nullptr),
            cudaSuccess);
  std::vector<float> ref(kRows * kDim);
  for (int64_t r = 0; r < kRows; ++r) {
    std::copy_n(&x[row_token[r] * kDim], kDim, &ref[r * kDim]);
  }
  ExpectClose(Download(dtype(), d_out, kRows * kDim), ref, 0, 0, "gather");
}

class MoeKernelTest : public testing::GpuTest {};

// Routing on the device picks what cpu::RouteTokens picks, ties included.
TEST_F(MoeKernelTest, RouteMatchesCpuRouting) {
  constexpr int64_t kTokens = 37, kExperts = 16, kK = 4;
  std::vector<float> logits = Random(kTokens * kExperts, 2.0f);
  for (int64_t e = 0; e < kExperts; ++e) logits[e] = e % 3 == 0 ? 1.5f : -1;
  DeviceBuffer d_logits, d_experts, d_weights;
  ASSERT_TRUE(Upload(logits, &d_logits).ok());
  ASSERT_TRUE(Poisoned(kTokens * kK * sizeof(int32_t), &d_experts).ok());
  ASSERT_TRUE(Poisoned(kTokens * kK * sizeof(float), &d_weights).ok());
  ASSERT_EQ(
      LaunchMoeRoute(d_logits.as<float>(), kTokens, kExperts, kK,
                     d_experts.as<int32_t>(), d_weights.as<float>(), nullptr),
      cudaSuccess);
  std::vector<int32_t> want_e(kTokens * kK);
  std::vector<float> want_w(kTokens * kK);
  cpu::RouteTokens(logits.data(), kTokens, kExperts, kK, want_e.data(),
                   want_w.data());
  const std::vector<uint8_t> got_e =
      DownloadBytes(d_experts, kTokens * kK * sizeof(int32_t));
  EXPECT_EQ(std::memcmp(got_e.data(), want_e.data(), got_e.size()), 0);
  ExpectClose(Download(GgmlType::kF32, d_weights, kTokens * kK), want_w, 1e-7,
              1e-6, "routing weights");
}

TEST_F(MoeKernelTest, CombineAddsTheWeightedRowsInRankOrder) {
  constexpr int64_t kTokens = 6, kK = 3, kDim = 70;
  const std::vector<float> y = Random(kTokens * kK * kDim, 1.0f);
  const std::vector<float> x = Random(kTokens * kDim, 1.0f);
  const std::vector<float> w = Random(kTokens * kK, 1.0f);
  std::vector<int32_t> row_of(kTokens * kK);
  std::iota(row_of.begin(), row_of.end(), 0);
  std::reverse(row_of.begin(), row_of.end());
  DeviceBuffer d_y, d_x, d_w, d_rows;
  ASSERT_TRUE(Upload(y, &d_y).ok());
  ASSERT_TRUE(Upload(x, &d_x).ok());
  ASSERT_TRUE(Upload(w, &d_w).ok());
  ASSERT_TRUE(Upload(row_of, &d_rows).ok());
  ASSERT_EQ(
      LaunchMoeCombine(d_y.as<float>(), d_rows.as<int32_t>(), d_w.as<float>(),
                       kTokens, kK, kDim, d_x.as<float>(), nullptr),
      cudaSuccess);
  std::vector<float> ref = x;
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t d = 0; d < kDim; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < kK; ++j) {
        acc += w[t * kK + j] * y[row_of[t * kK + j] * kDim + d];
      }
      ref[t * kDim + d] += static_cast<float>(acc);
    }
  }
  ExpectClose(Download(GgmlType::kF32, d_x, kTokens * kDim), ref, 1e-6, 1e-5,
              "combine");
}

struct RopeCase {
  RopeLayout layout;
  int64_t head_dim;
  int64_t rope_dim;
  bool bias;
  bool qk_norm;
  RopeScaling scaling = RopeScaling::kLinear;  // factor 2, or yarn factor 4
};

// The CPU engine's rope of a case: base 1e6, and for yarn an original
// context of 1024 with Llama 3-style frequency factors on top (both
// engines take them from the same RopeTable).
cpu::RopeParams CaseRope(const RopeCase& rc) {
  ModelConfig c;
  c.rope_layout = rc.layout;
  c.rope_dim = rc.rope_dim;
  c.rope_freq_base = 1e6;
  c.rope_scaling = rc.scaling;
  c.rope_scaling_factor = rc.scaling == RopeScaling::kYarn ? 4 : 2;
  c.rope_original_context = 1024;
  std::vector<float> factors;
  if (rc.scaling == RopeScaling::kYarn) {
    for (int64_t i = 0; i < rc.rope_dim / 2; ++i) {
      factors.push_back(1.0f + 0.125f * static_cast<float>(i % 5));
    }
  }
  return cpu::RopeParamsFromConfig(c, factors);
}

TEST_P(KernelTest, QkvRopeMatchesCpuOpsAndWritesPagedSlots) {
  const RopeCase cases[] = {
      {RopeLayout::kAdjacentPairs, 64, 64, false, false},
      {RopeLayout::kNeoxHalves, 64, 64, true, false},
      {RopeLayout::kNeoxHalves, 128, 128, false, true},
      {RopeLayout::kAdjacentPairs, 96, 32, true, true},
      {RopeLayout::kAdjacentPairs, 8, 8, false, false},
      {RopeLayout::kNeoxHalves, 64, 64, true, false, RopeScaling::kYarn},
      {RopeLayout::kAdjacentPairs, 128, 96, false, true, RopeScaling::kYarn},
  };
  for (const RopeCase& rc : cases) {
    SCOPED_TRACE(::testing::Message()
                 << rc.head_dim << " / " << rc.rope_dim
                 << (rc.scaling == RopeScaling::kYarn ? " yarn" : " linear"));
    constexpr int64_t kTokens = 21, kHeads = 6, kKvHeads = 2, kBlockSize = 16;
    constexpr int64_t kBlocks = 8;
    const int64_t hd = rc.head_dim;
    const int64_t q_dim = kHeads * hd, kv_dim = kKvHeads * hd;
    const int64_t width = q_dim + 2 * kv_dim;
    const float eps = 1e-6f;
    const cpu::RopeParams rope = CaseRope(rc);
    const std::vector<float> qkv = Random(kTokens * width);
    const std::vector<float> bias = Random(width, 0.1f);
    const std::vector<float> q_norm = Random(hd);
    const std::vector<float> k_norm = Random(hd);
    std::vector<int32_t> positions(kTokens), slots(kTokens);
    std::vector<int32_t> perm(kBlocks * kBlockSize);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    for (int64_t t = 0; t < kTokens; ++t) {
      positions[t] = static_cast<int32_t>(rng_() % 5000);
      slots[t] = perm[t];
    }
    const std::vector<double>& inv_freq = rope.table.inv_freq;
    const size_t cache_elems = kBlocks * 2 * kKvHeads * kBlockSize * hd;
    DeviceBuffer d_qkv, d_bias, d_qn, d_kn, d_pos, d_slots, d_freq, d_cache;
    ASSERT_TRUE(Upload(qkv, &d_qkv).ok());
    ASSERT_TRUE(Upload(bias, &d_bias).ok());
    ASSERT_TRUE(Upload(q_norm, &d_qn).ok());
    ASSERT_TRUE(Upload(k_norm, &d_kn).ok());
    ASSERT_TRUE(Upload(positions, &d_pos).ok());
    ASSERT_TRUE(Upload(slots, &d_slots).ok());
    ASSERT_TRUE(Upload(inv_freq, &d_freq).ok());
    ASSERT_TRUE(Poisoned(cache_elems * elem(), &d_cache).ok());
    QkvRopeParams p;
    p.n_tokens = kTokens;
    p.n_heads = kHeads;
    p.n_kv_heads = kKvHeads;
    p.head_dim = hd;
    p.rope_dim = rc.rope_dim;
    p.neox = rc.layout == RopeLayout::kNeoxHalves;
    p.mscale = rope.table.mscale;
    p.eps = eps;
    p.inv_freq = d_freq.as<double>();
    p.bias = rc.bias ? d_bias.as<float>() : nullptr;
    p.q_norm = rc.qk_norm ? d_qn.as<float>() : nullptr;
    p.k_norm = rc.qk_norm ? d_kn.as<float>() : nullptr;
    p.positions = d_pos.as<int32_t>();
    p.slot_mapping = d_slots.as<int32_t>();
    p.block_size = kBlockSize;
    p.qkv = d_qkv.as<float>();
    p.kv_layer = d_cache.get();
    ASSERT_EQ(LaunchQkvRope(dtype(), p, nullptr), cudaSuccess);

    // The CPU engine's sequence of ops (cpu_engine.cc RunLayer).
    std::vector<float> q(kTokens * q_dim), k(kTokens * kv_dim),
        v(kTokens * kv_dim);
    for (int64_t t = 0; t < kTokens; ++t) {
      std::copy_n(&qkv[t * width], q_dim, &q[t * q_dim]);
      std::copy_n(&qkv[t * width + q_dim], kv_dim, &k[t * kv_dim]);
      std::copy_n(&qkv[t * width + q_dim + kv_dim], kv_dim, &v[t * kv_dim]);
    }
    if (rc.bias) {
      cpu::AddBias(q.data(), bias.data(), kTokens, q_dim);
      cpu::AddBias(k.data(), bias.data() + q_dim, kTokens, kv_dim);
      cpu::AddBias(v.data(), bias.data() + q_dim + kv_dim, kTokens, kv_dim);
    }
    if (rc.qk_norm) {
      cpu::RmsNorm(q.data(), q_norm.data(), kTokens * kHeads, hd, eps,
                   q.data());
      cpu::RmsNorm(k.data(), k_norm.data(), kTokens * kKvHeads, hd, eps,
                   k.data());
    }
    std::vector<float> cos(kTokens * rc.rope_dim / 2),
        sin(kTokens * rc.rope_dim / 2);
    cpu::RopeAngles(positions.data(), kTokens, rope, cos.data(), sin.data());
    cpu::ApplyRope(q.data(), kTokens, kHeads, hd, rope, cos.data(), sin.data());
    cpu::ApplyRope(k.data(), kTokens, kKvHeads, hd, rope, cos.data(),
                   sin.data());

    const std::vector<float> got_qkv =
        Download(GgmlType::kF32, d_qkv, kTokens * width);
    std::vector<float> got_q, ref_k_cache, got_k_cache, ref_v_cache,
        got_v_cache;
    for (int64_t t = 0; t < kTokens; ++t) {
      got_q.insert(got_q.end(), &got_qkv[t * width],
                   &got_qkv[t * width] + q_dim);
    }
    // Positions up to 5000 at base 1e6: a few ulps of the angle.
    ExpectClose(got_q, q, 1e-5, 1e-4, "rotated q");
    const std::vector<float> cache = Download(dtype(), d_cache, cache_elems);
    for (int64_t t = 0; t < kTokens; ++t) {
      const int64_t block = slots[t] / kBlockSize, slot = slots[t] % kBlockSize;
      for (int64_t h = 0; h < kKvHeads; ++h) {
        for (int64_t which = 0; which < 2; ++which) {
          const float* src =
              (which == 0 ? k.data() : v.data()) + (t * kKvHeads + h) * hd;
          const float* dst =
              &cache[(((block * 2 + which) * kKvHeads + h) * kBlockSize +
                      slot) *
                     hd];
          auto& ref = which == 0 ? ref_k_cache : ref_v_cache;
          auto& got = which == 0 ? got_k_cache : got_v_cache;
          ref.insert(ref.end(), src, src + hd);
          got.insert(got.end(), dst, dst + hd);
        }
      }
    }
    const double rtol = std::max(1e-4, DefaultRtol(dtype()));
    ExpectClose(got_k_cache, ref_k_cache, 1e-5, rtol, "K in cache");
    ExpectClose(got_v_cache, ref_v_cache, 1e-5, rtol, "V in cache");
  }
}

// Sequences with scattered blocks: prefill chunks after cached context and
// decode tokens with long contexts, every split count and the tiled kernel.
TEST_P(KernelTest, PagedAttentionMatchesCpu) {
  constexpr int64_t kHeads = 8, kKvHeads = 2, kHeadDim = 128;
  constexpr int64_t kBlockSize = 16, kBlocks = 200;
  cpu::KvCacheShape shape;
  shape.n_layers = 1;
  shape.n_kv_heads = kKvHeads;
  shape.head_dim = kHeadDim;
  shape.block_size = kBlockSize;
  shape.num_blocks = kBlocks;
  auto cache = cpu::KvCache::Create(shape);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const size_t cache_elems = kBlocks * 2 * kKvHeads * kBlockSize * kHeadDim;
  const std::vector<float> kv = RoundAll(dtype(), Random(cache_elems));
  std::copy(kv.begin(), kv.end(), (*cache)->Rows(0, 0, 0, 0));

  // Sequence 0: a 30-token chunk at positions [100, 130); sequence 1: one
  // decode token at 1500 (300 emulated); sequence 2: a 1-token prompt;
  // sequence 3: a decode at 37; sequence 4: a 40-token prompt.
  const int32_t long_decode = testing::kEmulated ? 300 : 1500;
  const std::vector<AttentionSeq> seqs = {
      {100, 30}, {long_decode, 1}, {0, 1}, {37, 1}, {0, 40}};
  std::vector<int32_t> ids(kBlocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng_);
  // Sequences share some blocks (a prefix cache would): every other one
  // reuses the front of `ids`; the rest take the next unused.
  size_t next_id = 0;
  const AttentionLayout l =
      LayOutAttention(seqs, kBlockSize, [&](size_t s, int64_t b) {
        return s % 2 == 1 && b < 3 ? ids[b] : ids[next_id++ % kBlocks];
      });
  const auto& [tables, positions, token_table, offsets, flat, tiles] = l;
  const int64_t n = static_cast<int64_t>(positions.size());
  const std::vector<float> q = Random(n * kHeads * kHeadDim);
  std::vector<absl::Span<const int32_t>> spans(tables.begin(), tables.end());
  cpu::AttentionParams ap;
  ap.n_heads = kHeads;
  ap.n_kv_heads = kKvHeads;
  ap.head_dim = kHeadDim;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::vector<float> ref(n * kHeads * kHeadDim);
  cpu::ThreadPool pool(2);
  cpu::PagedAttention(**cache, 0, ap, q.data(), n, positions.data(),
                      token_table.data(), spans, ref.data(), pool);

  DeviceBuffer d_q, d_pos, d_off, d_tables, d_kv, d_partial, d_tiles;
  ASSERT_TRUE(Upload(tiles, &d_tiles).ok());
  ASSERT_TRUE(Upload(q, &d_q).ok());
  ASSERT_TRUE(Upload(positions, &d_pos).ok());
  ASSERT_TRUE(Upload(offsets, &d_off).ok());
  ASSERT_TRUE(Upload(flat, &d_tables).ok());
  ASSERT_TRUE(Upload(Encode(dtype(), kv), &d_kv).ok());
  constexpr int64_t kPartialRows = 4096;
  ASSERT_TRUE(
      Poisoned(kPartialRows * (kHeadDim + 2) * sizeof(float), &d_partial).ok());
  // -1: the tiled kernel. The emulation runs fewer split counts.
  const std::vector<int> modes = testing::kEmulated
                                     ? std::vector<int>{0, 3, -1}
                                     : std::vector<int>{0, 1, 2, 3, 7, -1};
  for (int splits : modes) {
    SCOPED_TRACE(splits);
    DeviceBuffer d_out;
    ASSERT_TRUE(Poisoned(n * kHeads * kHeadDim * elem(), &d_out).ok());
    PagedAttentionParams p;
    p.n_tokens = n;
    p.n_heads = kHeads;
    p.n_kv_heads = kKvHeads;
    p.head_dim = kHeadDim;
    p.block_size = kBlockSize;
    p.scale = ap.scale;
    p.q = d_q.as<float>();
    p.q_stride = kHeads * kHeadDim;
    p.positions = d_pos.as<int32_t>();
    p.table_offsets = d_off.as<int32_t>();
    p.block_tables = d_tables.as<int32_t>();
    p.kv_layer = d_kv.get();
    p.out = d_out.get();
    p.max_context = long_decode + 1;
    p.partial = d_partial.as<float>();
    p.partial_rows = kPartialRows;
    p.force_splits = std::max(splits, 0);
    p.tiles = splits < 0 ? d_tiles.as<int32_t>() : nullptr;
    EXPECT_EQ(PlanPagedAttention(p).tiled, splits < 0);
    if (splits > 0) {
      EXPECT_EQ(PagedAttentionSplits(p), splits);
    }
    ASSERT_EQ(LaunchPagedAttention(dtype(), dtype(), p, nullptr), cudaSuccess);
    ExpectClose(Download(dtype(), d_out, n * kHeads * kHeadDim), ref, 1e-5,
                std::max(1e-4, DefaultRtol(dtype())), "attention");
  }
}

// A double-precision reference of one (token, head) row: softmax over the
// token's window [max(0, P - window + 1), P] with the sink (if any) in its
// max and denominator, unscaled. kv: (blocks, 2, n_kv_heads, block_size,
// head_dim) floats as stored.
struct WindowRef {
  int64_t n_heads, n_kv_heads, head_dim, block_size, window;
  float scale;
  const float* sinks;  // (n_heads) or null
  const std::vector<float>* kv;

  const float* Row(int64_t block, int64_t which, int64_t kv_head,
                   int64_t slot) const {
    return kv->data() +
           (((block * 2 + which) * n_kv_heads + kv_head) * block_size + slot) *
               head_dim;
  }
  void Compute(const float* q, int64_t position, const int32_t* table,
               int64_t h, float* out) const {
    const int64_t kv_head = h / (n_heads / n_kv_heads);
    const int64_t first =
        window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
    std::vector<double> e;
    double max = sinks == nullptr ? -1e300 : sinks[h];
    for (int64_t p = first; p <= position; ++p) {
      const float* k = Row(table[p / block_size], 0, kv_head, p % block_size);
      double dot = 0;
      for (int64_t d = 0; d < head_dim; ++d) dot += double{q[d]} * k[d];
      e.push_back(dot * scale);
      max = std::max(max, e.back());
    }
    double sum = sinks == nullptr ? 0 : std::exp(sinks[h] - max);
    for (double& x : e) sum += (x = std::exp(x - max));
    for (int64_t d = 0; d < head_dim; ++d) {
      double acc = 0;
      for (int64_t p = first; p <= position; ++p) {
        acc += e[p - first] / sum *
               Row(table[p / block_size], 1, kv_head, p % block_size)[d];
      }
      out[d] = static_cast<float>(acc);
    }
  }
};

// The cache of `kv_dtype` holding `kv` (F32 / F16 / BF16 / Q8_0 rows of
// head_dim); `kv` becomes the values stored.
std::vector<uint8_t> StoreKv(GgmlType kv_dtype, int64_t head_dim,
                             std::vector<float>& kv) {
  if (kv_dtype != GgmlType::kQ8_0) {
    kv = RoundAll(kv_dtype, kv);
    return Encode(kv_dtype, kv);
  }
  const int64_t row_bytes = head_dim / 32 * 34;
  const int64_t rows = std::ssize(kv) / head_dim;
  std::vector<uint8_t> bytes(rows * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = kv.data() + r * head_dim;
    EXPECT_TRUE(
        QuantizeRow(kv_dtype, row, head_dim, &bytes[r * row_bytes]).ok());
    EXPECT_TRUE(
        DequantizeRow(kv_dtype, &bytes[r * row_bytes], row, head_dim).ok());
  }
  return bytes;
}

// Sliding windows and attention sinks: windows below, crossing and past
// the 16-position blocks and the contexts, a prefill chunk whose tokens'
// windows differ (tiled: one tile's rows), a long decode split over its
// window; sinks of no, moderate and dominating weight. Every K/V row
// before a sequence's windows is NaN: no kernel may read it. Also a Q8_0
// cache beside F32 and F16 activations.
TEST_P(KernelTest, PagedAttentionWindowsAndSinks) {
  constexpr int64_t kHeads = 8, kKvHeads = 2, kHeadDim = 128;
  constexpr int64_t kBlockSize = 16;
  const std::vector<AttentionSeq> seqs = {{40, 20}, {300, 1}, {0, 1}, {37, 1}};
  int32_t next_block = 0;
  const AttentionLayout l = LayOutAttention(
      seqs, kBlockSize, [&](size_t, int64_t) { return next_block++; });
  const auto& [tables, positions, token_table, offsets, flat, tiles] = l;
  const int64_t n = std::ssize(positions);
  const int64_t n_blocks = next_block;
  const std::vector<float> q = Random(n * kHeads * kHeadDim);
  const std::vector<float> kv_random =
      Random(n_blocks * 2 * kKvHeads * kBlockSize * kHeadDim);
  std::vector<float> small = Random(kHeads), large = Random(kHeads);
  for (float& x : large) x = 25.0f + 4.0f * x;
  const std::vector<const float*> sink_kinds = {nullptr, small.data(),
                                                large.data()};
  DeviceBuffer d_q, d_pos, d_off, d_tables, d_tiles, d_small, d_large;
  ASSERT_TRUE(Upload(q, &d_q).ok());
  ASSERT_TRUE(Upload(positions, &d_pos).ok());
  ASSERT_TRUE(Upload(offsets, &d_off).ok());
  ASSERT_TRUE(Upload(flat, &d_tables).ok());
  ASSERT_TRUE(Upload(tiles, &d_tiles).ok());
  ASSERT_TRUE(Upload(small, &d_small).ok());
  ASSERT_TRUE(Upload(large, &d_large).ok());
  const std::vector<const float*> d_sinks = {nullptr, d_small.as<float>(),
                                             d_large.as<float>()};
  std::vector<GgmlType> kv_types = {dtype()};
  if (dtype() != GgmlType::kBF16) kv_types.push_back(GgmlType::kQ8_0);
  constexpr int64_t kPartialRows = 4096;
  DeviceBuffer d_partial;
  ASSERT_TRUE(
      Poisoned(kPartialRows * (kHeadDim + 2) * sizeof(float), &d_partial).ok());
  for (const GgmlType kv_type : kv_types) {
    std::vector<float> kv = kv_random;
    std::vector<uint8_t> kv_bytes = StoreKv(kv_type, kHeadDim, kv);
    const int64_t row_bytes =
        std::ssize(kv_bytes) / (std::ssize(kv) / kHeadDim);
    const std::vector<int64_t> windows = {1, 17, 40, 1000};
    for (size_t wi = 0; wi < windows.size(); ++wi) {
      const int64_t window = windows[wi];
      // NaN in every row before a sequence's first token's window.
      std::vector<uint8_t> poisoned = kv_bytes;
      for (size_t s = 0; s < seqs.size(); ++s) {
        const int64_t first =
            std::max<int64_t>(0, seqs[s].position_begin - window + 1);
        for (int64_t p = 0; p < first; ++p) {
          for (int64_t which = 0; which < 2; ++which) {
            for (int64_t h = 0; h < kKvHeads; ++h) {
              const int64_t r =
                  ((tables[s][p / kBlockSize] * 2 + which) * kKvHeads + h) *
                      kBlockSize +
                  p % kBlockSize;
              std::fill_n(&poisoned[r * row_bytes], row_bytes, 0xff);
            }
          }
        }
      }
      DeviceBuffer d_kv;
      ASSERT_TRUE(Upload(poisoned, &d_kv).ok());
      // -1: the tiled kernel.
      const std::vector<int> modes = {0, 3, -1};
      for (size_t mi = 0; mi < modes.size(); ++mi) {
        const size_t sink = (wi + mi) % sink_kinds.size();
        SCOPED_TRACE(::testing::Message()
                     << GgmlTypeName(kv_type) << " window " << window
                     << " splits " << modes[mi] << " sinks " << sink);
        const WindowRef ref_of{
            kHeads,           kKvHeads, kHeadDim,
            kBlockSize,       window,   1.0f / std::sqrt(float{kHeadDim}),
            sink_kinds[sink], &kv};
        std::vector<float> ref(n * kHeads * kHeadDim);
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t h = 0; h < kHeads; ++h) {
            ref_of.Compute(&q[(t * kHeads + h) * kHeadDim], positions[t],
                           &flat[offsets[t]], h,
                           &ref[(t * kHeads + h) * kHeadDim]);
          }
        }
        DeviceBuffer d_out;
        ASSERT_TRUE(Poisoned(n * kHeads * kHeadDim * elem(), &d_out).ok());
        PagedAttentionParams p;
        p.n_tokens = n;
        p.n_heads = kHeads;
        p.n_kv_heads = kKvHeads;
        p.head_dim = kHeadDim;
        p.block_size = kBlockSize;
        p.scale = ref_of.scale;
        p.window = window;
        p.sinks = d_sinks[sink];
        p.q = d_q.as<float>();
        p.q_stride = kHeads * kHeadDim;
        p.positions = d_pos.as<int32_t>();
        p.table_offsets = d_off.as<int32_t>();
        p.block_tables = d_tables.as<int32_t>();
        p.kv_layer = d_kv.get();
        p.out = d_out.get();
        p.max_context = 301;
        p.partial = d_partial.as<float>();
        p.partial_rows = kPartialRows;
        p.force_splits = std::max(modes[mi], 0);
        p.tiles = modes[mi] < 0 ? d_tiles.as<int32_t>() : nullptr;
        ASSERT_EQ(LaunchPagedAttention(dtype(), kv_type, p, nullptr),
                  cudaSuccess);
        ExpectClose(Download(dtype(), d_out, n * kHeads * kHeadDim), ref, 1e-5,
                    std::max(1e-4, DefaultRtol(dtype())), "attention");
      }
    }
  }
}

// The sampling kernel against the host's SampleRow: the same token for
// every row, bit for bit (the rule's arithmetic is shared and its sums are
// integers), over vocabularies from 1 to Qwen's, rows with ties and signed
// zeros, non-finite rows, token masks (dense, sparse, allowing nothing),
// and every mix of filters; rows left on the host keep their poisoned
// token.
class SamplingKernelTest : public testing::GpuTest {
 protected:
  std::vector<float> Row(int64_t vocab) {
    std::vector<float> z(vocab);
    switch (rng_() % 3) {
      case 0:  // model-like: a few large logits above a broad bulk
        z = Random(vocab, 3.0f);
        for (int i = 0; i < 4; ++i) z[rng_() % vocab] += 12.0f;
        break;
      case 1:  // a coarse grid: many ties, both zeros
        for (float& x : z) {
          x = static_cast<float>(static_cast<int32_t>(rng_() % 9) - 4) * 0.5f;
          if (x == 0.0f && rng_() % 2 == 0) x = -0.0f;
        }
        break;
      default:  // nearly flat
        z = Random(vocab, 0.01f);
        break;
    }
    return z;
  }

  RowSampling Params(int64_t vocab) {
    RowSampling s;
    s.in_engine = rng_() % 8 != 0;
    const uint32_t kind = rng_() % 8;
    s.temperature =
        kind == 0 ? 0.0f : 0.2f * static_cast<float>(1 + rng_() % 10);
    if (kind & 1) {
      s.top_k =
          static_cast<int32_t>(1 + rng_() % std::min<int64_t>(vocab + 2, 2000));
    }
    if (kind & 2) s.top_p = 0.05f * static_cast<float>(1 + rng_() % 20);
    if (kind & 4) s.min_p = 0.01f * static_cast<float>(rng_() % 20);
    s.uniform = static_cast<double>(rng_() >> 5) * 0x1p-27;
    return s;
  }
};

TEST_F(SamplingKernelTest, MatchesHostSampleRowExactly) {
  constexpr int32_t kPoison = 0x7f7f7f7f;
  const std::vector<int64_t> vocabs =
      testing::kEmulated ? std::vector<int64_t>{1, 2, 31, 600, 3000}
                         : std::vector<int64_t>{1, 2, 31, 600, 32000, 151936};
  for (int64_t vocab : vocabs) {
    SCOPED_TRACE(vocab);
    const int64_t rows = testing::kEmulated ? 12 : vocab > 100000 ? 24 : 48;
    std::vector<float> logits;
    std::vector<RowSampling> params;
    const int64_t words = MaskWords(vocab);
    std::vector<uint32_t> masks(rows * words);
    std::vector<bool> masked(rows);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> z = Row(vocab);
      if (r % 11 == 5) z[rng_() % vocab] = r % 2 == 0 ? NAN : INFINITY;
      logits.insert(logits.end(), z.begin(), z.end());
      params.push_back(Params(vocab));
      masked[r] = r % 3 == 1;
      const uint32_t kind = rng_() % 8;
      for (int64_t w = 0; w < words && masked[r]; ++w) {
        masks[r * words + w] = kind == 0       ? 0u
                               : kind % 2 == 0 ? rng_()
                                               : rng_() & rng_() & rng_();
      }
    }
    DeviceBuffer d_logits, d_params, d_tokens, d_masks;
    ASSERT_TRUE(Upload(logits, &d_logits).ok());
    ASSERT_TRUE(Upload(masks, &d_masks).ok());
    std::vector<RowSampling> device_params = params;
    for (int64_t r = 0; r < rows; ++r) {
      if (!masked[r]) continue;
      params[r].allowed = masks.data() + r * words;
      device_params[r].allowed = d_masks.as<uint32_t>() + r * words;
    }
    ASSERT_TRUE(Upload(device_params, &d_params).ok());
    ASSERT_TRUE(Upload(std::vector<int32_t>(rows, kPoison), &d_tokens).ok());
    ASSERT_EQ(LaunchSampleRows(d_logits.as<float>(), rows, vocab,
                               d_params.as<RowSampling>(),
                               d_tokens.as<int32_t>(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int32_t> tokens(rows);
    ASSERT_EQ(cudaMemcpy(tokens.data(), d_tokens.get(), rows * sizeof(int32_t),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t r = 0; r < rows; ++r) {
      const RowSampling& s = params[r];
      const int32_t want =
          s.in_engine
              ? SampleRow(absl::MakeConstSpan(logits.data() + r * vocab, vocab),
                          s)
              : kPoison;
      EXPECT_EQ(tokens[r], want)
          << "row " << r << ": T " << s.temperature << " top_k " << s.top_k
          << " top_p " << s.top_p << " min_p " << s.min_p << " u " << s.uniform
          << " masked " << masked[r];
    }
  }
}

// The DeltaNet kernels against cpu::DeltaNetConv and cpu::DeltaNetHead:
// three slices (a fresh one at position 0 over a state slot full of
// garbage, a decode token and a chunk continuing random states), tiled and
// grouped key heads, separate and per-key-head (fused) beta/alpha, head
// sizes 64 and 128 (the state in registers) and 40 (in device memory, not
// a multiple of 32); the outputs, and every slot's state afterwards (the
// kernels keep the matrices transposed).
TEST_P(KernelTest, DeltaNetConvAndRuleMatchCpu) {
  constexpr int64_t kKHeads = 2, kVHeads = 4, kTaps = 4, kSlots = 3;
  const std::vector<std::vector<int32_t>> slices = {
      // token_begin, token_count, state_slot, position_begin
      {0, 5, 2, 0},
      {5, 1, 0, 7},
      {6, 9, 1, 3}};
  constexpr int64_t kTokens = 15;
  std::vector<int32_t> flat;
  for (const auto& s : slices) flat.insert(flat.end(), s.begin(), s.end());
  for (const int64_t d : {64, 128, 40}) {
    for (const bool grouped : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " grouped " << grouped);
      const bool fused = grouped;  // qwen3next has both
      cpu::DeltaNetShape shape;
      shape.conv_kernel = kTaps;
      shape.k_heads = kKHeads;
      shape.v_heads = kVHeads;
      shape.head_dim = d;
      shape.grouped = grouped;
      shape.eps = 1e-6f;
      const int64_t conv = shape.conv_dim();
      const int64_t inner = kVHeads * d;
      const int64_t stride = conv + inner + 2 * kVHeads + 3;  // padded
      const int64_t conv_floats = (kTaps - 1) * conv;
      const int64_t slot_floats = conv_floats + kVHeads * d * d;
      const std::vector<float> in = Random(kTokens * stride);
      const std::vector<float> w = Random(conv * kTaps, 0.5f);
      std::vector<float> ssm_a = Random(kVHeads, 0.5f);
      for (float& a : ssm_a) a = -std::exp(a);
      const std::vector<float> dt_bias = Random(kVHeads, 0.5f);
      const std::vector<float> norm = Random(d, 0.1f);
      // The CPU's states row-major, the kernels' with matrices transposed.
      const std::vector<float> states = Random(kSlots * slot_floats, 0.3f);
      std::vector<float> transposed = states;
      for (int64_t s = 0; s < kSlots; ++s) {
        for (int64_t v = 0; v < kVHeads; ++v) {
          const int64_t base = s * slot_floats + conv_floats + v * d * d;
          for (int64_t i = 0; i < d; ++i) {
            for (int64_t j = 0; j < d; ++j) {
              transposed[base + j * d + i] = states[base + i * d + j];
            }
          }
        }
      }
      DeviceBuffer d_slices, d_in, d_w, d_a, d_dt, d_norm, d_states, d_conv,
          d_out;
      ASSERT_TRUE(Upload(flat, &d_slices).ok());
      ASSERT_TRUE(Upload(in, &d_in).ok());
      ASSERT_TRUE(Upload(w, &d_w).ok());
      ASSERT_TRUE(Upload(ssm_a, &d_a).ok());
      ASSERT_TRUE(Upload(dt_bias, &d_dt).ok());
      ASSERT_TRUE(Upload(norm, &d_norm).ok());
      ASSERT_TRUE(Upload(transposed, &d_states).ok());
      ASSERT_TRUE(Poisoned(kTokens * conv * sizeof(float), &d_conv).ok());
      ASSERT_TRUE(Poisoned(kTokens * inner * elem(), &d_out).ok());
      DeltaNetConvParams cp;
      cp.n_slices = static_cast<int64_t>(slices.size());
      cp.slices = d_slices.as<int32_t>();
      cp.conv_dim = conv;
      cp.kernel = kTaps;
      cp.w = d_w.as<float>();
      cp.x = d_in.as<float>();
      cp.x_stride = stride;
      cp.out = d_conv.as<float>();
      cp.states = d_states.as<float>();
      cp.slot_stride = slot_floats;
      ASSERT_EQ(LaunchDeltaNetConv(cp, nullptr), cudaSuccess);
      DeltaNetRuleParams rp;
      rp.n_slices = cp.n_slices;
      rp.slices = cp.slices;
      rp.k_heads = kKHeads;
      rp.v_heads = kVHeads;
      rp.head_dim = d;
      rp.grouped = grouped;
      rp.fused_ba = fused;
      rp.eps = shape.eps;
      rp.conv = d_conv.as<float>();
      rp.in = d_in.as<float>();
      rp.in_stride = stride;
      rp.z_col = conv;
      rp.ba_col = conv + inner;
      rp.ssm_a = d_a.as<float>();
      rp.dt_bias = d_dt.as<float>();
      rp.norm = d_norm.as<float>();
      rp.states = d_states.as<float>() + conv_floats;
      rp.slot_stride = slot_floats;
      rp.out = d_out.get();
      ASSERT_EQ(LaunchDeltaNetRule(dtype(), rp, nullptr), cudaSuccess);

      // The CPU engine's way (cpu_delta_net.cc): columns apart, beta and
      // alpha as v_heads betas then v_heads alphas.
      std::vector<float> want_states = states;
      std::vector<float> want_conv(kTokens * conv), want_out(kTokens * inner);
      std::vector<float> x(kTokens * conv), z(kTokens * inner),
          ba(kTokens * 2 * kVHeads);
      const int64_t r = kVHeads / kKHeads;
      for (int64_t t = 0; t < kTokens; ++t) {
        const float* row = &in[t * stride];
        std::copy(row, row + conv, &x[t * conv]);
        std::copy(row + conv, row + conv + inner, &z[t * inner]);
        for (int64_t v = 0; v < kVHeads; ++v) {
          const int64_t b = fused ? (v / r) * 2 * r + v % r : v;
          const int64_t a = fused ? b + r : kVHeads + v;
          ba[t * 2 * kVHeads + v] = row[conv + inner + b];
          ba[t * 2 * kVHeads + kVHeads + v] = row[conv + inner + a];
        }
      }
      for (const auto& s : slices) {
        float* state = &want_states[s[2] * slot_floats];
        if (s[3] == 0) std::fill(state, state + slot_floats, 0.0f);
        cpu::DeltaNetConv(shape, w.data(), state, &x[s[0] * conv], s[1],
                          &want_conv[s[0] * conv]);
        cpu::DeltaNetHeadArgs args;
        args.conv = &want_conv[s[0] * conv];
        args.b = &ba[s[0] * 2 * kVHeads];
        args.a = args.b + kVHeads;
        args.ba_stride = 2 * kVHeads;
        args.z = &z[s[0] * inner];
        args.ssm_a = ssm_a.data();
        args.dt_bias = dt_bias.data();
        args.norm = norm.data();
        for (int64_t v = 0; v < kVHeads; ++v) {
          cpu::DeltaNetHead(shape, args, v, s[1],
                            state + conv_floats + v * d * d,
                            &want_out[s[0] * inner]);
        }
      }
      ExpectClose(Download(GgmlType::kF32, d_conv, kTokens * conv), want_conv,
                  1e-6, 1e-5, "conv");
      ExpectClose(Download(dtype(), d_out, kTokens * inner), want_out, 1e-5,
                  std::max(1e-4, DefaultRtol(dtype())), "delta rule");
      std::vector<float> got_states =
          Download(GgmlType::kF32, d_states, kSlots * slot_floats);
      for (int64_t s = 0; s < kSlots; ++s) {
        for (int64_t v = 0; v < kVHeads; ++v) {
          const int64_t base = s * slot_floats + conv_floats + v * d * d;
          std::vector<float> m(got_states.begin() + base,
                               got_states.begin() + base + d * d);
          for (int64_t i = 0; i < d; ++i) {
            for (int64_t j = 0; j < d; ++j) {
              got_states[base + i * d + j] = m[j * d + i];
            }
          }
        }
      }
      ExpectClose(got_states, want_states, 1e-6, 1e-4, "states");
    }
  }
}

// Gated attention's split and output gate, and the shared expert's gated
// add, against plain loops (cpu_layer.cc's SplitQueryGate and sigmoid;
// cpu_delta_net.cc's SharedExpert).
TEST_P(KernelTest, SigmoidGates) {
  constexpr int64_t kTokens = 7, kHeads = 3, kHeadDim = 40, kKvDim = 80;
  constexpr int64_t kQDim = kHeads * kHeadDim;
  const std::vector<float> qg = Random(kTokens * (2 * kQDim + 2 * kKvDim));
  DeviceBuffer d_qg, d_qkv, d_gate;
  ASSERT_TRUE(Upload(qg, &d_qg).ok());
  ASSERT_TRUE(Poisoned(kTokens * (kQDim + 2 * kKvDim) * 4, &d_qkv).ok());
  ASSERT_TRUE(Poisoned(kTokens * kQDim * 4, &d_gate).ok());
  ASSERT_EQ(
      LaunchSplitQueryGate(d_qg.as<float>(), kTokens, kHeads, kHeadDim, kKvDim,
                           d_qkv.as<float>(), d_gate.as<float>(), nullptr),
      cudaSuccess);
  std::vector<float> want_qkv, want_gate;
  for (int64_t t = 0; t < kTokens; ++t) {
    const float* row = &qg[t * (2 * kQDim + 2 * kKvDim)];
    for (int64_t h = 0; h < kHeads; ++h) {
      const float* head = row + h * 2 * kHeadDim;
      want_qkv.insert(want_qkv.end(), head, head + kHeadDim);
      want_gate.insert(want_gate.end(), head + kHeadDim, head + 2 * kHeadDim);
    }
    want_qkv.insert(want_qkv.end(), row + 2 * kQDim,
                    row + 2 * kQDim + 2 * kKvDim);
  }
  const std::vector<float> gate =
      Download(GgmlType::kF32, d_gate, kTokens * kQDim);
  ExpectClose(Download(GgmlType::kF32, d_qkv, want_qkv.size()), want_qkv, 0, 0,
              "split qkv");
  ExpectClose(gate, want_gate, 0, 0, "split gate");

  const std::vector<float> att = RoundAll(dtype(), Random(kTokens * kQDim));
  DeviceBuffer d_att;
  ASSERT_TRUE(Upload(Encode(dtype(), att), &d_att).ok());
  ASSERT_EQ(LaunchSigmoidGate(dtype(), d_att.get(), d_gate.as<float>(),
                              kTokens * kQDim, nullptr),
            cudaSuccess);
  std::vector<float> want_att(att.size());
  for (size_t i = 0; i < att.size(); ++i) {
    want_att[i] = att[i] * (1.0f / (1.0f + std::exp(-want_gate[i])));
  }
  ExpectClose(Download(dtype(), d_att, att.size()), want_att, 1e-6,
              DefaultRtol(dtype()), "output gate");

  constexpr int64_t kDim = 300;
  const std::vector<float> h = RoundAll(dtype(), Random(kTokens * kDim));
  const std::vector<float> w = Random(kDim, 0.1f);
  const std::vector<float> y = Random(kTokens * kDim);
  const std::vector<float> x = Random(kTokens * kDim);
  DeviceBuffer d_h, d_w, d_y, d_x;
  ASSERT_TRUE(Upload(Encode(dtype(), h), &d_h).ok());
  ASSERT_TRUE(Upload(w, &d_w).ok());
  ASSERT_TRUE(Upload(y, &d_y).ok());
  ASSERT_TRUE(Upload(x, &d_x).ok());
  ASSERT_EQ(LaunchSigmoidGatedAdd(dtype(), d_h.get(), d_w.as<float>(),
                                  d_y.as<float>(), kTokens, kDim,
                                  d_x.as<float>(), nullptr),
            cudaSuccess);
  std::vector<float> want_x = x;
  for (int64_t t = 0; t < kTokens; ++t) {
    float logit = 0;
    for (int64_t i = 0; i < kDim; ++i) logit += h[t * kDim + i] * w[i];
    const float scale = 1.0f / (1.0f + std::exp(-logit));
    for (int64_t i = 0; i < kDim; ++i) {
      want_x[t * kDim + i] += scale * y[t * kDim + i];
    }
  }
  ExpectClose(Download(GgmlType::kF32, d_x, want_x.size()), want_x, 1e-6, 1e-5,
              "shared expert gate");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, KernelTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16,
                                           GgmlType::kBF16),
                         [](const auto& info) {
                           return std::string(GgmlTypeName(info.param));
                         });

}  // namespace
}  // namespace paceline::engine::cuda
