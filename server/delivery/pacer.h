#ifndef PACELINE_SERVER_DELIVERY_PACER_H_
#define PACELINE_SERVER_DELIVERY_PACER_H_

// The delivery thread: a min-heap of (due time, target) and one thread that
// sleeps until the earliest due time, then calls the target's Release,
// which starts that stream's next write. Every client write that does not
// follow a completed one starts here: the engine thread only hands a
// stream over (Schedule with due = now when output became ready and no
// write is in flight, or the due time of a paced token) and returns.
//
// The hand-over is the one thread hop between the engine and the client
// for a first token, and for every token of a stream whose reader keeps up
// (its writes complete before the next token arrives). It is kept cheap: a
// target has at most one entry however many tokens arrive before it runs
// (the target keeps track), an entry is a shared_ptr copy into the heap (no
// allocation per token once the heap has grown), and the thread is woken
// only when the new entry is the earliest; one wake serves every stream
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

  // Calls target->Release at `due` (or as soon after as it can); at once
  // (on the next turn of the thread) for a due time already past.
  void Schedule(std::shared_ptr<Deliverable> target, absl::Time due);

  // Releases every target due by the clock's now (and reschedules those
  // with more to come). Returns the earliest due time left, or
  // InfiniteFuture(). For tests driving a manual clock; not with Start().
  absl::Time RunDue();

  // Targets waiting for a due time.
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
    std::shared_ptr<Deliverable> target;
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

#endif  // PACELINE_SERVER_DELIVERY_PACER_H_
