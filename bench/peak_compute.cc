#include "bench/peak_compute.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <type_traits>

// GCC 12's AVX-512 reduction intrinsics read an undefined vector on
// purpose (_mm512_undefined_ps); the kernels silence the same warning.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace paceline::bench {
namespace {

using engine::cpu::IsaLevel;
using engine::cpu::ThreadPool;

constexpr int kChains = 12;

// The chains must live in registers: a loop over an array of them that the
// compiler does not unroll keeps them in memory, and then the probe
// measures a load and a store per instruction, not the instruction (GCC 12
// at -O2 left the AVX-512 FMA probe that way: 108 GFLOP/s instead of ~4x
// that).
#define PACELINE_UNROLL_CHAINS _Pragma("GCC unroll 12")

// Keeps the compiler from hoisting a loop-invariant operand (or folding the
// chains): it must assume `v` changed.
template <typename T>
inline void Opaque(T& v) {
  if constexpr (std::is_integral_v<T>) {
    asm volatile("" : "+r"(v));
  } else {
    asm volatile("" : "+x"(v));
  }
}

// Each probe runs `iterations` of kChains instructions on one thread and
// returns a value the caller keeps, so nothing is dead code.

__attribute__((target("avx512f"))) float FmaAvx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + c * 1e-3f);
  __m512 m = _mm512_set1_ps(0.999999f);
  __m512 a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    PACELINE_UNROLL_CHAINS
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) float FmaAvx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + c * 1e-3f);
  __m256 m = _mm256_set1_ps(0.999999f);
  __m256 a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    PACELINE_UNROLL_CHAINS
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float f : lanes) total += f;
  return total;
}

float FmaScalar(int64_t iterations) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = 1.0f + c * 1e-3f;
  float m = 0.999999f, a = 1e-7f;
  for (int64_t i = 0; i < iterations; ++i) {
    PACELINE_UNROLL_CHAINS
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * m + a;
    Opaque(acc[0]);
  }
  float total = 0;
  for (float f : acc) total += f;
  return total;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) float Int8Vnni(
    int64_t iterations) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  __m512i u = _mm512_set1_epi8(3);
  __m512i s = _mm512_set1_epi8(-5);
  for (int64_t i = 0; i < iterations; ++i) {
    PACELINE_UNROLL_CHAINS
    for (int c = 0; c < kChains; ++c)
      acc[c] = _mm512_dpbusd_epi32(acc[c], u, s);
  }
  __m512i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  return static_cast<float>(_mm512_reduce_add_epi32(sum));
}

__attribute__((target("avx2"))) float Int8Avx2(int64_t iterations) {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  __m256i u = _mm256_set1_epi8(3);
  __m256i s = _mm256_set1_epi8(-5);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iterations; ++i) {
    Opaque(u);  // the products must be recomputed every iteration
    PACELINE_UNROLL_CHAINS
    for (int c = 0; c < kChains; ++c) {
      const __m256i pairs = _mm256_maddubs_epi16(u, s);
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(pairs, ones));
    }
  }
  __m256i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_epi32(sum, acc[c]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  int64_t total = 0;
  for (int32_t v : lanes) total += v;
  return static_cast<float>(total);
}

float Int8Scalar(int64_t iterations) {
  int32_t acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = c;
  uint8_t u = 3;
  int8_t s = -5;
  for (int64_t i = 0; i < iterations; ++i) {
    PACELINE_UNROLL_CHAINS
    for (int c = 0; c < kChains; ++c) acc[c] += u * s;
    Opaque(acc[0]);
  }
  int64_t total = 0;
  for (int32_t v : acc) total += v;
  return static_cast<float>(total);
}

volatile float g_sink;

// Runs `probe` on every thread of `pool` for about `seconds` / 4 a pass,
// best of 4 passes; ops = iterations x kChains x ops_per_instruction.
double Measure(ThreadPool& pool, float (*probe)(int64_t),
               double ops_per_instruction, double seconds) {
  using Clock = std::chrono::steady_clock;
  const int threads = pool.num_threads();
  const auto pass = [&](int64_t iterations) {
    const Clock::time_point start = Clock::now();
    pool.ParallelFor(threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) g_sink = probe(iterations);
    });
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  int64_t iterations = 1 << 16;
  while (pass(iterations) < seconds / 16) iterations *= 2;
  iterations *= 4;
  double best = 0;
  for (int k = 0; k < 4; ++k) {
    const double s = pass(iterations);
    const double ops = static_cast<double>(iterations) * kChains *
                       ops_per_instruction * threads;
    best = std::max(best, ops / s);
  }
  return best;
}

}  // namespace

Peak MeasureFmaPeak(ThreadPool& pool, double seconds) {
  switch (engine::cpu::EffectiveIsaLevel()) {
    case IsaLevel::kAvx512:
      return {"vfmadd231ps zmm", Measure(pool, FmaAvx512, 32, seconds)};
    case IsaLevel::kAvx2:
      return {"vfmadd231ps ymm", Measure(pool, FmaAvx2, 16, seconds)};
    case IsaLevel::kScalar:
      break;
  }
  return {"scalar float multiply-add", Measure(pool, FmaScalar, 2, seconds)};
}

Peak MeasureInt8Peak(ThreadPool& pool, double seconds) {
  if (engine::cpu::EffectiveAvx512Vnni()) {
    return {"vpdpbusd zmm", Measure(pool, Int8Vnni, 128, seconds)};
  }
  if (engine::cpu::EffectiveIsaLevel() >= IsaLevel::kAvx2) {
    return {"vpmaddubsw+vpmaddwd+vpaddd ymm",
            Measure(pool, Int8Avx2, 64, seconds)};
  }
  return {"scalar int8 multiply-add", Measure(pool, Int8Scalar, 2, seconds)};
}

}  // namespace paceline::bench
