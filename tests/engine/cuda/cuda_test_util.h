#ifndef PACELINE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_
#define PACELINE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_

// Helpers of the GPU tests: a fixture that skips without a device, host
// <-> device copies in the kernels' element types, random inputs (fresh
// each run: seeded from the clock, the seed printed; PACELINE_TEST_SEED
// replays one), and the atol + rtol·|ref| comparison (llm.c's
// validate_result).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <ostream>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/kernels/paged_attention.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/ggml_type_layout.h"
#include "engine/gguf/quantize.h"
#include "gtest/gtest.h"

namespace paceline::engine::cuda {

// Query tokens of one sequence for the paged attention tests: `count`
// consecutive tokens from `position_begin`.
struct AttentionSeq {
  int32_t position_begin;
  int32_t count;
};

// Sequences laid out as the paged attention kernels and the CPU reference
// take them: each sequence's block table (block b of sequence s is
// block_of(s, b), covering its last position), and per query token its
// position, sequence and table offset; the tables flattened; the tiled
// kernel's query tiles (a count, then first token and tokens of each, at
// most kAttentionTileTokens of one sequence).
struct AttentionLayout {
  std::vector<std::vector<int32_t>> tables;
  std::vector<int32_t> positions, token_table, offsets, flat, tiles = {0};
};

inline AttentionLayout LayOutAttention(
    const std::vector<AttentionSeq>& seqs, int64_t block_size,
    const std::function<int32_t(size_t, int64_t)>& block_of) {
  AttentionLayout l;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t end = seqs[s].position_begin + seqs[s].count;
    std::vector<int32_t> table;
    for (int64_t b = 0; b < (end + block_size - 1) / block_size; ++b) {
      table.push_back(block_of(s, b));
    }
    const int32_t offset = static_cast<int32_t>(l.flat.size());
    l.flat.insert(l.flat.end(), table.begin(), table.end());
    for (int32_t i = 0; i < seqs[s].count; i += kAttentionTileTokens) {
      l.tiles.push_back(static_cast<int32_t>(l.positions.size()) + i);
      l.tiles.push_back(std::min(kAttentionTileTokens, seqs[s].count - i));
      ++l.tiles[0];
    }
    for (int32_t i = 0; i < seqs[s].count; ++i) {
      l.positions.push_back(seqs[s].position_begin + i);
      l.token_table.push_back(static_cast<int32_t>(s));
      l.offsets.push_back(offset);
    }
    l.tables.push_back(std::move(table));
  }
  return l;
}

}  // namespace paceline::engine::cuda

namespace paceline::engine {
// Test names and messages print the type's name.
inline void PrintTo(GgmlType t, std::ostream* os) { *os << GgmlTypeName(t); }
}  // namespace paceline::engine

namespace paceline::engine::cuda::testing {

// Whether these tests run on the host emulation of CUDA
// (cuda_kernels_emu_test, emu/emu.h), where a kernel runs thousands of
// times slower: the largest cases shrink there.
#ifdef PACELINE_CUDA_EMULATION
inline constexpr bool kEmulated = true;
#else
inline constexpr bool kEmulated = false;
#endif

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = ListCudaDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    if (devices->empty()) GTEST_SKIP() << "no CUDA device on this machine";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    // Fresh inputs every run; PACELINE_TEST_SEED=N replays a failing one.
    const char* fixed = std::getenv("PACELINE_TEST_SEED");
    seed_ =
        fixed != nullptr
            ? static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10))
            : static_cast<uint32_t>(
                  std::chrono::steady_clock::now().time_since_epoch().count());
    rng_.seed(seed_);
    std::cout << "seed " << seed_ << " (PACELINE_TEST_SEED to replay)\n";
    RecordProperty("seed", static_cast<int>(seed_ & 0x7fffffff));
  }

  std::vector<float> Random(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng_);
    return v;
  }

  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

// A KV type both engines store (F32, F16 or Q8_0), as the CPU engine's
// cache type (cpu::KvCacheShape::dtype).
inline GgmlType CpuKvType(GgmlType k) {
  if (k == GgmlType::kF32 || k == GgmlType::kF16 || k == GgmlType::kQ8_0) {
    return k;
  }
  ADD_FAILURE() << "the CPU engine has no " << GgmlTypeName(k) << " cache";
  return GgmlType::kF32;
}

// The value of x stored as `d` and read back.
inline float RoundTo(GgmlType d, float x) {
  switch (d) {
    case GgmlType::kF32:
      return x;
    case GgmlType::kF16:
      return HalfToFloat(FloatToHalf(x));
    case GgmlType::kBF16:
      return BFloat16ToFloat(FloatToBFloat16(x));
    default:
      ADD_FAILURE() << GgmlTypeName(d) << " is not a device dtype";
      return x;
  }
}

inline std::vector<float> RoundAll(GgmlType d, std::vector<float> v) {
  for (float& x : v) x = RoundTo(d, x);
  return v;
}

inline std::vector<uint8_t> Encode(GgmlType d, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * GgmlBlockBytes(d));
  if (d == GgmlType::kF32) {
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }
  auto* out = reinterpret_cast<uint16_t*>(bytes.data());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = d == GgmlType::kF16 ? FloatToHalf(v[i]) : FloatToBFloat16(v[i]);
  }
  return bytes;
}

inline std::vector<float> Decode(GgmlType d,
                                 const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / GgmlBlockBytes(d));
  if (d == GgmlType::kF32) {
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  const auto* in = reinterpret_cast<const uint16_t*>(bytes.data());
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = d == GgmlType::kF16 ? HalfToFloat(in[i]) : BFloat16ToFloat(in[i]);
  }
  return v;
}

inline absl::Status UploadBytes(const void* data, size_t bytes,
                                DeviceBuffer* out) {
  absl::Status s = out->Allocate(bytes == 0 ? 1 : bytes);
  if (!s.ok()) return s;
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(out->get(), data, bytes, cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

template <typename T>
absl::Status Upload(const std::vector<T>& v, DeviceBuffer* out) {
  return UploadBytes(v.data(), v.size() * sizeof(T), out);
}

// Allocates `bytes` filled with 0xff (NaN in every float type).
inline absl::Status Poisoned(size_t bytes, DeviceBuffer* out) {
  absl::Status s = out->Allocate(bytes);
  if (!s.ok()) return s;
  CUDA_RETURN_IF_ERROR(cudaMemset(out->get(), 0xff, bytes));
  return absl::OkStatus();
}

inline std::vector<uint8_t> DownloadBytes(const DeviceBuffer& b, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  EXPECT_EQ(cudaMemcpy(v.data(), b.get(), bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  return v;
}

inline std::vector<float> Download(GgmlType d, const DeviceBuffer& b,
                                   size_t n) {
  return Decode(d, DownloadBytes(b, n * GgmlBlockBytes(d)));
}

// Tolerances by element type of the compared output.
inline double DefaultRtol(GgmlType d) {
  return d == GgmlType::kF32 ? 1e-5 : (d == GgmlType::kF16 ? 2e-3 : 1e-2);
}

// Every element within atol + rtol·|ref|; reports the worst one.
inline void ExpectClose(const std::vector<float>& got,
                        const std::vector<float>& ref, double atol, double rtol,
                        const char* what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double excess = std::fabs(static_cast<double>(got[i]) - ref[i]) -
                          (atol + rtol * std::fabs(ref[i]));
    if (!(excess <= worst)) {  // NaN counts
      worst = std::isnan(excess) ? INFINITY : excess;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, 0.0) << what << ": element " << worst_i << " got "
                        << got[worst_i] << ", want " << ref[worst_i]
                        << " (atol " << atol << ", rtol " << rtol << ")";
}

}  // namespace paceline::engine::cuda::testing

#endif  // PACELINE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_
