#ifndef PACELINE_ENGINE_CUDA_KERNELS_LAUNCH_CUH_
#define PACELINE_ENGINE_CUDA_KERNELS_LAUNCH_CUH_

// The emulation's LaunchKernel (it shadows engine/cuda/kernels/launch.cuh
// on the emulated targets' include path): converts the arguments to the
// kernel's parameter types as a launch does, then runs every block on the
// host (emu.h) before returning.

#include <tuple>

#include "cuda_runtime_api.h"

namespace paceline::engine::cuda {

template <typename... Params, typename... Args>
inline void LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                         cudaStream_t /*stream*/, Args... args) {
  const std::tuple<Params...> params(static_cast<Params>(args)...);
  ::paceline::emu::Run(grid, block, [&] {
    std::tuple<Params...> copy = params;  // each thread its own parameters
    std::apply(kernel, copy);
  });
}

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_LAUNCH_CUH_
