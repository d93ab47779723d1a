#ifndef PACELINE_TESTS_ENGINE_CUDA_EMU_EMU_H_
#define PACELINE_TESTS_ENGINE_CUDA_EMU_EMU_H_

// A host emulation of the part of CUDA the backend's kernels use, so their
// logic runs in CI without a GPU (tests/engine/cuda/CMakeLists.txt builds
// the GPU kernel and engine tests against it). Each CUDA thread of a block
// is a fiber on the launching thread; blocks run one after another (see
// emu.cc). __syncthreads waits for every live thread of the block; warp
// intrinsics wait for the warp's 32 lanes and check each lane called the
// same intrinsic at the same source line with a full mask (divergent calls
// are reported); shared memory is filled with 0xff (NaN in every float
// type) before each block. What it cannot show: timing, races between
// threads (fibers switch only at barriers and intrinsics), memory ordering,
// and nvcc's floating-point code generation.
//
// Failures (divergence, deadlock, a launch with a bad shape) are printed
// and make the next cudaGetLastError() return cudaErrorLaunchFailure.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Shared memory: function statics in one section, which the emulator fills
// with 0xff before each block (one block runs at a time).
#define __shared__ static __attribute__((section("paceline_emu_shared")))

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1)
      : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

namespace paceline::emu {

// Records an error found by the emulation (printed once per message).
void Fail(const std::string& what);

// Runs `body` once per thread of every block of `grid`.
void Run(dim3 grid, dim3 block, const std::function<void()>& body);

void SyncThreads(int line);
void SyncWarp(unsigned mask, int line);
// Every lane deposits `mine`; `all` receives the 32 deposits.
void WarpExchange(uint64_t mine, unsigned mask, int line, uint64_t* all);

template <class T>
uint64_t ToBits(T v) {
  static_assert(sizeof(T) <= 8);
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T FromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
inline int Lane() { return static_cast<int>(threadIdx.x & 31); }
template <class T>
T Shfl(unsigned mask, T v, int src, int line) {
  uint64_t all[32];
  WarpExchange(ToBits(v), mask, line, all);
  return FromBits<T>(all[src & 31]);
}
template <class T>
T ShflXor(unsigned mask, T v, int m, int line) {
  uint64_t all[32];
  WarpExchange(ToBits(v), mask, line, all);
  return FromBits<T>(all[(Lane() ^ m) & 31]);
}
template <class T>
T ShflUp(unsigned mask, T v, unsigned d, int line) {
  uint64_t all[32];
  WarpExchange(ToBits(v), mask, line, all);
  const int lane = Lane();
  return FromBits<T>(lane >= static_cast<int>(d) ? all[lane - d] : all[lane]);
}
template <class T>
T ShflDown(unsigned mask, T v, unsigned d, int line) {
  uint64_t all[32];
  WarpExchange(ToBits(v), mask, line, all);
  const int lane = Lane();
  return FromBits<T>(lane + d < 32 ? all[lane + d] : all[lane]);
}
inline unsigned Ballot(unsigned mask, bool pred, int line) {
  uint64_t all[32];
  WarpExchange(pred ? 1 : 0, mask, line, all);
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= (all[i] != 0 ? 1u : 0u) << i;
  return r & mask;
}

}  // namespace paceline::emu

// Thread indices are linear in x, then y, then z; warps are 32 consecutive
// linear ids, as on the GPU.
#define __syncthreads() ::paceline::emu::SyncThreads(__LINE__)
#define __syncwarp(...) ::paceline::emu::SyncWarp(0xffffffffu, __LINE__)
#define __shfl_sync(m, v, s) ::paceline::emu::Shfl(m, v, s, __LINE__)
#define __shfl_xor_sync(m, v, s) ::paceline::emu::ShflXor(m, v, s, __LINE__)
#define __shfl_up_sync(m, v, d) ::paceline::emu::ShflUp(m, v, d, __LINE__)
#define __shfl_down_sync(m, v, d) ::paceline::emu::ShflDown(m, v, d, __LINE__)
#define __ballot_sync(m, p) ::paceline::emu::Ballot(m, p, __LINE__)

inline int __popc(unsigned x) { return __builtin_popcount(x); }
// A product rounded once, never fused with a following add (the host build
// has no FMA contraction either).
inline float __fmul_rn(float a, float b) { return a * b; }
// A quotient rounded to nearest (IEEE division, as the host's).
inline float __fdiv_rn(float a, float b) { return a / b; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __float_as_int(float x) {
  return paceline::emu::FromBits<int>(paceline::emu::ToBits(x));
}
inline float __int_as_float(int x) {
  return paceline::emu::FromBits<float>(paceline::emu::ToBits(x));
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

unsigned atomicAdd(unsigned* p, unsigned v);
int atomicAdd(int* p, int v);
float atomicAdd(float* p, float v);
unsigned long long atomicAdd(unsigned long long* p, unsigned long long v);
unsigned long long atomicMax(unsigned long long* p, unsigned long long v);

#endif  // PACELINE_TESTS_ENGINE_CUDA_EMU_EMU_H_
