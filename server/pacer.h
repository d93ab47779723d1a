#ifndef PACELINE_SERVER_PACER_H_
#define PACELINE_SERVER_PACER_H_

// The delivery clock of every paced stream: a min-heap of (due time,
// stream) and one thread that sleeps until the earliest due time, then
// calls StreamBuffer::Release, which hands the due tokens to that stream's
// writer. A stream has at most one entry (StreamBuffer keeps track); tokens
// that are due when generated never come here (the buffer releases them
// itself), so unpaced streams cost the pacer nothing.
//
// Driven either by its own thread (Start; the daemon) or by hand with
// RunDue under an injected clock (tests check exact emission times).
// Thread-safe.

#include <atomic>
#include <cstdint>
#include <memory>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/clock.h"

namespace paceline::server {

class StreamBuffer;

class Pacer {
 public:
  // `clock` must outlive the pacer.
  explicit Pacer(scheduler::Clock* clock);
  Pacer(const Pacer&) = delete;
  Pacer& operator=(const Pacer&) = delete;
  // Stop().
  ~Pacer();

  // Starts the thread (at most once).
  void Start();
  // Stops the thread and drops every entry. Idempotent.
  void Stop();

  // Calls stream->Release at `due` (or as soon after as it can).
  void Schedule(std::shared_ptr<StreamBuffer> stream, absl::Time due);

  // Releases every stream due by the clock's now (and reschedules those
  // with more to come). Returns the earliest due time left, or
  // InfiniteFuture(). For tests driving a manual clock; not with Start().
  absl::Time RunDue();

  // Streams waiting for a due time.
  int64_t num_scheduled() const;

  // Generated tokens not yet released, over all streams (the streams keep
  // it up to date).
  int64_t buffered_tokens() const {
    return buffered_tokens_.load(std::memory_order_relaxed);
  }
  void AddBufferedTokens(int64_t n) {
    buffered_tokens_.fetch_add(n, std::memory_order_relaxed);
  }

 private:
  struct Entry {
    absl::Time due;
    uint64_t seq = 0;  // FIFO among equal due times
    std::shared_ptr<StreamBuffer> stream;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.due != b.due ? a.due > b.due : a.seq > b.seq;
    }
  };

  void ThreadMain();
  // Pops the entries due at `now` into *due (mu_ held).
  void PopDueLocked(absl::Time now, std::vector<Entry>* due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases `due` (mu_ not held) and reschedules.
  void ReleaseAll(absl::Time now, std::vector<Entry>* due);

  scheduler::Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::atomic<int64_t> buffered_tokens_{0};
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_PACER_H_
