#ifndef PACELINE_ENGINE_CPU_THREAD_POOL_H_
#define PACELINE_ENGINE_CPU_THREAD_POOL_H_

// A fixed set of threads for the CPU kernels' data parallelism. The calling
// thread takes part, so a pool of N threads starts N - 1 workers; a pool of
// 1 runs everything inline.
//
// ParallelFor splits [0, n) statically into one contiguous range per thread
// (thread i gets [n*i/N, n*(i+1)/N)), so a kernel that partitions by output
// rows reads each weight once and the split is the same on every call. A
// call allocates nothing: the function is passed by reference (FunctionRef)
// and the workers are woken through an atomic generation counter. Workers
// spin for a short while after each task (decode calls arrive microseconds
// apart) and then sleep on a futex (std::atomic::wait).
//
// Thread-safety: ParallelFor may be called by one thread at a time (the
// engine thread); concurrent calls from different threads are a bug (a
// debug build asserts). A ParallelFor issued from inside a task runs inline
// on the calling thread. The destructor must not run concurrently with a
// call.

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace paceline::engine::cpu {

// A non-owning reference to a callable `void(int64_t begin, int64_t end)`.
// The callable must outlive the reference (it does for a ParallelFor call).
class RangeFnRef {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<
                            std::remove_cvref_t<F>, RangeFnRef>>>
  RangeFnRef(F&& fn)  // NOLINT(google-explicit-constructor): like a lambda
      : obj_(const_cast<void*>(static_cast<const void*>(&fn))),
        call_([](void* obj, int64_t begin, int64_t end) {
          (*static_cast<std::remove_reference_t<F>*>(obj))(begin, end);
        }) {}

  void operator()(int64_t begin, int64_t end) const {
    call_(obj_, begin, end);
  }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  // `num_threads` counts the caller; <= 0 means one per hardware thread
  // (std::thread::hardware_concurrency()). `spin_us` is how long an idle
  // worker polls for the next task before it sleeps.
  explicit ThreadPool(int num_threads = 0, int spin_us = 100);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) on disjoint, contiguous ranges that cover [0, n)
  // exactly once, at most one range per thread, the caller taking the first;
  // returns when all have returned. Threads whose range would be empty are
  // not called. n <= 0 calls nothing.
  void ParallelFor(int64_t n, RangeFnRef fn);

  // The range thread `index` of `num_threads` gets from ParallelFor(n).
  static std::pair<int64_t, int64_t> Partition(int64_t n, int index,
                                               int num_threads) {
    return {n * index / num_threads, n * (index + 1) / num_threads};
  }

 private:
  void WorkerLoop(int index);
  void RunShare(int index);

  // Constant after construction.
  const int num_threads_;
  const int64_t spin_us_;
  std::vector<std::thread> workers_;

  // The current task, written by the caller before it bumps generation_
  // (release) and read by workers after they see the bump (acquire).
  const RangeFnRef* task_ = nullptr;
  int64_t task_n_ = 0;
  int task_threads_ = 0;  // threads with a non-empty range

  // Each cache-line separated: workers poll generation_, the caller polls
  // pending_.
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};     // workers still running
  alignas(64) std::atomic<int> sleepers_{0};    // workers in generation_.wait
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> in_call_{false};  // debug check: one caller at a time
};

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_THREAD_POOL_H_
