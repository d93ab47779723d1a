#ifndef PACELINE_ENGINE_CUDA_CUDA_DEVICE_H_
#define PACELINE_ENGINE_CUDA_CUDA_DEVICE_H_

// Which CUDA devices this process can use.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace paceline::engine::cuda {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  uint64_t total_memory_bytes = 0;
};

// The usable devices. A machine without a GPU or without a driver has none:
// that is an empty list, not an error. Other runtime failures are errors.
absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices();

// The CUDA runtime and cuBLAS versions this binary was linked against, e.g.
// "CUDA runtime 13000, cuBLAS 130001".
std::string CudaLibraryVersions();

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_CUDA_DEVICE_H_
