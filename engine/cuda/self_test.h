#ifndef PACELINE_ENGINE_CUDA_SELF_TEST_H_
#define PACELINE_ENGINE_CUDA_SELF_TEST_H_

// An end-to-end check of the CUDA toolchain on a real device: upload random
// matrices, multiply them with cuBLAS (FP32), apply a project kernel, copy
// back, and compare with a float64 CPU reference.

#include <cstdint>

#include "absl/status/status.h"

namespace paceline::engine::cuda {

// Computes Y = 2·(A·B) + 1 for random A (m×k), B (k×n) on `device` and
// checks every element within 1e-4 + 1e-4·|ref|. Errors: any CUDA/cuBLAS
// failure (with file:line), or Internal naming the worst element.
absl::Status RunGemmSelfTest(int device, int m, int n, int k, uint32_t seed);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_SELF_TEST_H_
