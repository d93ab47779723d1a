// The emulation's block runner and runtime (emu.h, cuda_runtime_api.h,
// cublas_v2.h).
//
// A block runs as one fiber per CUDA thread on the calling thread: a fiber
// runs until it reaches __syncthreads, a warp intrinsic or its end, then
// the next runnable one runs. A fiber is started once on its own stack
// (ucontext) and then switched with _setjmp / _longjmp, which leave the
// signal mask alone: glibc's swapcontext makes a system call each switch,
// which made the emulation tests spend half their time in the kernel. A
// fiber that ends its body parks until the next block reuses it.
//
// When every lane of a warp waits at a warp intrinsic they are released
// together (the intrinsic's line and mask checked); when every live thread
// waits at __syncthreads the block is released. Threads that have returned
// take no further part, as on the GPU. Anything else that leaves no fiber
// runnable is a deadlock on the GPU too: reported, and the block abandoned.

#include "emu.h"

#include <setjmp.h>
#include <ucontext.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cublas_v2.h"
#include "cuda_runtime_api.h"
#include "engine/gguf/ggml_type.h"

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
constexpr size_t kStackBytes = size_t{256} << 10;

std::mutex g_fail_mu;
std::set<std::string>* g_failures = new std::set<std::string>;
std::atomic<bool> g_sticky_error{false};

enum class State { kRunnable, kBlockWait, kWarpWait, kDone };

struct Fiber {
  ucontext_t start;  // made just before the first switch into the fiber
  jmp_buf resume;    // where it yielded, once started
  bool started = false;
  std::unique_ptr<char[]> stack;
  State state = State::kRunnable;
  uint3 index;
  int line = 0;  // of the barrier or intrinsic it waits at
  unsigned mask = 0;
};

struct Warp {
  uint64_t slot[2][32];  // deposits by parity of the lane's call count
  uint64_t calls[32];
};

// The block being run (one at a time, on the thread that launched it).
struct Block {
  int threads = 0;
  std::vector<Fiber> fibers;  // grows to the largest block; reused
  std::vector<Warp> warps;
  int current = -1;
  jmp_buf scheduler;
  std::thread::id host;  // the thread the parked fibers last ran on
  const std::function<void()>* body = nullptr;
};

Block* g_block = new Block;

void PoisonShared() {
  if (__start_paceline_emu_shared == nullptr) return;
  std::memset(__start_paceline_emu_shared, 0xff,
              __stop_paceline_emu_shared - __start_paceline_emu_shared);
}

Fiber& Current() { return g_block->fibers[g_block->current]; }

// Back to the scheduler until resumed. Nothing of `f` is used after the
// switch (the fibers' vector may have grown meanwhile).
void Yield(Fiber& f) {
  if (_setjmp(f.resume) == 0) _longjmp(g_block->scheduler, 1);
}

// Runs a block's body, parks, and runs the next block's when resumed.
void FiberMain() {
  while (true) {
    (*g_block->body)();
    Fiber& f = Current();
    f.state = State::kDone;
    Yield(f);
  }
}

// Back to the scheduler until released.
void Wait(State state, int line, unsigned mask) {
  Fiber& f = Current();
  f.state = state;
  f.line = line;
  f.mask = mask;
  Yield(f);
}

// Runs fiber `i` until it yields.
void SwitchTo(Block& b, int i) {
  Fiber& f = b.fibers[i];
  b.current = i;
  threadIdx = f.index;
  if (_setjmp(b.scheduler) != 0) return;  // it yielded
  if (f.started) _longjmp(f.resume, 1);
  f.started = true;
  getcontext(&f.start);
  f.start.uc_stack.ss_sp = f.stack.get();
  f.start.uc_stack.ss_size = kStackBytes;
  f.start.uc_link = nullptr;
  makecontext(&f.start, FiberMain, 0);
  setcontext(&f.start);
}

std::string Where(int tid, const Fiber& f) {
  return "thread " + std::to_string(tid) +
         (f.state == State::kDone ? " (returned)"
          : f.state == State::kBlockWait
              ? " (at __syncthreads, line " + std::to_string(f.line) + ")"
              : " (at a warp intrinsic, line " + std::to_string(f.line) + ")");
}

// Releases warps whose live lanes all wait at a warp intrinsic; true if any.
bool ReleaseWarps(Block& b) {
  bool released = false;
  for (int w = 0; w < b.threads / 32; ++w) {
    Fiber* lanes = &b.fibers[w * 32];
    int waiting = 0;
    int done = 0;
    for (int i = 0; i < 32; ++i) {
      waiting += lanes[i].state == State::kWarpWait;
      done += lanes[i].state == State::kDone;
    }
    if (waiting == 0 || waiting + done != 32) continue;
    const Fiber* first = nullptr;
    for (int i = 0; i < 32; ++i) {
      const Fiber& f = lanes[i];
      if (f.state == State::kDone) {
        Fail("warp intrinsic at line " +
             std::to_string(first ? first->line : f.line) + ": lane " +
             std::to_string(i) + " has returned");
        continue;
      }
      if (first == nullptr) first = &f;
      if (f.line != first->line || f.mask != first->mask) {
        Fail("warp intrinsic at line " + std::to_string(first->line) +
             ": lane " + std::to_string(i) + " is at line " +
             std::to_string(f.line));
      }
    }
    for (int i = 0; i < 32; ++i) {
      if (lanes[i].state == State::kWarpWait) lanes[i].state = State::kRunnable;
    }
    released = true;
  }
  return released;
}

// Releases __syncthreads when every live thread waits there; true if so.
bool ReleaseBlock(Block& b) {
  const Fiber* first = nullptr;
  for (int i = 0; i < b.threads; ++i) {
    const Fiber& f = b.fibers[i];
    if (f.state == State::kDone) continue;
    if (f.state != State::kBlockWait) return false;
    if (first == nullptr) first = &f;
    if (f.line != first->line) {
      Fail("__syncthreads at line " + std::to_string(first->line) +
           " met thread " + std::to_string(i) + " at line " +
           std::to_string(f.line));
    }
  }
  if (first == nullptr) return false;  // all returned
  for (int i = 0; i < b.threads; ++i) {
    if (b.fibers[i].state == State::kBlockWait) {
      b.fibers[i].state = State::kRunnable;
    }
  }
  return true;
}

void RunBlock(Block& b) {
  for (int i = 0; i < b.threads; ++i) {
    Fiber& f = b.fibers[i];
    if (f.stack == nullptr) f.stack = std::make_unique<char[]>(kStackBytes);
    f.state = State::kRunnable;
  }
  for (Warp& w : b.warps) std::fill(w.calls, w.calls + 32, 0);
  while (true) {
    bool ran = false;
    for (int i = 0; i < b.threads; ++i) {
      Fiber& f = b.fibers[i];
      if (f.state != State::kRunnable) continue;
      SwitchTo(b, i);
      ran = true;
    }
    if (ReleaseWarps(b) || ReleaseBlock(b) || ran) continue;
    bool all_done = true;
    int stuck = -1;
    for (int i = 0; i < b.threads; ++i) {
      if (b.fibers[i].state != State::kDone) {
        all_done = false;
        if (stuck < 0) stuck = i;
      }
    }
    if (all_done) return;
    Fail("deadlock in block (" + std::to_string(blockIdx.x) + ", " +
         std::to_string(blockIdx.y) + ", " + std::to_string(blockIdx.z) +
         "): " + Where(stuck, b.fibers[stuck]) +
         " waits for threads that never arrive");
    // The block's waiting fibers are abandoned: they start afresh next time.
    for (Fiber& f : b.fibers) f.started = f.started && f.state == State::kDone;
    return;
  }
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
  Block& b = *g_block;
  // Parked fibers resume only on the thread they ran on (their frames may
  // hold its thread-local addresses); on another they start afresh.
  if (b.host != std::this_thread::get_id()) {
    b.host = std::this_thread::get_id();
    for (Fiber& f : b.fibers) f.started = false;
  }
  b.threads = static_cast<int>(threads);
  if (b.fibers.size() < threads) b.fibers.resize(threads);
  b.warps.resize(threads / 32);
  b.body = &body;
  for (int i = 0; i < b.threads; ++i) {
    b.fibers[i].index =
        uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
  }
  const dim3 saved_block = blockDim;
  const dim3 saved_grid = gridDim;
  blockDim = block;
  gridDim = grid;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = uint3{x, y, z};
        PoisonShared();
        RunBlock(b);
      }
    }
  }
  blockDim = saved_block;
  gridDim = saved_grid;
}

void SyncThreads(int line) { Wait(State::kBlockWait, line, 0); }

void WarpExchange(uint64_t mine, unsigned mask, int line, uint64_t* all) {
  Block& b = *g_block;
  const int tid = b.current;
  const int lane = tid & 31;
  Warp& w = b.warps[tid / 32];
  // A lane is at most one call ahead of its warp's slowest reader: the next
  // call cannot be released before every lane has made it.
  const int p = static_cast<int>(++w.calls[lane] & 1);
  w.slot[p][lane] = mine;
  if (mask != 0xffffffffu) {
    Fail("warp intrinsic at line " + std::to_string(line) +
         " with a partial mask (not emulated)");
  }
  Wait(State::kWarpWait, line, mask);
  for (int i = 0; i < 32; ++i) all[i] = w.slot[p][i];
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
