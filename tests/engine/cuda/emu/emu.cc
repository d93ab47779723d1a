// The emulation's block runner and runtime (emu.h, cuda_runtime_api.h,
// cublas_v2.h).

#include "emu.h"

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cublas_v2.h"
#include "cuda_runtime_api.h"
#include "engine/ggml_type.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

// Bounds of the section holding every __shared__ variable (the linker
// defines them when the section exists).
extern "C" char __start_paceline_emu_shared[] __attribute__((weak));
extern "C" char __stop_paceline_emu_shared[] __attribute__((weak));

namespace paceline::emu {
namespace {

constexpr int kMaxThreads = 1024;
constexpr auto kHangTimeout = std::chrono::seconds(300);

std::mutex g_fail_mu;
std::set<std::string>* g_failures = new std::set<std::string>;
std::atomic<bool> g_sticky_error{false};

struct Warp {
  std::unique_ptr<std::barrier<>> bar;
  uint64_t slot[2][32];
  int line[2][32];
  unsigned mask[2][32];
  uint64_t seq[2][32];  // the lane's count of intrinsics, this one included
  uint64_t calls[32];
};

// The block being run: barriers over its live threads, and what each
// thread passed to the last __syncthreads / warp intrinsic (two phases, so
// a fast thread's next call does not overwrite a slow reader's).
struct Block {
  int threads = 0;
  std::unique_ptr<std::barrier<>> sync;
  std::unique_ptr<std::barrier<>> end;
  // A thread's count of __syncthreads (this one included) and its line,
  // by phase parity: a thread that has exited keeps an old count.
  int sync_line[2][kMaxThreads];
  uint64_t sync_seq[2][kMaxThreads];
  uint64_t sync_calls[kMaxThreads];
  std::vector<Warp> warps;

  void Reset() {
    sync = std::make_unique<std::barrier<>>(threads);
    for (Warp& w : warps) {
      w.bar = std::make_unique<std::barrier<>>(32);
      std::fill(w.calls, w.calls + 32, 0);
      std::fill(&w.seq[0][0], &w.seq[0][0] + 64, 0);
    }
    std::fill(sync_calls, sync_calls + threads, 0);
    std::fill(&sync_seq[0][0], &sync_seq[0][0] + 2 * kMaxThreads, 0);
  }
};

Block* g_block = nullptr;

void PoisonShared() {
  if (__start_paceline_emu_shared == nullptr) return;
  std::memset(__start_paceline_emu_shared, 0xff,
              __stop_paceline_emu_shared - __start_paceline_emu_shared);
}

int LinearTid() {
  return static_cast<int>(
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

// One launch at a time, on a pool of threads that grows to the largest
// block seen.
class Pool {
 public:
  void Run(dim3 grid, dim3 block, const std::function<void()>& body) {
    const int n = static_cast<int>(block.x * block.y * block.z);
    Block b;
    b.threads = n;
    b.warps = std::vector<Warp>(n / 32);
    b.end = std::make_unique<std::barrier<>>(n);
    b.Reset();
    PoisonShared();
    g_block = &b;
    std::unique_lock<std::mutex> lock(mu_);
    while (static_cast<int>(workers_.size()) < n) {
      const int index = static_cast<int>(workers_.size());
      workers_.emplace_back([this, index] { Work(index); });
    }
    grid_ = grid;
    block_ = block;
    body_ = &body;
    active_ = n;
    done_ = 0;
    ++generation_;
    start_.notify_all();
    if (!finished_.wait_for(lock, kHangTimeout, [&] { return done_ == n; })) {
      std::fprintf(stderr,
                   "emulated launch hung for %lld s: a __syncthreads or warp "
                   "intrinsic not reached by every thread\n",
                   static_cast<long long>(kHangTimeout.count()));
      std::abort();
    }
    g_block = nullptr;
  }

 private:
  void Work(int index) {
    uint64_t seen = 0;
    while (true) {
      dim3 grid, block;
      const std::function<void()>* body;
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= active_) continue;
        grid = grid_;
        block = block_;
        body = body_;
      }
      RunBlocks(index, grid, block, *body);
      std::lock_guard<std::mutex> lock(mu_);
      if (++done_ == active_) finished_.notify_all();
    }
  }

  static void RunBlocks(int index, dim3 grid, dim3 block,
                        const std::function<void()>& body) {
    blockDim = block;
    gridDim = grid;
    threadIdx.x = index % block.x;
    threadIdx.y = (index / block.x) % block.y;
    threadIdx.z = index / (block.x * block.y);
    Block& b = *g_block;
    for (unsigned z = 0; z < grid.z; ++z) {
      for (unsigned y = 0; y < grid.y; ++y) {
        for (unsigned x = 0; x < grid.x; ++x) {
          blockIdx = uint3{x, y, z};
          body();
          // An exited thread no longer takes part in barriers.
          b.sync->arrive_and_drop();
          b.warps[index / 32].bar->arrive_and_drop();
          b.end->arrive_and_wait();
          if (index == 0) {
            b.Reset();
            PoisonShared();
          }
          b.end->arrive_and_wait();
        }
      }
    }
  }

  std::mutex mu_;
  std::condition_variable start_;
  std::condition_variable finished_;
  std::vector<std::thread> workers_;  // never joined: live until exit
  uint64_t generation_ = 0;
  dim3 grid_, block_;
  const std::function<void()>* body_ = nullptr;
  int active_ = 0;
  int done_ = 0;
};

Pool& ThePool() {
  static Pool* pool = new Pool;
  return *pool;
}

}  // namespace

void Fail(const std::string& what) {
  g_sticky_error = true;
  std::lock_guard<std::mutex> lock(g_fail_mu);
  if (g_failures->insert(what).second) {
    std::fprintf(stderr, "CUDA emulation: %s\n", what.c_str());
  }
}

void Run(dim3 grid, dim3 block, const std::function<void()>& body) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || threads % 32 != 0 ||
      grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535) {
    Fail("launch of grid (" + std::to_string(grid.x) + ", " +
         std::to_string(grid.y) + ", " + std::to_string(grid.z) +
         ") x block (" + std::to_string(block.x) + ", " +
         std::to_string(block.y) + ", " + std::to_string(block.z) +
         ") refused (blocks of 32..1024 threads, a multiple of 32)");
    return;
  }
  ThePool().Run(grid, block, body);
}

void SyncThreads(int line) {
  Block& b = *g_block;
  const int tid = LinearTid();
  const uint64_t seq = ++b.sync_calls[tid];
  const int p = static_cast<int>(seq & 1);
  b.sync_line[p][tid] = line;
  b.sync_seq[p][tid] = seq;
  b.sync->arrive_and_wait();
  if (tid != 0) return;
  // Threads that exited before this barrier are not in it (as on the GPU).
  for (int i = 0; i < b.threads; ++i) {
    if (b.sync_seq[p][i] == seq && b.sync_line[p][i] != line) {
      Fail("__syncthreads at line " + std::to_string(line) + " met thread " +
           std::to_string(i) + " at line " + std::to_string(b.sync_line[p][i]));
      return;
    }
  }
}

void WarpExchange(uint64_t mine, unsigned mask, int line, uint64_t* all) {
  Block& b = *g_block;
  const int tid = LinearTid();
  const int lane = tid & 31;
  Warp& w = b.warps[tid / 32];
  const uint64_t seq = ++w.calls[lane];
  const int p = static_cast<int>(seq & 1);
  w.slot[p][lane] = mine;
  w.line[p][lane] = line;
  w.mask[p][lane] = mask;
  w.seq[p][lane] = seq;
  w.bar->arrive_and_wait();
  for (int i = 0; i < 32; ++i) all[i] = w.slot[p][i];
  if (lane != 0) return;
  if (mask != 0xffffffffu) {
    Fail("warp intrinsic at line " + std::to_string(line) +
         " with a partial mask (not emulated)");
  }
  for (int i = 0; i < 32; ++i) {
    const bool gone = w.seq[p][i] != seq;
    if (gone || w.line[p][i] != line || w.mask[p][i] != mask) {
      Fail("warp intrinsic at line " + std::to_string(line) + ": lane " +
           std::to_string(i) +
           (gone ? " has exited or is at another call"
                 : " is at line " + std::to_string(w.line[p][i])));
      return;
    }
  }
}

void SyncWarp(unsigned mask, int line) {
  uint64_t all[32];
  WarpExchange(0, mask, line, all);
}

}  // namespace paceline::emu

unsigned atomicAdd(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
float atomicAdd(float* p, float v) {
  return std::atomic_ref<float>(*p).fetch_add(v);
}
unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*p).fetch_add(v);
}
unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  std::atomic_ref<unsigned long long> a(*p);
  unsigned long long old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

// --- runtime
// -------------------------------------------------------------------

namespace {

cudaError_t Sticky(cudaError_t err) {
  if (err != cudaSuccess) paceline::emu::Fail("runtime call failed");
  return err;
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidValue;
  std::snprintf(prop->name, sizeof(prop->name), "host emulation");
  prop->totalGlobalMem = size_t{16} << 30;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = size_t{8} << 30;
  *total_bytes = size_t{16} << 30;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  return paceline::emu::g_sticky_error.exchange(false) ? cudaErrorLaunchFailure
                                                       : cudaSuccess;
}
cudaError_t cudaPeekAtLastError() {
  return paceline::emu::g_sticky_error ? cudaErrorLaunchFailure : cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    default:
      return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t err) {
  return err == cudaErrorLaunchFailure ? "the emulation found an error"
                                       : cudaGetErrorName(err);
}
cudaError_t cudaDeviceSynchronize() { return cudaPeekAtLastError(); }

cudaError_t cudaMalloc(void** p, size_t bytes) {
  // Exactly `bytes` (256-aligned, as cudaMalloc's are), so a sanitizer build
  // sees a kernel reading past the end.
  *p = nullptr;
  if (posix_memalign(p, 256, bytes == 0 ? 1 : bytes) != 0) *p = nullptr;
  return *p != nullptr ? cudaSuccess : Sticky(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  return cudaMalloc(p, bytes);
}
cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                       cudaMemcpyKind) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(p, value, bytes);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  static char dummy;
  *stream = reinterpret_cast<cudaStream_t>(&dummy);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaPeekAtLastError();
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  return cudaErrorNotSupported;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  *graph = nullptr;
  return cudaErrorNotSupported;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t,
                                 unsigned long long) {
  *exec = nullptr;
  return cudaErrorNotSupported;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) {
  return cudaErrorNotSupported;
}
cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) { return cudaSuccess; }

const char* cublasGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
                                         : "CUBLAS_STATUS_NOT_SUPPORTED";
}
const char* cublasGetStatusString(cublasStatus_t status) {
  return cublasGetStatusName(status);
}
cublasStatus_t cublasGetProperty(libraryPropertyType, int* value) {
  *value = 0;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

float Element(const void* p, cudaDataType_t type, int64_t i) {
  switch (type) {
    case CUDA_R_32F:
      return static_cast<const float*>(p)[i];
    case CUDA_R_16F:
      return paceline::engine::HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case CUDA_R_16BF:
      return paceline::engine::BFloat16ToFloat(
          static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

cublasStatus_t Gemm(cublasOperation_t transa, cublasOperation_t transb, int m,
                    int n, int k, float alpha, const void* a,
                    cudaDataType_t a_type, int lda, const void* b,
                    cudaDataType_t b_type, int ldb, float beta, float* c,
                    int ldc) {
  if (m < 0 || n < 0 || k < 0 || lda < (transa == CUBLAS_OP_N ? m : k) ||
      ldb < (transb == CUBLAS_OP_N ? k : n) || ldc < m) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int p = 0; p < k; ++p) {
        const int64_t ai =
            transa == CUBLAS_OP_N ? i + int64_t{p} * lda : p + int64_t{i} * lda;
        const int64_t bi =
            transb == CUBLAS_OP_N ? p + int64_t{j} * ldb : j + int64_t{p} * ldb;
        sum += Element(a, a_type, ai) * Element(b, b_type, bi);
      }
      float& out = c[i + int64_t{j} * ldc];
      out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = nullptr;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* a,
                            cudaDataType_t a_type, int lda, const void* b,
                            cudaDataType_t b_type, int ldb, const void* beta,
                            void* c, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  // The backend's only form: float output and scalars.
  if (c_type != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return Gemm(transa, transb, m, n, k, *static_cast<const float*>(alpha), a,
              a_type, lda, b, b_type, ldb, *static_cast<const float*>(beta),
              static_cast<float*>(c), ldc);
}
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k,
                           const float* alpha, const float* a, int lda,
                           const float* b, int ldb, const float* beta, float* c,
                           int ldc) {
  return Gemm(transa, transb, m, n, k, *alpha, a, CUDA_R_32F, lda, b,
              CUDA_R_32F, ldb, *beta, c, ldc);
}
