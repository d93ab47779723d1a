#ifndef PACELINE_SERVER_DELIVERY_STREAM_BUFFER_H_
#define PACELINE_SERVER_DELIVERY_STREAM_BUFFER_H_

// One stream between the engine and the client (a gRPC stream or unary
// answer, one choice of an HTTP answer): the request's TokenSink, a buffer
// of generated tokens, their text, and the write side as a state machine.
//
//   engine thread ─OnTokens─▶ inbox ─(pacer: Process)─▶ pending
//        ─(pace: due?)─▶ ready ─▶ one write ─▶ OnWriteDone
//
// The engine side (OnAccepted, OnTokens, OnFinished) only appends ids
// under the lock, hands the stream to the pacer thread (Pacer::Wake, once
// per turn) and returns; it never makes text and never calls the writer.
// On the pacer thread Process turns the inbox into text (engine/tokenizer/
// text_output.h: detokenizing, stop strings) and, for chat requests
// (DeliveryOptions::chat_output), into content, reasoning and tool-call
// deltas (chat/output_parser.h), as vLLM v1's output processor does; the
// engine's finish waits until its ids are processed, and the held-back text
// and the parser's tail go out before Finished. A stop string found there
// ends the stream at it and stops the request (SetStringStopper) one step
// late: the ids generated meanwhile are dropped, and the Finished says
// kStop with the string and the tokens delivered.
//
// Pieces whose release time has come (unpaced, or within the burst) move
// to `ready`; a paced piece is scheduled at its due time (Pacer::Schedule).
// Writes start only on the delivery side: Release and Process (the pacer
// thread), OnWriteDone (the transport's completion), Abort (a cancel or a
// drain). Whenever a write may start, everything ready goes out as one
// message, so a slow reader (whose writes complete late) gets coalesced
// deltas and nothing else slows down. Writes go in order: Accepted,
// Deltas, Finished — the last once generation has finished and every
// token has been delivered, or at once when the stream is cut (Abort, a
// failed write).
//
// The write side (State), one transition per event (Transition):
//
//   kIdle    ──Output──────────────▶ kIdle (hand-over to the pacer at most)
//   kIdle    ──Release/Process, ready──▶ kWriting (Accepted, then Deltas)
//   kIdle    ──Release/Process, all done─▶ kDone (Finished)
//   kIdle    ──Abort───────────────▶ kDone (Finished: the abort status)
//   kWriting ──Output, Release─────▶ kWriting (ready grows, no write)
//   kWriting ──WriteDone, ready────▶ kWriting (the next write)
//   kWriting ──WriteDone, nothing──▶ kIdle
//   kWriting ──WriteDone, all done─▶ kDone (Finished)
//   kWriting ──WriteFailed─────────▶ kDone (Finished: CANCELLED)
//   kWriting ──Abort───────────────▶ kFinishing (drops what is not written)
//   kFinishing ──WriteDone/Failed──▶ kDone (Finished: the abort status)
//   any but kDone ──Detach─────────▶ kDone (nothing written)
//   kDone ignores everything. "all done": finished and every token written.
//
// Thread-safe: the engine thread, the pacer thread and gRPC threads call in.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/sampling/sampler.h"
#include "chat/output_parser.h"
#include "engine/tokenizer/text_output.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/clock.h"
#include "scheduler/token_bucket.h"
#include "scheduler/token_sink.h"
#include "server/delivery/delivery_observer.h"
#include "server/delivery/pacer.h"

namespace paceline::server {

// One message to write to the client.
struct Outgoing {
  enum class Kind { kAccepted, kDelta, kFinished };
  Kind kind = Kind::kDelta;
  scheduler::AcceptInfo accepted;  // kAccepted
  // kDelta: one or more tokens' output, coalesced.
  std::vector<int32_t> ids;
  std::string text;  // chat: the content
  std::vector<engine::SampleResult> samples;
  // kDelta of a chat request: the reasoning, and tool-call deltas (at most
  // one per call index; an index listed in broken_tool_calls turned out
  // malformed and gets nothing more).
  std::string reasoning;
  std::vector<chat::ChatToolCallDelta> tool_calls;
  std::vector<int> broken_tool_calls;
  // kFinished: how the request ended. `was_accepted` false means the
  // scheduler refused it at intake (nothing was written; the RPC ends with
  // finish.status). `aborted` is the status that cut delivery short, if any;
  // then `finish` says kCancelled with that status and the usage so far
  // (the engine's, or the prompt and the tokens generated until the cut).
  bool was_accepted = false;
  scheduler::FinishInfo finish;
  absl::Status aborted;
  bool called_tools = false;  // chat: the output held a complete tool call
  absl::Time first_delivered = absl::InfinitePast();
  absl::Time last_delivered = absl::InfinitePast();
};

// The client end, implemented by the transport (the gRPC reactor).
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Starts sending `out` and returns at once; the writer then calls
  // StreamBuffer::OnWriteDone. Never called again before that. A kFinished
  // message is the last call; the writer ends the RPC with it (and calls
  // nothing back). Called from the pacer thread or from within
  // OnWriteDone / Abort, never from the engine thread.
  virtual void Send(const Outgoing& out) = 0;
};

// The released but unwritten bytes of every stream of one call, summed
// (DeliveryOptions::call_unread). Thread-safe.
class UnreadBytes {
 public:
  void Add(int64_t bytes) { total_.fetch_add(bytes, std::memory_order_relaxed); }
  int64_t total() const { return total_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> total_{0};
};

struct DeliveryOptions {
  double pace_tokens_per_s = 0;  // 0 = unpaced
  int32_t burst_tokens = 1;
  // The request's text (engine/tokenizer/text_output.h), made here, off
  // the engine thread: the tokenizer (must outlive the buffer; null: ids
  // carry no text), the stop strings (a match ends the stream there and
  // stops the request, StreamBuffer::SetStringStopper), and whether control
  // tokens have their text (chat requests: the parser looks for markers).
  const engine::Tokenizer* tokenizer = nullptr;
  engine::StopStrings stop;
  bool control_token_text = false;
  // Chat requests: how to split the output; tool-call ids derive from
  // tool_call_id_seed.
  std::optional<chat::ChatOutputFormat> chat_output;
  uint64_t tool_call_id_seed = 0;
  // Chat requests: output the prompt already wrote for the model (a forced
  // tool call's opening, openai_tool_choice.h). The parser reads it first;
  // its split goes out as the first delta (a forced call is announced
  // before any token).
  std::string chat_output_prefix;
  // The most bytes of output (text, reasoning, tool-call text, ids and
  // logprobs, as EstimatedBytes counts them) one coalesced Delta carries;
  // more ready output waits for the next write. 0 = no limit. A slow
  // reader's coalesced deltas once outgrew the transport's message limit
  // and the stream broke.
  int64_t max_delta_bytes = 0;
  // The most bytes of output (as EstimatedBytes counts them) a call may
  // hold released — due to the client — but not yet written because the
  // client reads too slowly or not at all: this stream's, or with
  // `call_unread` the sum over every stream sharing it (one HTTP answer's
  // choices). Past it the stream that sees the sum pass is cut:
  // everything undelivered is dropped, the request is cancelled (through
  // StreamBuffer::SetCanceller) and the stream ends with RESOURCE_EXHAUSTED
  // once the write in flight completes. Tokens waiting for their pace do
  // not count. 0 = no limit.
  int64_t max_unread_bytes = 0;
  // Shared by the streams of one call (null: the stream counts alone).
  std::shared_ptr<UnreadBytes> call_unread;
};

// About how many bytes `out` (a kDelta) takes on the wire: its strings,
// 5 per token id, and 24 per sampled token plus 16 per top logprob.
int64_t EstimatedBytes(const Outgoing& out);

// Adds `delta`'s fields to `out` (a kDelta): text and reasoning appended,
// tool-call deltas merged per call index.
void AppendChatDelta(chat::ChatOutputDelta delta, Outgoing* out);

class StreamBuffer final : public scheduler::TokenSink,
                           public Deliverable,
                           public std::enable_shared_from_this<StreamBuffer> {
 public:
  // The write side.
  enum class State {
    kIdle,       // no write in flight
    kWriting,    // one Accepted or Delta write in flight
    kFinishing,  // cut short during a write: Finished follows its completion
    kDone,       // Finished handed to the writer, or the writer detached
  };

  // Create with std::make_shared (the buffer hands itself to the pacer).
  // `writer`, `clock` and `pacer` must outlive the buffer (the writer until
  // Detach or the Finished message). `observer` (may be null; must outlive
  // the buffer) hears of the stream's deliveries under `tenant`, timed
  // from now (the stream is queued right after).
  StreamBuffer(const DeliveryOptions& options, StreamWriter* writer,
               scheduler::Clock* clock, Pacer* pacer,
               DeliveryObserver* observer = nullptr, std::string tenant = "");

  // The writer is gone (the RPC is over): drop everything still buffered
  // and never call it again.
  void Detach();

  // How the buffer stops its own request when it cuts the stream
  // (max_unread_bytes): called once with the request id, from the engine
  // or the pacer thread, with no lock of the buffer held. Set before the
  // request is submitted.
  void SetCanceller(std::function<void(scheduler::RequestId)> cancel);
  // How the buffer ends its own request at a stop string it found in the
  // text: called once with the request id, the string and how many
  // generated tokens its text took, from the pacer thread, with no lock of
  // the buffer held (ServingLoop::StopAtString: the request ends one step
  // late; the tokens generated meanwhile are never delivered). Set before
  // the request is submitted.
  void SetStringStopper(
      std::function<void(scheduler::RequestId, std::string, int32_t)> stop);

  // --- TokenSink (engine thread): append ids, hand over, nothing more:
  // no text, no stop strings, no chat parsing, never a write ---
  void OnAccepted(const scheduler::AcceptInfo& info) override;
  void OnTokens(const scheduler::TokenDelta& delta) override;
  void OnFinished(const scheduler::FinishInfo& info) override;
  // Generated tokens not yet delivered to the client: waiting for their
  // pace, or released but not yet written (a slow reader's).
  int64_t buffered_tokens() const override;

  // --- Writer side (the transport's threads) ------------------------------
  // The write started by Send has completed; `ok` false when the stream
  // broke (then nothing more is written but the Finished call).
  void OnWriteDone(bool ok);
  // Stop delivering: drop undelivered tokens and finish the stream with
  // `status` (CANCELLED, ABORTED, ...) as soon as no write is in flight.
  // The request itself is cancelled by the caller. The first abort wins.
  void Abort(absl::Status status);

  // --- Deliverable (the pacer thread) -------------------------------------
  // Releases the tokens due at `now`, starts a write if none is in flight,
  // and returns when the next pending token falls due (InfiniteFuture() if
  // none).
  absl::Time Release(absl::Time now) override;

  State state() const;
  // Whether the Finished message has been handed to the writer (or the
  // writer detached).
  bool done() const { return state() == State::kDone; }
  // The request id, once accepted (0 before).
  scheduler::RequestId id() const;

 private:
  class Processor;
  // Ids as the engine handed them over, not yet turned into text.
  struct Raw {
    int32_t id;
    std::optional<engine::SampleResult> sample;
    absl::Time ready;
  };
  struct Piece {
    int32_t id = -1;  // -1: text only
    std::string text;
    chat::ChatOutputDelta chat;  // chat requests: the split (text empty)
    std::optional<engine::SampleResult> sample;
    absl::Time ready;
  };
  // What changes the write side.
  struct Event {
    enum class Kind {
      kOutput,       // the engine side: Accepted, or a refusal's Finished
      kProcess,      // the pacer thread's turn for the engine's ids
      kRelease,      // the pacer's due time came
      kWriteDone,    // the write in flight completed
      kWriteFailed,  // ... and the stream broke
      kAbort,
      kDetach,
    };
    Event(Kind kind, absl::Time now, absl::Status status = absl::OkStatus())
        : kind(kind), now(now), status(std::move(status)) {}

    Kind kind;
    absl::Time now;
    absl::Status status;  // kAbort
  };
  // What a transition asks for once mu_ is released.
  struct Effects {
    std::optional<Outgoing> write;
    bool wake = false;                             // a pacer Release at once
    std::shared_ptr<Deliverable> process;  // a pacer Process turn at once
    // kRelease: when the pacer calls Release next (its answer).
    absl::Time schedule = absl::InfiniteFuture();
    // Elsewhere on the delivery side: a pacer Release then, added by Apply.
    absl::Time schedule_here = absl::InfiniteFuture();
    scheduler::RequestId cancel = 0;  // the request to cancel (a cut)
    // The request to stop at a stop string (its id, the string, tokens).
    std::optional<std::tuple<scheduler::RequestId, std::string, int32_t>>
        stop;
    int32_t delivered = 0;            // token ids that reached the client
    bool first = false;               // ... in its first such write
    absl::Duration since;             // ... this long after the previous one
    bool closed = false;              // tell the observer the stream closed
  };

  // The one place the state changes (mu_ held). A kOutput event (the
  // engine side) yields at most a wake or a schedule, never a write.
  Effects Transition(const Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The engine side's only effect: asks the pacer for a Release.
  void HandOver(const Effects& fx) ABSL_LOCKS_EXCLUDED(mu_);
  // The delivery side's effects: the observer, then the write. Touches
  // nothing of `this` after writing a Finished message (the call may end
  // and drop the buffer).
  void Apply(Effects fx) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls the canceller (SetCanceller) with `id`.
  void CancelRequest(scheduler::RequestId id) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls the string stopper (SetStringStopper).
  void StopRequest(scheduler::RequestId id, std::string stop, int32_t tokens)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Transition then Apply (Detach, OnWriteDone, Abort).
  void Handle(const Event& event) ABSL_LOCKS_EXCLUDED(mu_);
  // The processor's turn (the pacer thread): the engine's ids become text,
  // then as a Release.
  void Process(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // The inbox into pending pieces: detokenized, stop strings, chat parsing;
  // the engine's finish once the inbox is empty (the held-back text
  // flushed first).
  void ProcessLocked(absl::Time now, Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ProcessLocked, then ReleaseLocked; a due paced piece gets a pacer entry
  // unless one is pending.
  void ProcessAndReleaseLocked(absl::Time now, Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Transition's parts (mu_ held) ---
  bool open() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == State::kIdle || state_ == State::kWriting;
  }
  // The engine side's hand-over: the pacer's turn at once for ids to make
  // into text (a Release, or the processor when a Release is scheduled
  // later), or a Release at once when idle with something to write; never
  // a second entry.
  void HandOffLocked(Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a write could start now (Accepted, a Delta, or Finished).
  bool HasNextLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kIdle: the next write, if any (→ kWriting or kDone).
  void StartNextLocked(Effects* fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The Finished message (→ kDone).
  void FinishLocked(Effects* fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Accounts for the completed write in flight.
  void DeliveredLocked(absl::Time now, Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops everything not yet written.
  void DropLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ready_bytes_ += bytes, and the call's count with it.
  void AddReadyBytesLocked(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cuts the stream short with `status`: drops what is not written, then
  // finishes (now when idle, else after the write in flight).
  void CutLocked(absl::Status status, Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A released backlog past max_unread_bytes cuts the stream (and cancels
  // the request). `may_write`: false on the engine side, where an idle
  // stream is left to the pacer's Release instead.
  void CheckUnreadLocked(bool may_write, Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves due pieces to ready_ (starting a new Delta where the last would
  // pass max_delta_bytes); returns the next due time.
  // A piece's share of EstimatedBytes.
  static int64_t PieceBytes(const Piece& piece);
  absl::Time ReleaseLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The piece's text, or for a chat request its split.
  void SetTextLocked(absl::string_view text, Piece* piece)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // pending_tokens_ += n, and the pacer's totals with it (tokens, and
  // streams with any).
  void AddPendingTokens(int64_t n);
  void DropPendingTokens();

  // Constant after construction.
  StreamWriter* const writer_;
  const int64_t max_delta_bytes_;   // DeliveryOptions::max_delta_bytes
  const int64_t max_unread_bytes_;  // DeliveryOptions::max_unread_bytes
  // DeliveryOptions::call_unread, or this stream's own.
  const std::shared_ptr<UnreadBytes> unread_;
  // Chat requests: the output parser (pacer thread, under mu_).
  const std::unique_ptr<chat::ChatOutputParser> parser_;
  scheduler::Clock* const clock_;
  Pacer* const pacer_;
  DeliveryObserver* const observer_;
  const std::string tenant_;
  const absl::Time queued_;

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  // Contents: not yet released, released but not yet written, the end.
  scheduler::TokenBucket pace_ ABSL_GUARDED_BY(mu_);
  std::deque<Piece> pending_ ABSL_GUARDED_BY(mu_);
  // Tokens generated and not yet delivered: pending, ready, or in the
  // write in flight (a stalled reader's show here). Written under mu_.
  std::atomic<int64_t> pending_tokens_{0};
  bool dropped_ ABSL_GUARDED_BY(mu_) = false;  // DropLocked ran
  bool accepted_ready_ ABSL_GUARDED_BY(mu_) = false;
  // kDeltas to write, in order, each with its EstimatedBytes; the back one
  // still coalesces.
  struct Ready {
    Outgoing out;
    int64_t bytes = 0;
  };
  std::deque<Ready> ready_ ABSL_GUARDED_BY(mu_);
  int64_t ready_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // the sum over ready_
  std::function<void(scheduler::RequestId)> cancel_ ABSL_GUARDED_BY(mu_);
  std::function<void(scheduler::RequestId, std::string, int32_t)> stop_
      ABSL_GUARDED_BY(mu_);
  // The text (null without a tokenizer); pacer thread, under mu_.
  std::optional<engine::TextOutput> text_ ABSL_GUARDED_BY(mu_);
  // The engine's ids not yet processed, and its finish until they are.
  std::deque<Raw> inbox_ ABSL_GUARDED_BY(mu_);
  std::optional<scheduler::FinishInfo> engine_finish_ ABSL_GUARDED_BY(mu_);
  // The pacer's Process turn: the target (made at OnAccepted), and whether
  // it is pending.
  std::shared_ptr<Processor> processor_ ABSL_GUARDED_BY(mu_);
  bool process_pending_ ABSL_GUARDED_BY(mu_) = false;
  scheduler::AcceptInfo accepted_ ABSL_GUARDED_BY(mu_);
  bool was_accepted_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<scheduler::FinishInfo> finish_ ABSL_GUARDED_BY(mu_);
  absl::Status cut_ ABSL_GUARDED_BY(mu_);  // why delivery was cut short
  int32_t generated_ ABSL_GUARDED_BY(mu_) = 0;  // token ids appended
  // The write in flight (kWriting, kFinishing): a Delta with this many ids?
  bool in_flight_delta_ ABSL_GUARDED_BY(mu_) = false;
  int32_t in_flight_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  // A pacer Release is pending (at most one entry per stream), and whether
  // it is a wake (at once) rather than a due time.
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time first_delivered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_delivered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // When the last write with token ids completed (the observer's gaps).
  absl::Time last_tokens_delivered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_DELIVERY_STREAM_BUFFER_H_
