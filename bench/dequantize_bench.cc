// Throughput of DequantizeRow for every type that has a dequantizer: one
// call over 2^20 elements (4 MiB of float output) per iteration.
// bytes_per_second counts output bytes; items_per_second counts elements.

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine {
namespace {

constexpr int64_t kElements = int64_t{1} << 20;

// Random bytes, except that float types get ordinary finite values (as
// weights are) and Q8_K an ordinary f32 scale, so neither nan/inf/subnormal
// branches nor denormal arithmetic skew the timing.
std::vector<uint8_t> MakeSource(const GgmlTypeTraits& traits) {
  std::vector<uint8_t> src(*GgmlRowBytes(traits.type, kElements));
  std::mt19937 rng(7);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  if (traits.type == GgmlType::kF32) {
    for (int64_t i = 0; i < kElements; ++i) {
      const float v = static_cast<float>(value(rng));
      std::memcpy(src.data() + 4 * i, &v, 4);
    }
  } else if (traits.type == GgmlType::kF64) {
    for (int64_t i = 0; i < kElements; ++i) {
      const double v = value(rng);
      std::memcpy(src.data() + 8 * i, &v, 8);
    }
  } else if (traits.type == GgmlType::kF16) {
    for (int64_t i = 0; i < kElements; ++i) {  // |x| < 2, normal
      const uint16_t h = static_cast<uint16_t>(
          (rng() & 0x8000) | (1 + rng() % 15) << 10 | (rng() & 0x3FF));
      std::memcpy(src.data() + 2 * i, &h, 2);
    }
  } else if (traits.type == GgmlType::kQ8_K) {
    const float d = 0.01f;
    for (size_t off = 0; off < src.size(); off += traits.type_size) {
      std::memcpy(src.data() + off, &d, 4);
    }
  }
  return src;
}

void BM_Dequantize(benchmark::State& state, GgmlType type) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  const std::vector<uint8_t> src = MakeSource(traits);
  std::vector<float> dst(kElements);
  for (auto _ : state) {
    const absl::Status status =
        DequantizeRow(type, src.data(), dst.data(), kElements);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kElements);
  state.SetBytesProcessed(state.iterations() * kElements *
                          static_cast<int64_t>(sizeof(float)));
  state.counters["src_bytes_per_elem"] =
      static_cast<double>(src.size()) / kElements;
}

}  // namespace
}  // namespace paceline::engine

int main(int argc, char** argv) {
  using paceline::engine::FindGgmlType;
  for (uint32_t id = 0; id < 64; ++id) {
    const paceline::engine::GgmlTypeTraits* traits = FindGgmlType(id);
    if (traits == nullptr || !traits->can_dequantize) continue;
    const std::string name = "BM_Dequantize/" + std::string(traits->name);
    benchmark::RegisterBenchmark(name.c_str(), paceline::engine::BM_Dequantize,
                                 traits->type)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
