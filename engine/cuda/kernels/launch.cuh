#ifndef PACELINE_ENGINE_CUDA_KERNELS_LAUNCH_CUH_
#define PACELINE_ENGINE_CUDA_KERNELS_LAUNCH_CUH_

// Every kernel launch of the backend goes through LaunchKernel, so the
// launch syntax lives in this one place: tests/engine/cuda/emu/ puts its own
// launch.cuh first on the include path and runs the same kernels on the
// host. Errors are CUDA's usual sticky ones: the launcher returns
// cudaGetLastError() after its launches.

#include <cuda_runtime_api.h>

namespace paceline::engine::cuda {

template <typename... Params, typename... Args>
inline void LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                         cudaStream_t stream, Args... args) {
  kernel<<<grid, block, 0, stream>>>(args...);
}

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_LAUNCH_CUH_
