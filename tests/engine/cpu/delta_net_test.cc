// The gated delta rule (engine/cpu/delta_net.h): the engine's scan in 16
// lanes and the scan in ggml's order against a double-precision scan
// written here, on random inputs with a non-zero starting state.

#include "engine/cpu/delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::engine::cpu {
namespace {

// One layer's inputs for n tokens, drawn from a fixed seed: the
// convolution's output rows, beta and alpha logits, z, and per value head
// ssm_a (= -exp(A_log), A log-uniform in [0.01, 2] as the oracle files
// draw it), dt_bias and the norm weights; and a starting state per value
// head.
struct Inputs {
  DeltaNetShape shape;
  int64_t n = 0;
  std::vector<float> conv;     // (n, conv_dim)
  std::vector<float> ba;       // (n, 2 v_heads): betas, then alphas
  std::vector<float> z;        // (n, v_heads d)
  std::vector<float> ssm_a;    // (v_heads)
  std::vector<float> dt_bias;  // (v_heads)
  std::vector<float> norm;     // (d)
  std::vector<float> state;    // (v_heads, d, d)

  DeltaNetHeadArgs Args() const {
    DeltaNetHeadArgs a;
    a.conv = conv.data();
    a.b = ba.data();
    a.a = ba.data() + shape.v_heads;
    a.ba_stride = 2 * shape.v_heads;
    a.z = z.data();
    a.ssm_a = ssm_a.data();
    a.dt_bias = dt_bias.data();
    a.norm = norm.data();
    return a;
  }
};

Inputs MakeInputs(int64_t d, bool grouped, int64_t n, uint32_t seed) {
  Inputs in;
  in.shape.conv_kernel = 4;
  in.shape.k_heads = 2;
  in.shape.v_heads = 4;
  in.shape.head_dim = d;
  in.shape.grouped = grouped;
  in.n = n;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fill = [&](std::vector<float>& v, size_t size, float mean,
                        float std) {
    v.resize(size);
    for (float& x : v) x = mean + std * normal(rng);
  };
  const int64_t nv = in.shape.v_heads;
  fill(in.conv, static_cast<size_t>(n * in.shape.conv_dim()), 0.0f, 1.0f);
  fill(in.ba, static_cast<size_t>(n * 2 * nv), 0.0f, 1.0f);
  fill(in.z, static_cast<size_t>(n * nv * d), 0.0f, 1.0f);
  fill(in.dt_bias, static_cast<size_t>(nv), -1.0f, 0.5f);
  fill(in.norm, static_cast<size_t>(d), 1.0f, 0.1f);
  std::uniform_real_distribution<float> log_a(std::log(0.01f), std::log(2.0f));
  in.ssm_a.resize(static_cast<size_t>(nv));
  for (float& x : in.ssm_a) x = -std::exp(std::exp(log_a(rng)));
  fill(in.state, static_cast<size_t>(nv * d * d), 0.0f, 0.3f);
  return in;
}

// The gated delta rule and the gated RMSNorm as delta_net.h states them,
// in double, a token at a time; writes head v's columns of out and updates
// its state.
void ReferenceHead(const Inputs& in, int64_t v, std::vector<double>* state,
                   std::vector<double>* out) {
  const DeltaNetShape& sh = in.shape;
  const int64_t d = sh.head_dim;
  const int64_t kh = sh.KeyHead(v);
  const int64_t nv = sh.v_heads;
  std::vector<double>& s = *state;
  std::vector<double> q(d), k(d), o(d);
  const auto l2 = [&](const float* x, double scale, std::vector<double>* y) {
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += double{x[i]} * x[i];
    const double r = scale / std::max(std::sqrt(sum), double{sh.eps});
    for (int64_t i = 0; i < d; ++i) (*y)[i] = x[i] * r;
  };
  const auto silu = [](double x) { return x / (1 + std::exp(-x)); };
  for (int64_t t = 0; t < in.n; ++t) {
    const float* row = in.conv.data() + t * sh.conv_dim();
    l2(row + kh * d, 1 / std::sqrt(static_cast<double>(d)), &q);
    l2(row + (sh.k_heads + kh) * d, 1, &k);
    const float* val = row + (2 * sh.k_heads + v) * d;
    const double beta = 1 / (1 + std::exp(-double{in.ba[t * 2 * nv + v]}));
    const double x = double{in.ba[t * 2 * nv + nv + v]} + in.dt_bias[v];
    const double decay = std::exp(std::log1p(std::exp(x)) * in.ssm_a[v]);
    for (double& e : s) e *= decay;
    for (int64_t i = 0; i < d; ++i) {
      double sk = 0;
      for (int64_t j = 0; j < d; ++j) sk += s[i * d + j] * k[j];
      const double delta = beta * (val[i] - sk);
      for (int64_t j = 0; j < d; ++j) s[i * d + j] += delta * k[j];
      double sq = 0;
      for (int64_t j = 0; j < d; ++j) sq += s[i * d + j] * q[j];
      o[i] = sq;
    }
    double ss = 0;
    for (double e : o) ss += e * e;
    const double r = 1 / std::sqrt(ss / static_cast<double>(d) + sh.eps);
    for (int64_t i = 0; i < d; ++i) {
      const int64_t at = t * nv * d + v * d + i;
      (*out)[at] = o[i] * r * in.norm[i] * silu(in.z[at]);
    }
  }
}

// max |x - ref| / max |ref|: the error against the vector's scale, so that
// an output or state entry near zero does not count as a large relative
// error for an absolute one at rounding level.
template <typename A, typename B>
double RelDiff(const std::vector<A>& x, const std::vector<B>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double{x[i]} - double{ref[i]}));
    scale = std::max(scale, std::abs(double{ref[i]}));
  }
  return diff / scale;
}

struct Case {
  int64_t d;
  bool grouped;
  int64_t n;
};

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "d" + std::to_string(c.d) + (c.grouped ? "_grouped" : "_tiled") +
         "_n" + std::to_string(c.n);
}

class DeltaNetTest : public testing::TestWithParam<Case> {};

// Float against double: the scan's rounding errors, ~d·2^-24 per dot
// product, are carried by the state and shrunk by its decay. Measured here
// (head sizes 64 and 128, up to 300 tokens): 9e-7 of the vector's scale
// from the double reference; 1e-4 leaves a 100x margin and still fails
// any wrong term (a missing decay or gate moves results by far more than
// 1e-2).
constexpr double kTolerance = 1e-4;

TEST_P(DeltaNetTest, ScansMatchDoubleReference) {
  const Case& c = GetParam();
  const Inputs in =
      MakeInputs(c.d, c.grouped, c.n, static_cast<uint32_t>(c.d * 1000 + c.n));
  const int64_t nv = in.shape.v_heads;
  const int64_t dd = c.d * c.d;
  const size_t out_size = static_cast<size_t>(c.n * nv * c.d);
  std::vector<float> scan_out(out_size), lanes_out(out_size);
  std::vector<double> ref_out(out_size);
  for (int64_t v = 0; v < nv; ++v) {
    SCOPED_TRACE("value head " + std::to_string(v));
    std::vector<float> scan_state(in.state.begin() + v * dd,
                                  in.state.begin() + (v + 1) * dd);
    std::vector<float> lanes_state = scan_state;
    std::vector<double> ref_state(scan_state.begin(), scan_state.end());
    DeltaNetHeadLanes(in.shape, in.Args(), v, c.n, lanes_state.data(),
                      lanes_out.data());
    DeltaNetHead(in.shape, in.Args(), v, c.n, scan_state.data(),
                 scan_out.data());
    ReferenceHead(in, v, &ref_state, &ref_out);
    EXPECT_LT(RelDiff(scan_state, ref_state), kTolerance);
    EXPECT_LT(RelDiff(lanes_state, ref_state), kTolerance);
  }
  EXPECT_LT(RelDiff(scan_out, ref_out), kTolerance);
  EXPECT_LT(RelDiff(lanes_out, ref_out), kTolerance);
}

// The 16-lane scan over n tokens in one call equals the same tokens split
// into calls of any length, bit for bit: the engine's result does not
// depend on how a sequence's tokens fall into steps.
TEST(DeltaNetLanesTest, SplitIntoCallsIsBitForBit) {
  const Inputs in = MakeInputs(64, true, 50, 11);
  const int64_t nv = in.shape.v_heads;
  const int64_t dd = 64 * 64;
  const size_t out_size = static_cast<size_t>(50 * nv * 64);
  std::vector<float> whole_out(out_size), split_out(out_size);
  for (int64_t v = 0; v < nv; ++v) {
    std::vector<float> whole(in.state.begin() + v * dd,
                             in.state.begin() + (v + 1) * dd);
    std::vector<float> split = whole;
    DeltaNetHeadLanes(in.shape, in.Args(), v, 50, whole.data(),
                      whole_out.data());
    int64_t t = 0;
    for (const int64_t len : {1, 16, 7, 26}) {
      DeltaNetHeadArgs a = in.Args();
      a.conv += t * in.shape.conv_dim();
      a.b += t * a.ba_stride;
      a.a += t * a.ba_stride;
      a.z += t * nv * 64;
      DeltaNetHeadLanes(in.shape, a, v, len, split.data(),
                        split_out.data() + t * nv * 64);
      t += len;
    }
    EXPECT_EQ(whole, split);
  }
  EXPECT_EQ(whole_out, split_out);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (int64_t d : {64, 128}) {
    for (bool grouped : {false, true}) {
      for (int64_t n : {1, 7, 16, 17, 53, 300}) {
        cases.push_back({d, grouped, n});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaNetTest, testing::ValuesIn(Cases()),
                         CaseName);

}  // namespace
}  // namespace paceline::engine::cpu
