#ifndef PACELINE_SERVER_STREAM_BUFFER_H_
#define PACELINE_SERVER_STREAM_BUFFER_H_

// One Generate stream between the engine and the client: the request's
// TokenSink, a buffer of generated tokens, and the delivery state.
//
//   engine thread ─OnTokens─▶ pending ─(pace gate: due?)─▶ ready ─▶ one write
//                                          ▲                          │
//                        pacer thread: Release at the due time   OnWriteDone
//
// The engine side never waits: OnTokens appends to `pending` and returns.
// Tokens whose release time has come (unpaced, or within the burst) are
// released at once; for a later one the Pacer is asked to call Release at
// that time. Released tokens collect in `ready`; whenever no write is in
// flight, everything ready goes out as one message, so a slow reader (whose
// writes complete late) gets coalesced deltas and nothing else slows down.
// Writes go in order: Accepted, Deltas, Finished — the last once generation
// has finished and every token has been delivered.
//
// Text arrives from the scheduler in whole UTF-8 characters (stop strings
// already applied); a pending entry may carry text without a token (the
// flush at the end), which goes out with the token before it.
//
// Thread-safe: the engine thread, the pacer thread and gRPC threads call in.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/sampling/sampler.h"
#include "scheduler/clock.h"
#include "scheduler/token_sink.h"
#include "server/pace_gate.h"
#include "server/server_observers.h"

namespace paceline::server {

class Pacer;

// One message to write to the client.
struct Outgoing {
  enum class Kind { kAccepted, kDelta, kFinished };
  Kind kind = Kind::kDelta;
  scheduler::AcceptInfo accepted;  // kAccepted
  // kDelta: one or more tokens' output, coalesced.
  std::vector<int32_t> ids;
  std::string text;
  std::vector<engine::SampleResult> samples;
  // kFinished: how the request ended. `was_accepted` false means the
  // scheduler refused it at intake (nothing was written; the RPC ends with
  // finish.status). `aborted` is the status that cut delivery short, if any.
  bool was_accepted = false;
  scheduler::FinishInfo finish;
  absl::Status aborted;
  absl::Time first_delivered = absl::InfinitePast();
  absl::Time last_delivered = absl::InfinitePast();
};

// The client end, implemented by the gRPC reactor.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Starts writing `out` and returns at once; the writer then calls
  // StreamBuffer::OnWriteDone. Never called again before that. A kFinished
  // message is the last call; the writer ends the RPC with it.
  virtual void StartWrite(const Outgoing& out) = 0;
};

struct DeliveryOptions {
  double pace_tokens_per_s = 0;  // 0 = unpaced
  int32_t burst_tokens = 1;
};

class StreamBuffer final : public scheduler::TokenSink,
                           public std::enable_shared_from_this<StreamBuffer> {
 public:
  // `clock` and `pacer` must outlive the buffer; `writer` is attached with
  // Attach before the request is submitted. `observer` (may be null; must
  // outlive the buffer) hears of the stream's deliveries under `tenant`,
  // timed from now (the stream is queued right after).
  StreamBuffer(const DeliveryOptions& options, scheduler::Clock* clock,
               Pacer* pacer, DeliveryObserver* observer = nullptr,
               std::string tenant = "");

  void Attach(StreamWriter* writer);
  // The writer is gone (the RPC is over): drop everything still buffered
  // and never call it again.
  void Detach();

  // --- TokenSink (engine thread) ------------------------------------------
  void OnAccepted(const scheduler::AcceptInfo& info) override;
  void OnTokens(const scheduler::TokenDelta& delta) override;
  void OnFinished(const scheduler::FinishInfo& info) override;
  // Generated tokens not yet released to the client.
  int64_t buffered_tokens() const override;

  // --- Writer side (gRPC threads) -----------------------------------------
  // The write started by StartWrite has completed; `ok` false when the
  // stream broke (then nothing more is written but the Finished call).
  void OnWriteDone(bool ok);
  // Stop delivering: drop undelivered tokens and finish the stream with
  // `status` (CANCELLED, ABORTED, ...) as soon as no write is in flight.
  // The request itself is cancelled by the caller.
  void Abort(absl::Status status);

  // --- Pacer ---------------------------------------------------------------
  // Releases the tokens due at `now`, starts a write if it can, and returns
  // when the next pending token falls due (InfiniteFuture() if none).
  absl::Time Release(absl::Time now);

  // Whether the Finished message has been handed to the writer.
  bool done() const;
  // The request id, once accepted (0 before).
  scheduler::RequestId id() const;

 private:
  struct Piece {
    int32_t id = -1;  // -1: text only
    std::string text;
    std::optional<engine::SampleResult> sample;
    absl::Time ready;
  };

  // Moves due pieces to ready_ (mu_ held); returns the next due time.
  absl::Time ReleaseLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks the next message if no write is in flight (mu_ held).
  bool NextWriteLocked(Outgoing* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NextWriteLocked, then StartWrite outside the lock.
  void Pump();
  // pending_tokens_ += n, and the pacer's total with it.
  void AddPendingTokens(int64_t n);
  void DropPendingTokens();
  // Asks the pacer for a Release at `due` unless one is pending.
  void ScheduleLocked(absl::Time due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  scheduler::Clock* const clock_;
  Pacer* const pacer_;
  DeliveryObserver* const observer_;
  const std::string tenant_;
  const absl::Time queued_;

  mutable absl::Mutex mu_;
  StreamWriter* writer_ ABSL_GUARDED_BY(mu_) = nullptr;
  PaceGate gate_ ABSL_GUARDED_BY(mu_);
  const DeliveryOptions options_;
  std::deque<Piece> pending_ ABSL_GUARDED_BY(mu_);  // not yet released
  std::atomic<int64_t> pending_tokens_{0};           // tokens in pending_
  // Released, not yet written.
  bool accepted_ready_ ABSL_GUARDED_BY(mu_) = false;
  Outgoing ready_ ABSL_GUARDED_BY(mu_);  // kDelta being coalesced
  bool has_ready_ ABSL_GUARDED_BY(mu_) = false;
  scheduler::AcceptInfo accepted_ ABSL_GUARDED_BY(mu_);
  bool was_accepted_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<scheduler::FinishInfo> finish_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool in_flight_is_delta_ ABSL_GUARDED_BY(mu_) = false;
  int32_t in_flight_tokens_ ABSL_GUARDED_BY(mu_) = 0;  // ids in that delta
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a write failed
  bool done_ ABSL_GUARDED_BY(mu_) = false;    // Finished handed over
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;  // a pacer call is pending
  absl::Time first_delivered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_delivered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // When the last write with token ids completed (the observer's gaps).
  absl::Time last_tokens_delivered_ ABSL_GUARDED_BY(mu_) =
      absl::InfinitePast();
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_STREAM_BUFFER_H_
