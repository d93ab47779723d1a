// The Gated DeltaNet recurrence (delta_net.h): the causal convolution, a
// thread per (slice, channel) with the channel's window in registers; the
// delta rule, a block per (value head, slice), one thread per output
// feature holding its column of the state matrix (S(i, ·), consecutive
// across threads in the stored transpose) in registers for head sizes 64
// and 128, in device memory for others; q and k staged in shared memory
// per token.
#include "engine/cuda/kernels/delta_net.h"
#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"

namespace paceline::engine::cuda {
namespace {

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }

// ggml's softplus: x itself above 20, where log1p(exp(x)) rounds to it.
__device__ __forceinline__ float Softplus(float x) {
  return x > 20.0f ? x : log1pf(expf(x));
}

__global__ void DeltaNetConvKernel(DeltaNetConvParams p) {
  const int64_t ch =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= p.conv_dim) return;
  const int32_t* slice = p.slices + blockIdx.y * kDeltaNetSliceInts;
  const int64_t begin = slice[0];
  const int64_t count = slice[1];
  const bool fresh = slice[3] == 0;
  float* state = p.states + slice[2] * p.slot_stride;
  const int64_t taps = p.kernel;
  const float* w = p.w + ch * taps;
  float
      window[kMaxDeltaNetConvKernel - 1];  // the last K-1 inputs, oldest first
  for (int64_t j = 0; j + 1 < taps; ++j) {
    window[j] = fresh ? 0.0f : state[j * p.conv_dim + ch];
  }
  for (int64_t t = 0; t < count; ++t) {
    const float x = p.x[(begin + t) * p.x_stride + ch];
    float acc = 0.0f;
    for (int64_t j = 0; j + 1 < taps; ++j) acc += window[j] * w[j];
    acc += x * w[taps - 1];
    p.out[(begin + t) * p.conv_dim + ch] = Silu(acc);
    for (int64_t j = 0; j + 2 < taps; ++j) window[j] = window[j + 1];
    window[taps - 2] = x;
  }
  for (int64_t j = 0; j + 1 < taps; ++j) {
    state[j * p.conv_dim + ch] = window[j];
  }
}

// A thread's column of a head's state (output feature i: S(i, j) for
// every j): in registers for the head sizes the rule is instantiated for
// (loaded once per slice, stored back after its last token), else read and
// written in device memory at every token.
template <int kD>
struct Column {
  __device__ Column(float* /*col*/, int64_t /*d*/) {}
  __device__ __forceinline__ float& operator[](int64_t j) { return s[j]; }
  float s[kD];
};
template <>
struct Column<0> {
  __device__ Column(float* c, int64_t stride) : col(c), d(stride) {}
  __device__ __forceinline__ float& operator[](int64_t j) { return col[j * d]; }
  float* col;  // S(i, 0); S(i, j) at col[j * d]
  int64_t d;
};

// kD: the head size when it is a compile-time one (then every thread of
// the block owns a column), 0 for any.
template <typename T, int kD>
__global__ void DeltaNetRuleKernel(DeltaNetRuleParams p) {
  __shared__ float q[kMaxDeltaNetHeadDim];  // (d) this token's, normalised
  __shared__ float k[kMaxDeltaNetHeadDim];  // (d)
  __shared__ double scratch[32];
  const int64_t v = blockIdx.x;
  const int32_t* slice = p.slices + blockIdx.y * kDeltaNetSliceInts;
  const int64_t begin = slice[0];
  const int64_t count = slice[1];
  const bool fresh = slice[3] == 0;
  const int64_t d = kD > 0 ? kD : p.head_dim;
  const int64_t i = threadIdx.x;  // output feature
  const bool active = kD > 0 || i < d;
  float* col = p.states + slice[2] * p.slot_stride + v * d * d + i;
  Column<kD> state(col, d);
  if (active && (kD > 0 || fresh)) {
#pragma unroll
    for (int64_t j = 0; j < d; ++j) state[j] = fresh ? 0.0f : col[j * d];
  }
  const int64_t r = p.v_heads / p.k_heads;
  const int64_t kh = p.grouped ? v / r : v % p.k_heads;
  const int64_t b_col = p.fused_ba ? (v / r) * 2 * r + v % r : v;
  const int64_t a_col = p.fused_ba ? b_col + r : p.v_heads + v;
  const int64_t conv_dim = (2 * p.k_heads + p.v_heads) * d;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(d));
  for (int64_t t = begin; t < begin + count; ++t) {
    const float* row = p.conv + t * conv_dim;
    const float qx = active ? row[kh * d + i] : 0.0f;
    const float kx = active ? row[(p.k_heads + kh) * d + i] : 0.0f;
    const double qq = BlockSum(static_cast<double>(qx) * qx, scratch);
    const double kk = BlockSum(static_cast<double>(kx) * kx, scratch);
    if (active) {
      q[i] = qx * (q_scale / fmaxf(sqrtf(static_cast<float>(qq)), p.eps));
      k[i] = kx * (1.0f / fmaxf(sqrtf(static_cast<float>(kk)), p.eps));
    }
    __syncthreads();
    const float* in = p.in + t * p.in_stride;
    const float beta = 1.0f / (1.0f + expf(-in[p.ba_col + b_col]));
    const float decay =
        expf(Softplus(in[p.ba_col + a_col] + p.dt_bias[v]) * p.ssm_a[v]);
    float o = 0.0f;
    if (active) {
      float sk = 0.0f;
#pragma unroll
      for (int64_t j = 0; j < d; ++j) sk += state[j] * k[j];
      const float delta =
          beta * (row[(2 * p.k_heads + v) * d + i] - decay * sk);
#pragma unroll
      for (int64_t j = 0; j < d; ++j) {
        const float sj = decay * state[j] + delta * k[j];
        state[j] = sj;
        o += sj * q[j];
      }
    }
    const double oo = BlockSum(static_cast<double>(o) * o, scratch);
    if (active) {
      const float rms =
          1.0f / sqrtf(static_cast<float>(oo) / static_cast<float>(d) + p.eps);
      const float z = in[p.z_col + v * d + i];
      static_cast<T*>(p.out)[t * p.v_heads * d + v * d + i] =
          FromFloat<T>(o * rms * p.norm[i] * Silu(z));
    }
    __syncthreads();  // q and k are rewritten by the next token
  }
  if (kD > 0) {
#pragma unroll
    for (int64_t j = 0; j < d; ++j) col[j * d] = state[j];
  }
}

}  // namespace

cudaError_t LaunchDeltaNetConv(const DeltaNetConvParams& p,
                               cudaStream_t stream) {
  if (p.kernel < 2 || p.kernel > kMaxDeltaNetConvKernel || p.n_slices > 65535) {
    return cudaErrorInvalidValue;
  }
  if (p.n_slices <= 0 || p.conv_dim <= 0) return cudaSuccess;
  constexpr int kThreads = 128;
  const dim3 grid(static_cast<unsigned>((p.conv_dim + kThreads - 1) / kThreads),
                  static_cast<unsigned>(p.n_slices));
  LaunchKernel(DeltaNetConvKernel, grid, kThreads, stream, p);
  return cudaGetLastError();
}

cudaError_t LaunchDeltaNetRule(GgmlType dtype, const DeltaNetRuleParams& p,
                               cudaStream_t stream) {
  if (p.head_dim < 1 || p.head_dim > kMaxDeltaNetHeadDim ||
      p.n_slices > 65535 || p.k_heads < 1 || p.v_heads % p.k_heads != 0) {
    return cudaErrorInvalidValue;
  }
  if (p.n_slices <= 0) return cudaSuccess;
  const int threads = static_cast<int>((p.head_dim + 31) / 32 * 32);
  const dim3 grid(static_cast<unsigned>(p.v_heads),
                  static_cast<unsigned>(p.n_slices));
  // The state in registers for the models' head sizes (Qwen3.5 and
  // Qwen3-Next: 128), in device memory otherwise.
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      if (p.head_dim == 64) {
        LaunchKernel(DeltaNetRuleKernel<T, 64>, grid, threads, stream, p);
      } else if (p.head_dim == 128) {
        LaunchKernel(DeltaNetRuleKernel<T, 128>, grid, threads, stream, p);
      } else {
        LaunchKernel(DeltaNetRuleKernel<T, 0>, grid, threads, stream, p);
      });
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
