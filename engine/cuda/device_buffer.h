#ifndef PACELINE_ENGINE_CUDA_DEVICE_BUFFER_H_
#define PACELINE_ENGINE_CUDA_DEVICE_BUFFER_H_

// Move-only owners of device memory (cudaMalloc) and pinned host memory
// (cudaMallocHost). Allocation returns a Status; destruction frees.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "engine/cuda/cuda_status.h"

namespace paceline::engine::cuda {

template <bool kPinnedHost>
class BasicBuffer {
 public:
  BasicBuffer() = default;
  BasicBuffer(const BasicBuffer&) = delete;
  BasicBuffer& operator=(const BasicBuffer&) = delete;
  BasicBuffer(BasicBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  BasicBuffer& operator=(BasicBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~BasicBuffer() { Free(); }

  // Frees what it held, then allocates `bytes` (uninitialized).
  absl::Status Allocate(size_t bytes) {
    Free();
    if (bytes == 0) return absl::OkStatus();
    void* p = nullptr;
    if constexpr (kPinnedHost) {
      CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, bytes));
    } else {
      CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    }
    data_ = p;
    bytes_ = bytes;
    return absl::OkStatus();
  }

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Free() {
    if (data_ == nullptr) return;
    if constexpr (kPinnedHost) {
      cudaFreeHost(data_);
    } else {
      cudaFree(data_);
    }
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = BasicBuffer<false>;
using PinnedBuffer = BasicBuffer<true>;

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_DEVICE_BUFFER_H_
