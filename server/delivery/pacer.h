#ifndef PACELINE_SERVER_DELIVERY_PACER_H_
#define PACELINE_SERVER_DELIVERY_PACER_H_

// The delivery thread: every client write that neither follows a completed
// one nor cuts a stream short (Abort) starts here. It holds the targets
// handed over to run at once (Wake: the engine side, when output became
// ready and no write is in flight) and a min-heap of (due time, target)
// for paced tokens (Schedule); one thread sleeps until there is work, then
// calls each target's Release, which starts that stream's next write.
//
// The hand-over is the one thread hop between the engine and the client
// for a first token, and for every token of a stream whose reader keeps up
// (its writes complete before the next token arrives). It is kept cheap: a
// target is handed over at most once however many tokens arrive before it
// runs (the target keeps track), Wake appends a shared_ptr copy to a list
// that keeps its capacity (no allocation per token), and only the first
// Wake after the thread's turn signals it; one wake serves every stream
// handed over in the same engine step.
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

// What the pacer calls back: something with output for a client.
class Deliverable {
 public:
  virtual ~Deliverable() = default;
  // On the pacer thread: delivers what is due at `now` (starts a write if
  // none is in flight). Returns when to be called next; InfiniteFuture()
  // for not until scheduled again.
  virtual absl::Time Release(absl::Time now) = 0;
};

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
  // Stops the thread and drops every entry; later Schedule calls are
  // dropped too. Idempotent.
  void Stop();

  // Calls target->Release on the thread's next turn.
  void Wake(std::shared_ptr<Deliverable> target);
  // Calls target->Release at `due` (or as soon after as it can).
  void Schedule(std::shared_ptr<Deliverable> target, absl::Time due);

  // Releases every target woken or due by the clock's now (and reschedules
  // those with more to come). Returns the earliest due time left, or
  // InfiniteFuture(). For tests driving a manual clock; not with Start().
  absl::Time RunDue();

  // Targets waiting for a due time (paced streams).
  int64_t num_scheduled() const;
  // Targets woken, waiting for the thread's next turn.
  int64_t num_woken() const;

  // Generated tokens not yet delivered, over all streams, and the streams
  // holding any (paced, or writing to a slow reader): the streams keep both
  // up to date.
  int64_t buffered_tokens() const {
    return buffered_tokens_.load(std::memory_order_relaxed);
  }
  void AddBufferedTokens(int64_t n) {
    buffered_tokens_.fetch_add(n, std::memory_order_relaxed);
  }
  int64_t buffering_streams() const {
    return buffering_streams_.load(std::memory_order_relaxed);
  }
  void AddBufferingStreams(int64_t n) {
    buffering_streams_.fetch_add(n, std::memory_order_relaxed);
  }

 private:
  struct Entry {
    absl::Time due;
    uint64_t seq = 0;  // FIFO among equal due times
    std::shared_ptr<Deliverable> target;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.due != b.due ? a.due > b.due : a.seq > b.seq;
    }
  };

  void ThreadMain();
  // Moves the entries due at `now`, then the woken targets, into *due.
  void PopDueLocked(absl::Time now,
                    std::vector<std::shared_ptr<Deliverable>>* due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases `due` (mu_ not held) and reschedules.
  void ReleaseAll(absl::Time now,
                  std::vector<std::shared_ptr<Deliverable>>* due);

  scheduler::Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Deliverable>> woken_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::atomic<int64_t> buffered_tokens_{0};
  std::atomic<int64_t> buffering_streams_{0};
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_DELIVERY_PACER_H_
