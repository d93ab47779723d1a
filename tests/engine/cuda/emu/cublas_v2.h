#ifndef PACELINE_TESTS_ENGINE_CUDA_EMU_CUBLAS_V2_H_
#define PACELINE_TESTS_ENGINE_CUDA_EMU_CUBLAS_V2_H_

// The cuBLAS declarations the backend's headers name, for the emulation
// (emu.h). The kernel tests need only the status types; no GEMM here.

#include "cuda_runtime_api.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
struct cublasContext;
using cublasHandle_t = cublasContext*;
enum libraryPropertyType { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL };

const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value);

#endif  // PACELINE_TESTS_ENGINE_CUDA_EMU_CUBLAS_V2_H_
