// CPU matmul kernels against the machine's memory roofline, in one run.
//
// 1. BM_ReadBandwidth: sum of a 1 GiB buffer with 1 and 2 threads, each
//    thread walking its half as 1 stream (ANCHORS.md's kernel) or as 4
//    side-by-side streams (faster here): the read bandwidth decode is
//    bounded by. Runs first; later benchmarks report their weight traffic
//    as a fraction of the faster of the two (bw_frac).
// 2. BM_MatMul: MatMul over weights in each type, for n_tokens = 1 (GEMV:
//    decode of one sequence), 8/32/64 (batched decode: one weight read per
//    step) and 512 (prefill); MXFP4 against Q4_0 at gpt-oss's expert
//    shapes (2880 and 5760 x 2880). Every iteration uses the next of several
//    copies of the matrix, 1 GiB in all, so weights come from DRAM as they
//    do in decode, not from the cache of the previous iteration.
//
// Counters: weight_GB/s = weight bytes / time (GEMV's roofline metric),
// bw_frac = that / the read bandwidth with the same thread count (for
// GEMV measured again right before it, read_GB/s, since the machine's
// load drifts; otherwise the faster BM_ReadBandwidth kernel),
// tok/s = n_tokens / time, GFLOP/s = 2 * rows * cols * n_tokens / time.
//
// Arguments: rows, cols, n_tokens, threads, isa (0 scalar, 1 avx2,
// 2 avx512; capped to what the CPU runs).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bench/read_bandwidth.h"
#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace paceline::engine::cpu {
namespace {

constexpr size_t kPoolBytes = size_t{1} << 30;

// Read bandwidth (bytes/s) measured by BM_ReadBandwidth, per thread count.
double g_read_bw[3] = {0, 0, 0};

// The read bandwidth (bytes/s) measured right next to a GEMV, so that
// both see the same share of a busy machine.
double LocalReadBandwidth(ThreadPool& pool) {
  return bench::MeasureReadBandwidth(pool, kPoolBytes, 2);
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int streams = static_cast<int>(state.range(1));
  ThreadPool pool(threads);
  std::vector<uint64_t> partial;
  bench::ReadBuffer(kPoolBytes);
  for (auto _ : state) bench::ReadPass(pool, kPoolBytes, streams, partial);
  state.counters["GB/s"] = benchmark::Counter(
      kPoolBytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Random but ordinary weights: finite normal floats, scales ~1e-2, so no
// subnormal or nan arithmetic skews the timing. One matrix is generated,
// then copied.
void FillMatrix(GgmlType type, uint8_t* p, size_t bytes, size_t row_bytes) {
  uint64_t state = 0x243F6A8885A308D3ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = next();
    std::memcpy(p + i, &v, 8);
  }
  const size_t rows = bytes / row_bytes;
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* row = p + r * row_bytes;
    switch (type) {
      case GgmlType::kF32:
        for (size_t i = 0; i + 4 <= row_bytes; i += 4) {
          const float f = static_cast<float>(static_cast<int32_t>(next())) *
                          0x1p-31f;
          std::memcpy(row + i, &f, 4);
        }
        break;
      case GgmlType::kF16:
      case GgmlType::kBF16:
        for (size_t i = 0; i + 2 <= row_bytes; i += 2) {
          uint16_t h;
          std::memcpy(&h, row + i, 2);
          // Exponent field forced into a normal, modest range.
          h = type == GgmlType::kF16
                  ? static_cast<uint16_t>((h & 0x83FF) | 0x3000)
                  : static_cast<uint16_t>((h & 0x807F) | 0x3C00);
          std::memcpy(row + i, &h, 2);
        }
        break;
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_0: {
        const size_t block = type == GgmlType::kQ8_0 ? 34 : 18;
        const uint16_t d = 0x2000;  // 2^-7
        for (size_t i = 0; i + block <= row_bytes; i += block) {
          std::memcpy(row + i, &d, 2);
        }
        break;
      }
      case GgmlType::kQ2_K:
      case GgmlType::kQ3_K:
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
      case GgmlType::kQ6_K: {
        // Every super-block's f16 d (and dmin) set to 2^-7: {bytes, at}.
        struct Layout {
          size_t block, d_at, dmin_at;
        };
        const Layout l = type == GgmlType::kQ2_K   ? Layout{84, 80, 82}
                         : type == GgmlType::kQ3_K ? Layout{110, 108, 108}
                         : type == GgmlType::kQ4_K ? Layout{144, 0, 2}
                         : type == GgmlType::kQ5_K ? Layout{176, 0, 2}
                                                   : Layout{210, 208, 208};
        const uint16_t d = 0x2000;
        for (size_t i = 0; i + l.block <= row_bytes; i += l.block) {
          std::memcpy(row + i + l.d_at, &d, 2);
          std::memcpy(row + i + l.dmin_at, &d, 2);
        }
        break;
      }
      case GgmlType::kMXFP4: {
        // Every block's E8M0 byte 120: a 2^-8 scale on the doubled levels.
        for (size_t i = 0; i + 17 <= row_bytes; i += 17) row[i] = 120;
        break;
      }
      default:
        break;
    }
  }
}

struct Matrices {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0, cols = 0;
  std::unique_ptr<uint8_t[]> bytes;  // (copies, rows, row_bytes)
  size_t matrix_bytes = 0;
  int copies = 0;
  std::vector<PackedMatrix> panels;  // (copies) when packed
};

// Google Benchmark calls a benchmark several times while it sizes the
// iteration count; the last set of matrices is kept for the next call.
const Matrices& GetMatrices(GgmlType type, int64_t rows, int64_t cols,
                            bool one_copy, bool panels) {
  static Matrices m;
  const size_t row_bytes = *GgmlRowBytes(type, cols);
  const size_t matrix_bytes = row_bytes * rows;
  const int copies =
      one_copy ? 1
               : static_cast<int>(std::max<size_t>(
                     2, (kPoolBytes + matrix_bytes - 1) / matrix_bytes));
  if (m.type == type && m.rows == rows && m.cols == cols &&
      m.copies == copies && m.bytes != nullptr &&
      m.panels.empty() == !panels) {
    return m;
  }
  m.bytes.reset();
  m.panels.clear();
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.matrix_bytes = matrix_bytes;
  m.copies = copies;
  m.bytes.reset(new uint8_t[matrix_bytes * copies]);
  FillMatrix(type, m.bytes.get(), matrix_bytes, row_bytes);
  for (int c = 1; c < copies; ++c) {
    std::memcpy(m.bytes.get() + c * matrix_bytes, m.bytes.get(), matrix_bytes);
  }
  if (panels) {
    for (int c = 0; c < copies; ++c) {
      m.panels.push_back(*PackForMatMul(
          {type, rows, cols, m.bytes.get() + c * matrix_bytes, row_bytes}));
    }
  }
  return m;
}

void BM_MatMul(benchmark::State& state, GgmlType type, bool panels) {
  const int64_t rows = state.range(0);
  const int64_t cols = state.range(1);
  const int64_t n_tokens = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const IsaLevel isa = SetIsaLevelCap(static_cast<IsaLevel>(state.range(4)));
  if (static_cast<int>(isa) != state.range(4)) {
    state.SkipWithError("ISA level not available on this CPU");
    return;
  }
  const size_t row_bytes = *GgmlRowBytes(type, cols);
  // Prefill re-reads each matrix many times per call anyway: one copy.
  const Matrices& m = GetMatrices(type, rows, cols, n_tokens >= 256, panels);
  std::vector<float> x(n_tokens * cols);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  }
  std::vector<float> y(n_tokens * rows);
  ThreadPool pool(threads);
  MatMulScratch scratch;

  // GEMV is judged against the read bandwidth measured just before it.
  const double local_bw = n_tokens == 1 ? LocalReadBandwidth(pool) : 0;

  int copy = 0;
  for (auto _ : state) {
    const WeightView w =
        panels ? m.panels[copy].view()
               : WeightView{type, rows, cols,
                            m.bytes.get() + copy * m.matrix_bytes, row_bytes};
    if (!MatMul(w, x.data(), n_tokens, y.data(), pool, scratch).ok()) {
      state.SkipWithError("MatMul failed");
      break;
    }
    benchmark::DoNotOptimize(y.data());
    if (++copy == m.copies) copy = 0;
  }
  SetIsaLevelCap(IsaLevel::kAvx512);

  using benchmark::Counter;
  state.counters["weight_GB/s"] = Counter(
      m.matrix_bytes / 1e9, Counter::kIsIterationInvariantRate);
  state.counters["tok/s"] =
      Counter(static_cast<double>(n_tokens), Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = Counter(2e-9 * rows * cols * n_tokens,
                                      Counter::kIsIterationInvariantRate);
  // bw_frac = (weight bytes/s) / (read bytes/s): an iteration-invariant
  // rate divided by the bandwidth. GEMV uses the bandwidth measured right
  // before it; batched runs the BM_ReadBandwidth figure.
  const double bw =
      local_bw > 0 ? local_bw : (threads <= 2 ? g_read_bw[threads] : 0);
  if (bw > 0) {
    state.counters["bw_frac"] =
        Counter(m.matrix_bytes / bw, Counter::kIsIterationInvariantRate);
  }
  if (local_bw > 0) state.counters["read_GB/s"] = local_bw / 1e9;
}

// PackForMatMul of one 4096 x 4096 matrix (what CpuEngine does once per
// matrix at creation): GB/s of the row-major bytes packed.
void BM_Pack(benchmark::State& state, GgmlType type) {
  const int64_t rows = 4096, cols = 4096;
  const Matrices& m = GetMatrices(type, rows, cols, /*one_copy=*/true, false);
  const WeightView w{type, rows, cols, m.bytes.get(),
                     *GgmlRowBytes(type, cols)};
  for (auto _ : state) {
    absl::StatusOr<PackedMatrix> packed = PackForMatMul(w);
    if (!packed.ok()) {
      state.SkipWithError("PackForMatMul failed");
      break;
    }
    benchmark::DoNotOptimize(packed->view().data);
  }
  state.counters["GB/s"] = benchmark::Counter(
      m.matrix_bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace
}  // namespace paceline::engine::cpu

namespace {

using paceline::engine::GgmlType;
using paceline::engine::cpu::g_read_bw;

// Records the bandwidth of each BM_ReadBandwidth run for bw_frac.
class BandwidthRecorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.benchmark_name().rfind("BM_ReadBandwidth", 0) == 0 &&
          run.run_type == Run::RT_Iteration) {
        const auto it = run.counters.find("GB/s");
        const int threads = run.benchmark_name().find("/thr:2") !=
                                    std::string::npos
                                ? 2
                                : 1;
        if (it != run.counters.end()) {
          g_read_bw[threads] =
              std::max(g_read_bw[threads], it->second.value * 1e9);
        }
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

void Register() {
  benchmark::RegisterBenchmark("BM_ReadBandwidth",
                               paceline::engine::cpu::BM_ReadBandwidth)
      ->ArgNames({"thr", "streams"})
      ->Args({1, 1})
      ->Args({1, 4})
      ->Args({2, 1})
      ->Args({2, 4})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.5);
  struct TypeName {
    GgmlType type;
    const char* name;
    bool panels;  // packed by PackForMatMul, as the CPU engine does
    bool kquant = false;  // a K-quant: a shorter list of shapes
    bool moe = false;     // gpt-oss's expert shapes (MXFP4 and Q4_0)
  };
  const TypeName types[] = {{GgmlType::kF32, "F32", false},
                            {GgmlType::kF16, "F16", false},
                            {GgmlType::kBF16, "BF16", false},
                            {GgmlType::kQ8_0, "Q8_0", false},
                            {GgmlType::kQ8_0, "Q8_0_panels", true},
                            {GgmlType::kQ4_0, "Q4_0", false, false, true},
                            {GgmlType::kMXFP4, "MXFP4", false, false, true},
                            {GgmlType::kQ2_K, "Q2_K", false, true},
                            {GgmlType::kQ3_K, "Q3_K", false, true},
                            {GgmlType::kQ4_K, "Q4_K", false, true},
                            {GgmlType::kQ4_K, "Q4_K_panels", true, true},
                            {GgmlType::kQ5_K, "Q5_K", false, true},
                            {GgmlType::kQ6_K, "Q6_K", false, true},
                            {GgmlType::kQ6_K, "Q6_K_panels", true, true}};
  for (const TypeName& t : types) {
    const bool packs = (!t.kquant || t.type == GgmlType::kQ4_K ||
                        t.type == GgmlType::kQ6_K) &&
                       t.type != GgmlType::kMXFP4;
    if (t.panels || !packs) continue;
    benchmark::RegisterBenchmark(
        (std::string("BM_Pack/") + t.name).c_str(),
        [type = t.type](benchmark::State& s) {
          paceline::engine::cpu::BM_Pack(s, type);
        })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const TypeName& t : types) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("BM_MatMul/") + t.name).c_str(),
        [type = t.type, panels = t.panels](benchmark::State& s) {
          paceline::engine::cpu::BM_MatMul(s, type, panels);
        });
    b->ArgNames({"rows", "cols", "tok", "thr", "isa"})
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.3);
    if (t.kquant) {
      // GEMV at decode shapes (the 110M's, with its 32000 x 768 output),
      // 1 thread, avx512 and avx2 (panels: avx512 only, as CpuEngine
      // packs them); 2 threads at avx512; a 64-token GEMM.
      for (int isa : {2, 1}) {
        if (t.panels && isa != 2) continue;
        for (const auto& [rows, cols] :
             {std::pair{768, 768}, {2048, 768}, {768, 2048}, {32000, 768},
              {4096, 4096}}) {
          b->Args({rows, cols, 1, 1, isa});
        }
        b->Args({4096, 4096, 64, 1, isa});
      }
      for (const auto& [rows, cols] : {std::pair{768, 768}, {2048, 768},
                                       {768, 2048}, {32000, 768},
                                       {4096, 4096}}) {
        b->Args({rows, cols, 1, 2, 2});
      }
      continue;
    }
    if (t.moe) {
      // gpt-oss's experts (d_model 2880, expert width 2880; gate and up
      // fused: 5760 x 2880), GEMV and the few tokens an expert sees.
      for (int isa : {2, 1}) {
        for (int thr : {1, 2}) {
          b->Args({2880, 2880, 1, thr, isa});
          b->Args({5760, 2880, 1, thr, isa});
        }
        for (int tok : {4, 16}) b->Args({5760, 2880, tok, 2, isa});
      }
      b->Args({5760, 2880, 1, 1, 0});
      if (t.type == GgmlType::kMXFP4) {
        // The 4096 x 4096 GEMV beside the other types'.
        for (int thr : {1, 2}) b->Args({4096, 4096, 1, thr, 2});
        continue;
      }
    }
    // GEMV: the 110M FFN shapes (up: 2048 x 768, down: 768 x 2048) and a
    // 7B-class 4096 x 4096, 1 and 2 threads; scalar and avx2 for contrast.
    for (int isa : {2, 1}) {
      for (int thr : {1, 2}) {
        b->Args({768, 768, 1, thr, isa});
        b->Args({2048, 768, 1, thr, isa});
        b->Args({768, 2048, 1, thr, isa});
        b->Args({4096, 4096, 1, thr, isa});
      }
    }
    b->Args({4096, 4096, 1, 2, 0});
    // Batched decode and prefill, 2 threads (and 1, steadier on a shared
    // machine).
    for (int isa : {2, 1}) {
      for (int thr : {1, 2}) {
        for (int tok : {8, 32, 64, 512}) b->Args({4096, 4096, tok, thr, isa});
      }
    }
    for (int tok : {8, 32, 64}) b->Args({2048, 768, tok, 2, 2});
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Register();
  BandwidthRecorder reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
