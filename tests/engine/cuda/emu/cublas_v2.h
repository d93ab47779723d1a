#ifndef PACELINE_TESTS_ENGINE_CUDA_EMU_CUBLAS_V2_H_
#define PACELINE_TESTS_ENGINE_CUDA_EMU_CUBLAS_V2_H_

// cuBLAS as the backend uses it, for the emulation (emu.h): handles that
// hold nothing, and GemmEx / Sgemm as plain loops with the documented
// semantics (column-major, op(A) m x k, op(B) k x n, float accumulation,
// C not read when beta is 0).

#include "cuda_runtime_api.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
struct cublasContext;
using cublasHandle_t = cublasContext*;
enum libraryPropertyType { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL };

enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace,
                                  size_t bytes);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* a,
                            cudaDataType_t a_type, int lda, const void* b,
                            cudaDataType_t b_type, int ldb, const void* beta,
                            void* c, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k,
                           const float* alpha, const float* a, int lda,
                           const float* b, int ldb, const float* beta, float* c,
                           int ldc);

const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value);

#endif  // PACELINE_TESTS_ENGINE_CUDA_EMU_CUBLAS_V2_H_
