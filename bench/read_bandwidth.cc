#include "bench/read_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace paceline::bench {
namespace {

using engine::cpu::ThreadPool;

#if defined(__x86_64__)
// Sums kStreams equal sub-ranges of [p, p + n) side by side.
template <int kStreams>
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* p, size_t n) {
  const size_t len = n / kStreams / 8 * 8;
  __m256i acc[kStreams][2];
  for (int j = 0; j < kStreams; ++j) {
    acc[j][0] = acc[j][1] = _mm256_setzero_si256();
  }
  for (size_t i = 0; i < len; i += 8) {
    for (int j = 0; j < kStreams; ++j) {
      const uint64_t* q = p + j * (n / kStreams) + i;
      acc[j][0] = _mm256_add_epi64(
          acc[j][0], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
      acc[j][1] = _mm256_add_epi64(
          acc[j][1],
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 4)));
    }
  }
  __m256i t = _mm256_setzero_si256();
  for (int j = 0; j < kStreams; ++j) {
    t = _mm256_add_epi64(t, _mm256_add_epi64(acc[j][0], acc[j][1]));
  }
  uint64_t o[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), t);
  return o[0] + o[1] + o[2] + o[3];
}
#endif

uint64_t SumScalar(const uint64_t* p, size_t n) {
  uint64_t s[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  }
  uint64_t t = 0;
  for (uint64_t v : s) t += v;
  return t;
}

uint64_t Sum(const uint64_t* p, size_t n, int streams) {
#if defined(__x86_64__)
  if (engine::cpu::GetCpuFeatures().avx2) {
    return streams == 1 ? SumAvx2<1>(p, n) : SumAvx2<4>(p, n);
  }
#endif
  (void)streams;
  return SumScalar(p, n);
}

}  // namespace

const uint64_t* ReadBuffer(size_t bytes) {
  // One buffer per size, kept for the process (benchmarks ask repeatedly).
  static auto* buffers = new std::map<size_t, std::unique_ptr<uint64_t[]>>;
  std::unique_ptr<uint64_t[]>& buf = (*buffers)[bytes];
  if (buf == nullptr) {
    buf.reset(new uint64_t[bytes / 8]);
    for (size_t i = 0; i < bytes / 8; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  }
  return buf.get();
}

void ReadPass(ThreadPool& pool, size_t bytes, int streams,
              std::vector<uint64_t>& partial) {
  const int threads = pool.num_threads();
  const size_t words = bytes / 8;
  const uint64_t* data = ReadBuffer(bytes);
  partial.resize(threads);
  pool.ParallelFor(threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto [lo, hi] = ThreadPool::Partition(static_cast<int64_t>(words),
                                                  static_cast<int>(i), threads);
      partial[i] = Sum(data + lo, hi - lo, streams);
    }
  });
  benchmark::DoNotOptimize(partial.data());
}

double MeasureReadBandwidth(ThreadPool& pool, size_t bytes, int passes) {
  std::vector<uint64_t> partial;
  double best = 0;
  for (int rep = 0; rep < passes; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    ReadPass(pool, bytes, 4, partial);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  return best;
}

}  // namespace paceline::bench
