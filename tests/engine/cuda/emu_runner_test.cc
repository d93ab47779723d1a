// The CUDA emulation's block runner itself (emu/emu.cc): fibers switched at
// barriers and warp intrinsics, parked between blocks and reused, restarted
// after a deadlocked block and on another host thread. The kernel and
// engine tests rely on it; these check it on small kernels whose answers
// are known by construction.

#include <cstdint>
#include <thread>
#include <vector>

#include "cuda_runtime_api.h"
#include "emu.h"
#include "gtest/gtest.h"

namespace {

namespace emu = ::paceline::emu;

// Each block sums 1..threads through shared memory with a barrier per
// halving step (log2(threads) barriers); out[block] gets the sum plus the
// block's index.
std::vector<int64_t> BlockSums(unsigned blocks, unsigned threads) {
  std::vector<int64_t> out(blocks, -1);
  emu::Run(dim3(blocks), dim3(threads), [&] {
    __shared__ int64_t partial[1024];
    const unsigned t = threadIdx.x;
    partial[t] = t + 1;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (t < half) partial[t] += partial[t + half];
      __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0] + blockIdx.x;
  });
  return out;
}

void ExpectSums(const std::vector<int64_t>& out, unsigned threads) {
  const int64_t sum = int64_t{threads} * (threads + 1) / 2;
  for (size_t b = 0; b < out.size(); ++b) {
    EXPECT_EQ(out[b], sum + static_cast<int64_t>(b)) << "block " << b;
  }
}

TEST(EmuRunnerTest, BarriersAcrossBlocksAndShapes) {
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  // Growing and shrinking blocks: fibers parked by one launch are reused
  // by the next, new ones started as the block grows.
  for (unsigned threads : {64u, 1024u, 32u, 256u, 1024u}) {
    ExpectSums(BlockSums(7, threads), threads);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(EmuRunnerTest, WarpShuffleSumsEachWarp) {
  std::vector<int> out(8, -1);
  emu::Run(dim3(2), dim3(128), [&] {
    int v = static_cast<int>(threadIdx.x);
    for (int offset = 16; offset > 0; offset /= 2) {
      v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    if (threadIdx.x % 32 == 0) out[blockIdx.x * 4 + threadIdx.x / 32] = v;
  });
  for (int b = 0; b < 2; ++b) {
    for (int w = 0; w < 4; ++w) {
      // lanes w*32 .. w*32+31
      EXPECT_EQ(out[b * 4 + w], 32 * 32 * w + 31 * 32 / 2) << b << " " << w;
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(EmuRunnerTest, DeadlockIsReportedAndTheNextLaunchRunsClean) {
  // Half of warp 0 waits at a shuffle, everyone else at a barrier: neither
  // can be released.
  emu::Run(dim3(1), dim3(64), [&] {
    if (threadIdx.x < 16) {
      (void)__shfl_xor_sync(0xffffffffu, 1, 1);
    } else {
      __syncthreads();
    }
  });
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once, as CUDA's
  // The abandoned fibers start afresh: the same shape sums right.
  ExpectSums(BlockSums(3, 64), 64);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(EmuRunnerTest, LaunchesFromAnotherHostThread) {
  ExpectSums(BlockSums(2, 128), 128);
  std::thread other([] { ExpectSums(BlockSums(2, 128), 128); });
  other.join();
  ExpectSums(BlockSums(2, 128), 128);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
