#include "engine/cuda/cuda_device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace paceline::engine::cuda {

absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // clear the sticky "no device" error
    return std::vector<CudaDeviceInfo>{};
  }
  CUDA_RETURN_IF_ERROR(err);
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    devices.push_back(CudaDeviceInfo{
        .index = i,
        .name = prop.name,
        .compute_major = prop.major,
        .compute_minor = prop.minor,
        .multiprocessors = prop.multiProcessorCount,
        .total_memory_bytes = prop.totalGlobalMem,
    });
  }
  return devices;
}

std::string CudaLibraryVersions() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return absl::StrCat("CUDA runtime ", runtime, ", cuBLAS ", major, ".", minor,
                      ".", patch);
}

}  // namespace paceline::engine::cuda
