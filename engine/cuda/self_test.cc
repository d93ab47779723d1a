#include "engine/cuda/self_test.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels/scale.h"

namespace paceline::engine::cuda {
namespace {

struct DeviceFree {
  void operator()(float* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<float, DeviceFree>;

struct CublasDestroy {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
using CublasHandle =
    std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDestroy>;

absl::Status Allocate(size_t count, DeviceBuffer* out) {
  void* p = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(float)));
  out->reset(static_cast<float*>(p));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunGemmSelfTest(int device, int m, int n, int k, uint32_t seed) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Row-major host matrices.
  std::vector<float> a(static_cast<size_t>(m) * k);  // (m, k)
  std::vector<float> b(static_cast<size_t>(k) * n);  // (k, n)
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);

  DeviceBuffer da, db, dy;
  RETURN_IF_ERROR(Allocate(a.size(), &da));
  RETURN_IF_ERROR(Allocate(b.size(), &db));
  RETURN_IF_ERROR(Allocate(static_cast<size_t>(m) * n, &dy));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(da.get(), a.data(), a.size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(db.get(), b.data(), b.size() * sizeof(float),
                                  cudaMemcpyHostToDevice));

  cublasHandle_t raw = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&raw));
  CublasHandle handle(raw);
  // cuBLAS is column-major: a row-major (m, n) Y is a column-major (n, m)
  // Y^T = B^T · A^T, where B^T and A^T are the row-major B and A as stored.
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_RETURN_IF_ERROR(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n,
                                     m, k, &one, db.get(), n, da.get(), k,
                                     &zero, dy.get(), n));
  CUDA_RETURN_IF_ERROR(LaunchAffine(dy.get(), dy.get(),
                                    static_cast<int64_t>(m) * n, 2.0f, 1.0f,
                                    /*stream=*/nullptr));
  std::vector<float> y(static_cast<size_t>(m) * n);
  CUDA_RETURN_IF_ERROR(cudaMemcpy(y.data(), dy.get(), y.size() * sizeof(float),
                                  cudaMemcpyDeviceToHost));

  double worst = 0;
  int worst_i = 0, worst_j = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0;
      for (int p = 0; p < k; ++p) {
        ref += static_cast<double>(a[static_cast<size_t>(i) * k + p]) *
               b[static_cast<size_t>(p) * n + j];
      }
      ref = 2 * ref + 1;
      const double got = y[static_cast<size_t>(i) * n + j];
      const double excess = std::abs(got - ref) - (1e-4 + 1e-4 * std::abs(ref));
      if (!(excess <= worst)) {  // also catches NaN
        worst = std::isnan(excess) ? INFINITY : excess;
        worst_i = i;
        worst_j = j;
      }
    }
  }
  if (worst > 0) {
    return absl::InternalError(absl::StrFormat(
        "GEMM self-test %dx%dx%d: element (%d, %d) off by %g beyond tolerance",
        m, n, k, worst_i, worst_j, worst));
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine::cuda
