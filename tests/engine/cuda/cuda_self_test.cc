#include <vector>

#include "engine/cuda/cuda_device.h"
#include "engine/cuda/self_test.h"
#include "gtest/gtest.h"

namespace paceline::engine::cuda {
namespace {

class CudaSelfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = ListCudaDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    if (devices->empty()) GTEST_SKIP() << "no CUDA device on this machine";
    devices_ = *std::move(devices);
  }
  std::vector<CudaDeviceInfo> devices_;
};

TEST_F(CudaSelfTest, DevicesReportSaneProperties) {
  for (const CudaDeviceInfo& d : devices_) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.total_memory_bytes, 0u);
  }
  RecordProperty("libraries", CudaLibraryVersions());
}

TEST_F(CudaSelfTest, CublasGemmAndKernelMatchCpuReference) {
  // Odd sizes so no dimension is a multiple of a tile.
  const absl::Status odd = RunGemmSelfTest(0, 67, 45, 131, /*seed=*/1);
  EXPECT_TRUE(odd.ok()) << odd;
  const absl::Status vector = RunGemmSelfTest(0, 1, 256, 512, /*seed=*/2);
  EXPECT_TRUE(vector.ok()) << vector;
}

}  // namespace
}  // namespace paceline::engine::cuda
