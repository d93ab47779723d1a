#ifndef PACELINE_ENGINE_CUDA_CUDA_STATUS_H_
#define PACELINE_ENGINE_CUDA_CUDA_STATUS_H_

// CUDA runtime and cuBLAS results as absl::Status, with the call site.
// Every CUDA or cuBLAS call in the backend goes through these macros; none
// aborts the process.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paceline::engine::cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* expr,
                               const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", expr,
                                          " failed: ", cudaGetErrorName(err),
                                          " (", cudaGetErrorString(err), ")"));
}

inline absl::Status CublasStatus(cublasStatus_t st, const char* expr,
                                 const char* file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      file, ":", line, ": ", expr, " failed: ", cublasGetStatusName(st), " (",
      cublasGetStatusString(st), ")"));
}

}  // namespace paceline::engine::cuda

#define CUDA_RETURN_IF_ERROR(expr)                                    \
  do {                                                                \
    ::absl::Status paceline_cuda_status_ =                            \
        ::paceline::engine::cuda::CudaStatus((expr), #expr, __FILE__, \
                                             __LINE__);               \
    if (!paceline_cuda_status_.ok()) return paceline_cuda_status_;    \
  } while (0)

#define CUBLAS_RETURN_IF_ERROR(expr)                                    \
  do {                                                                  \
    ::absl::Status paceline_cublas_status_ =                            \
        ::paceline::engine::cuda::CublasStatus((expr), #expr, __FILE__, \
                                               __LINE__);               \
    if (!paceline_cublas_status_.ok()) return paceline_cublas_status_;  \
  } while (0)

#endif  // PACELINE_ENGINE_CUDA_CUDA_STATUS_H_
