#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <thread>

namespace paceline::engine::cpu {
namespace {

// True on pool workers, and on a caller while it runs its own share: a
// ParallelFor issued there runs inline instead of deadlocking on the pool.
thread_local bool tls_in_task = false;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

using Clock = std::chrono::steady_clock;

// Polls `ready` for about `spin_us`, then gives up. Checking the clock only
// every 64 polls keeps the loop's cost in the pause instructions. After the
// first rounds each round also yields: when the machine has fewer free
// cores than spinning threads, the thread we wait for may be the one
// waiting for our core.
template <typename Ready>
bool SpinUntil(Ready ready, int64_t spin_us) {
  if (ready()) return true;
  if (spin_us <= 0) return false;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::microseconds(spin_us);
  for (int round = 0;; ++round) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      CpuRelax();
    }
    if (Clock::now() >= deadline) return ready();
    if (round >= 4) std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, int spin_us)
    : num_threads_(num_threads > 0
                       ? num_threads
                       : std::max(1, static_cast<int>(
                                         std::thread::hardware_concurrency()))),
      spin_us_(spin_us) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(int index) {
  if (index >= task_threads_) return;
  const auto [begin, end] = Partition(task_n_, index, task_threads_);
  if (begin < end) (*task_)(begin, end);
}

void ThreadPool::ParallelFor(int64_t n, RangeFnRef fn) {
  if (n <= 0) return;
  const int threads =
      static_cast<int>(std::min<int64_t>(num_threads_, n));
  if (threads == 1 || tls_in_task) {
    fn(0, n);
    return;
  }
  [[maybe_unused]] const bool was_in_call = in_call_.exchange(true);
  assert(!was_in_call && "ThreadPool::ParallelFor: one caller at a time");

  task_ = &fn;
  task_n_ = n;
  task_threads_ = threads;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  // seq_cst pairs with the workers' sleepers_ increment: either a worker
  // sees the new generation before sleeping, or we see it asleep.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();

  tls_in_task = true;
  RunShare(0);
  tls_in_task = false;

  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(done, spin_us_)) {
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    while (true) {
      const int left = pending_.load(std::memory_order_seq_cst);
      if (left == 0) break;
      pending_.wait(left, std::memory_order_acquire);
    }
    caller_sleeping_.store(false, std::memory_order_relaxed);
  }
  task_ = nullptr;
  in_call_.store(false, std::memory_order_release);
}

void ThreadPool::WorkerLoop(int index) {
  tls_in_task = true;
  // Not generation_'s current value: a task may already have been posted
  // before this thread got here. Workers start at generation 0.
  uint32_t seen = 0;
  while (true) {
    auto changed = [this, seen] {
      return generation_.load(std::memory_order_acquire) != seen;
    };
    if (!SpinUntil(changed, spin_us_)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (generation_.load(std::memory_order_seq_cst) == seen) {
        generation_.wait(seen, std::memory_order_acquire);
      }
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_relaxed)) return;
    RunShare(index);
    // seq_cst pairs with the caller's caller_sleeping_ store.
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      pending_.notify_one();
    }
  }
}

}  // namespace paceline::engine::cpu
