#include "server/delivery/stream_buffer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace paceline::server {

void AppendChatDelta(chat::ChatOutputDelta delta, Outgoing* out) {
  out->text += delta.content;
  out->reasoning += delta.reasoning;
  for (chat::ChatToolCallDelta& call : delta.tool_calls) {
    if (!out->tool_calls.empty() &&
        out->tool_calls.back().index == call.index) {
      chat::ChatToolCallDelta& last = out->tool_calls.back();
      if (last.id.empty()) last.id = std::move(call.id);
      if (last.name.empty()) last.name = std::move(call.name);
      last.arguments += call.arguments;
    } else {
      out->tool_calls.push_back(std::move(call));
    }
  }
  out->broken_tool_calls.insert(out->broken_tool_calls.end(),
                                delta.broken_tool_calls.begin(),
                                delta.broken_tool_calls.end());
}

// The pacer's turn for the engine's ids (StreamBuffer::Process); never
// rescheduled by the pacer, so it stays apart from the paced Release.
class StreamBuffer::Processor final : public Deliverable {
 public:
  explicit Processor(std::weak_ptr<StreamBuffer> buffer)
      : buffer_(std::move(buffer)) {}
  absl::Time Release(absl::Time now) override {
    if (std::shared_ptr<StreamBuffer> buffer = buffer_.lock()) {
      buffer->Process(now);
    }
    return absl::InfiniteFuture();
  }

 private:
  const std::weak_ptr<StreamBuffer> buffer_;
};

namespace {

constexpr int64_t kIdBytes = 5;           // a varint token id
constexpr int64_t kSampleBytes = 24;      // a sampled token's logprob entry
constexpr int64_t kTopLogprobBytes = 16;  // one alternative in it

int64_t SampleBytes(const engine::SampleResult& s) {
  return kSampleBytes +
         kTopLogprobBytes * static_cast<int64_t>(s.top_logprobs.size());
}

int64_t ToolCallBytes(const std::vector<chat::ChatToolCallDelta>& calls) {
  int64_t n = 0;
  for (const chat::ChatToolCallDelta& c : calls) {
    n += static_cast<int64_t>(c.id.size() + c.name.size() + c.arguments.size());
  }
  return n;
}

}  // namespace

int64_t EstimatedBytes(const Outgoing& out) {
  int64_t n = static_cast<int64_t>(out.text.size() + out.reasoning.size()) +
              ToolCallBytes(out.tool_calls) +
              kIdBytes * static_cast<int64_t>(out.ids.size());
  for (const engine::SampleResult& s : out.samples) n += SampleBytes(s);
  return n;
}

int64_t StreamBuffer::PieceBytes(const Piece& piece) {
  int64_t n =
      static_cast<int64_t>(piece.text.size() + piece.chat.content.size() +
                           piece.chat.reasoning.size()) +
      ToolCallBytes(piece.chat.tool_calls);
  if (piece.id >= 0) n += kIdBytes;
  if (piece.sample.has_value()) n += SampleBytes(*piece.sample);
  return n;
}

StreamBuffer::StreamBuffer(const DeliveryOptions& options, StreamWriter* writer,
                           scheduler::Clock* clock, Pacer* pacer,
                           DeliveryObserver* observer, std::string tenant)
    : writer_(writer),
      max_delta_bytes_(options.max_delta_bytes),
      max_unread_bytes_(options.max_unread_bytes),
      unread_(options.call_unread != nullptr
                  ? options.call_unread
                  : std::make_shared<UnreadBytes>()),
      parser_(options.chat_output.has_value()
                  ? std::make_unique<chat::ChatOutputParser>(
                        *options.chat_output, options.tool_call_id_seed)
                  : nullptr),
      clock_(clock),
      pacer_(pacer),
      observer_(observer),
      tenant_(std::move(tenant)),
      queued_(clock->Now()),
      pace_(scheduler::TokenBucket::Pace(options.pace_tokens_per_s,
                                         options.burst_tokens, queued_)) {
  {
    absl::MutexLock lock(&mu_);
    if (options.tokenizer != nullptr) {
      text_.emplace(options.tokenizer, options.stop,
                    options.control_token_text);
    }
    if (parser_ != nullptr && !options.chat_output_prefix.empty()) {
      Piece prefix;
      prefix.chat = parser_->Push(options.chat_output_prefix);
      prefix.ready = queued_;
      pending_.push_back(std::move(prefix));
    }
  }
  if (observer_ != nullptr) observer_->OnStreamOpened();
}

void StreamBuffer::SetStringStopper(
    std::function<void(scheduler::RequestId, std::string, int32_t)> stop) {
  absl::MutexLock lock(&mu_);
  stop_ = std::move(stop);
}

// --- Events ------------------------------------------------------------------

void StreamBuffer::Detach() { Handle({Event::Kind::kDetach, clock_->Now()}); }

void StreamBuffer::SetCanceller(
    std::function<void(scheduler::RequestId)> cancel) {
  absl::MutexLock lock(&mu_);
  cancel_ = std::move(cancel);
}

void StreamBuffer::OnAccepted(const scheduler::AcceptInfo& info) {
  const absl::Time now = clock_->Now();
  Effects hand_over;
  {
    absl::MutexLock lock(&mu_);
    accepted_ = info;
    was_accepted_ = true;
    if (open()) accepted_ready_ = true;
    processor_ = std::make_shared<Processor>(weak_from_this());
    hand_over = Transition({Event::Kind::kOutput, now});
  }
  HandOver(hand_over);
}

void StreamBuffer::OnTokens(const scheduler::TokenDelta& delta) {
  const absl::Time now = clock_->Now();
  Effects hand_over;
  {
    absl::MutexLock lock(&mu_);
    if (!open()) return;
    for (size_t i = 0; i < delta.ids.size(); ++i) {
      Raw raw{delta.ids[i], std::nullopt, now};
      if (i < delta.samples.size()) raw.sample = delta.samples[i];
      inbox_.push_back(std::move(raw));
    }
    generated_ += static_cast<int32_t>(delta.ids.size());
    AddPendingTokens(static_cast<int64_t>(delta.ids.size()));
    hand_over = Transition({Event::Kind::kOutput, now});
  }
  HandOver(hand_over);
}

void StreamBuffer::OnFinished(const scheduler::FinishInfo& info) {
  const absl::Time now = clock_->Now();
  Effects hand_over;
  {
    absl::MutexLock lock(&mu_);
    engine_finish_ = info;  // processed after the ids before it
    hand_over = Transition({Event::Kind::kOutput, now});
  }
  HandOver(hand_over);
}

int64_t StreamBuffer::buffered_tokens() const {
  return pending_tokens_.load(std::memory_order_relaxed);
}

void StreamBuffer::OnWriteDone(bool ok) {
  Handle({ok ? Event::Kind::kWriteDone : Event::Kind::kWriteFailed,
          clock_->Now()});
}

void StreamBuffer::Abort(absl::Status status) {
  Handle({Event::Kind::kAbort, clock_->Now(),
          std::move(status)});
}

absl::Time StreamBuffer::Release(absl::Time now) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    fx = Transition({Event::Kind::kRelease, now});
  }
  const absl::Time next = fx.schedule;  // the pacer reschedules
  Apply(std::move(fx));
  return next;
}

StreamBuffer::State StreamBuffer::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

scheduler::RequestId StreamBuffer::id() const {
  absl::MutexLock lock(&mu_);
  return accepted_.id;
}

// --- The state machine -------------------------------------------------------

StreamBuffer::Effects StreamBuffer::Transition(const Event& e) {
  using Kind = Event::Kind;
  Effects fx;
  switch (e.kind) {
    case Kind::kOutput:  // the engine side: a hand-over at most, no write
      CheckUnreadLocked(/*may_write=*/false, &fx);
      if (open()) HandOffLocked(&fx);
      break;
    case Kind::kProcess:  // the processor's turn (a Release is due later)
      process_pending_ = false;
      if (!open()) break;
      ProcessAndReleaseLocked(e.now, &fx);
      CheckUnreadLocked(/*may_write=*/true, &fx);
      if (open() && state_ == State::kIdle) StartNextLocked(&fx);
      break;
    case Kind::kRelease:
      scheduled_ = false;  // this was the pending entry
      woken_ = false;
      if (!open()) break;
      ProcessLocked(e.now, &fx);
      fx.schedule = ReleaseLocked(e.now);
      CheckUnreadLocked(/*may_write=*/true, &fx);
      if (!open()) break;
      scheduled_ = fx.schedule != absl::InfiniteFuture();
      if (state_ == State::kIdle) StartNextLocked(&fx);
      break;
    case Kind::kWriteDone:
      if (state_ == State::kWriting) {
        ProcessAndReleaseLocked(e.now, &fx);  // what came meanwhile
        DeliveredLocked(e.now, &fx);
        state_ = State::kIdle;
        StartNextLocked(&fx);
      } else if (state_ == State::kFinishing) {
        DeliveredLocked(e.now, &fx);
        FinishLocked(&fx);
      }
      break;
    case Kind::kWriteFailed:
      if (state_ == State::kWriting) {
        cut_ = absl::CancelledError("the client stopped reading");
        DropLocked();
        FinishLocked(&fx);
      } else if (state_ == State::kFinishing) {
        FinishLocked(&fx);
      }
      break;
    case Kind::kAbort:
      if (!open()) break;  // the first cut wins
      CutLocked(e.status, &fx);
      break;
    case Kind::kDetach:
      if (state_ == State::kDone) break;
      DropLocked();
      state_ = State::kDone;
      fx.closed = true;
      break;
  }
  return fx;
}

void StreamBuffer::Handle(const Event& event) {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    fx = Transition(event);
  }
  Apply(std::move(fx));
}

void StreamBuffer::Process(absl::Time now) {
  Handle({Event::Kind::kProcess, now});
}

void StreamBuffer::StopRequest(scheduler::RequestId id, std::string stop,
                               int32_t tokens) {
  std::function<void(scheduler::RequestId, std::string, int32_t)> call;
  {
    absl::MutexLock lock(&mu_);
    call = stop_;
  }
  if (call) call(id, std::move(stop), tokens);
}

void StreamBuffer::CancelRequest(scheduler::RequestId id) {
  std::function<void(scheduler::RequestId)> cancel;
  {
    absl::MutexLock lock(&mu_);
    cancel = cancel_;
  }
  if (cancel) cancel(id);
}

void StreamBuffer::HandOver(const Effects& fx) {
  if (fx.cancel != 0) CancelRequest(fx.cancel);
  if (fx.process != nullptr) pacer_->Wake(fx.process);
  // The pacer thread calls Release, which makes the text and starts the
  // write: one hop, no allocation (see pacer.h).
  if (fx.wake) pacer_->Wake(shared_from_this());
}

void StreamBuffer::Apply(Effects fx) {
  if (fx.schedule_here != absl::InfiniteFuture()) {
    pacer_->Schedule(shared_from_this(), fx.schedule_here);
  }
  if (fx.stop.has_value()) {
    auto& [id, string, tokens] = *fx.stop;
    StopRequest(id, std::move(string), tokens);
  }
  if (fx.cancel != 0) CancelRequest(fx.cancel);
  if (fx.delivered > 0 && observer_ != nullptr) {
    observer_->OnDelivered(tenant_, fx.first, fx.since, fx.delivered);
  }
  // Finishing may end the call and drop this buffer before Send returns:
  // nothing of `this` is touched after it.
  DeliveryObserver* const closed = fx.closed ? observer_ : nullptr;
  if (fx.write.has_value()) writer_->Send(*fx.write);
  if (closed != nullptr) closed->OnStreamClosed();
}

void StreamBuffer::HandOffLocked(Effects* fx) {
  const bool to_process = !inbox_.empty() || engine_finish_.has_value();
  if (to_process) {
    // The pacer thread makes the text at once: stop strings are found one
    // step late, not when a paced token falls due. A Release woken already
    // does it; a Release scheduled later leaves it to the processor.
    if (woken_ || process_pending_) return;
    if (!scheduled_) {
      fx->wake = true;
      woken_ = true;
      scheduled_ = true;
    } else if (processor_ != nullptr) {
      fx->process = processor_;
      process_pending_ = true;
    }
    return;
  }
  // A pending entry is due no later than anything that became ready: its
  // Release will see this too.
  if (scheduled_ || state_ != State::kIdle || !HasNextLocked()) return;
  fx->wake = true;
  woken_ = true;
  scheduled_ = true;
}

void StreamBuffer::ProcessAndReleaseLocked(absl::Time now, Effects* fx) {
  ProcessLocked(now, fx);
  const absl::Time due = ReleaseLocked(now);
  if (!scheduled_ && due != absl::InfiniteFuture()) {
    fx->schedule_here = due;  // Apply adds the pacer's entry
    scheduled_ = true;
  }
}

bool StreamBuffer::HasNextLocked() const {
  return accepted_ready_ || !ready_.empty() ||
         (finish_.has_value() && pending_.empty());
}

void StreamBuffer::StartNextLocked(Effects* fx) {
  Outgoing out;
  if (accepted_ready_) {
    out.kind = Outgoing::Kind::kAccepted;
    out.accepted = accepted_;
    accepted_ready_ = false;
    in_flight_delta_ = false;
    in_flight_tokens_ = 0;
  } else if (!ready_.empty()) {
    out = std::move(ready_.front().out);
    AddReadyBytesLocked(-ready_.front().bytes);
    ready_.pop_front();
    in_flight_delta_ = true;
    in_flight_tokens_ = static_cast<int32_t>(out.ids.size());
  } else {
    if (finish_.has_value() && pending_.empty()) FinishLocked(fx);
    return;
  }
  fx->write = std::move(out);
  state_ = State::kWriting;
}

void StreamBuffer::FinishLocked(Effects* fx) {
  Outgoing out;
  out.kind = Outgoing::Kind::kFinished;
  out.was_accepted = was_accepted_;
  if (finish_.has_value()) {
    out.finish = *finish_;
  } else if (engine_finish_.has_value()) {  // cut before it was processed
    out.finish = *engine_finish_;
  }
  if (!cut_.ok()) {
    // Delivery was cut short: the Finished says so, with the usage so far
    // (the engine's own figures when it had finished).
    if (!finish_.has_value() && !engine_finish_.has_value()) {
      out.finish.usage.prompt_tokens = accepted_.prompt_tokens;
      out.finish.usage.cached_prompt_tokens = accepted_.cached_prompt_tokens;
      out.finish.usage.completion_tokens = generated_;
    }
    out.finish.reason = scheduler::FinishReason::kCancelled;
    out.finish.status = cut_;
  }
  out.aborted = cut_;
  out.called_tools = parser_ != nullptr && parser_->saw_tool_calls();
  out.first_delivered = first_delivered_;
  out.last_delivered = last_delivered_;
  fx->write = std::move(out);
  fx->closed = true;
  state_ = State::kDone;
}

void StreamBuffer::DeliveredLocked(absl::Time now, Effects* fx) {
  if (!in_flight_delta_) return;
  in_flight_delta_ = false;
  if (first_delivered_ == absl::InfinitePast()) first_delivered_ = now;
  last_delivered_ = now;
  if (in_flight_tokens_ == 0) return;
  fx->delivered = std::exchange(in_flight_tokens_, 0);
  if (!dropped_) AddPendingTokens(-fx->delivered);  // delivered now
  fx->first = last_tokens_delivered_ == absl::InfinitePast();
  fx->since = now - (fx->first ? queued_ : last_tokens_delivered_);
  last_tokens_delivered_ = now;
}

void StreamBuffer::DropLocked() {
  dropped_ = true;
  inbox_.clear();
  pending_.clear();
  DropPendingTokens();
  ready_.clear();
  AddReadyBytesLocked(-ready_bytes_);
  accepted_ready_ = false;
}

void StreamBuffer::AddReadyBytesLocked(int64_t bytes) {
  ready_bytes_ += bytes;
  unread_->Add(bytes);
}

void StreamBuffer::CutLocked(absl::Status status, Effects* fx) {
  cut_ = std::move(status);
  DropLocked();
  if (state_ == State::kWriting) {
    state_ = State::kFinishing;
  } else {
    FinishLocked(fx);
  }
}

void StreamBuffer::CheckUnreadLocked(bool may_write, Effects* fx) {
  const int64_t unread = unread_->total();
  if (max_unread_bytes_ <= 0 || unread <= max_unread_bytes_) return;
  if (!open() || (!may_write && state_ != State::kWriting)) return;
  fx->cancel = accepted_.id;
  CutLocked(absl::ResourceExhaustedError(absl::StrCat(
                "the client reads too slowly: ", unread,
                " bytes of output were due and unread, past the limit of ",
                max_unread_bytes_)),
            fx);
}

// --- Contents ----------------------------------------------------------------

void StreamBuffer::ProcessLocked(absl::Time now, Effects* fx) {
  while (!inbox_.empty()) {
    Raw raw = std::move(inbox_.front());
    inbox_.pop_front();
    if (text_.has_value() && text_->stopped()) {  // past the stop string
      --generated_;
      AddPendingTokens(-1);
      continue;
    }
    Piece piece;
    piece.id = raw.id;
    piece.sample = std::move(raw.sample);
    piece.ready = raw.ready;
    SetTextLocked(text_.has_value() ? text_->Push(raw.id) : "", &piece);
    pending_.push_back(std::move(piece));
    if (text_.has_value() && text_->stopped()) {
      fx->stop.emplace(accepted_.id, text_->stop_string(), text_->tokens());
    }
  }
  if (!engine_finish_.has_value()) return;
  // The end: the held-back text, then the parser's tail, then Finished.
  const std::string rest = text_.has_value() ? text_->Flush() : "";
  for (int part = 0; part < (parser_ != nullptr ? 2 : 1); ++part) {
    Piece tail;
    tail.ready = now;
    if (part == 1) {
      tail.chat = parser_->Finish();
    } else {
      SetTextLocked(rest, &tail);
    }
    if (!tail.text.empty() || !tail.chat.empty()) {
      pending_.push_back(std::move(tail));
    }
  }
  finish_ = *std::move(engine_finish_);
  engine_finish_.reset();
  if (text_.has_value() && text_->stopped()) {
    // Ended at the stop string, however the engine ended meanwhile.
    finish_->reason = scheduler::FinishReason::kStop;
    finish_->status = absl::OkStatus();
    finish_->stop_string = text_->stop_string();
    finish_->stop_token = -1;
    finish_->usage.completion_tokens =
        std::min(finish_->usage.completion_tokens, text_->tokens());
  }
}

absl::Time StreamBuffer::ReleaseLocked(absl::Time now) {
  while (!pending_.empty()) {
    Piece& piece = pending_.front();
    if (piece.id >= 0) {
      const absl::Time at = pace_.WhenAvailable(1, piece.ready);
      if (at > now) return at;
      pace_.Take(1, at);
    }
    const int64_t bytes = PieceBytes(piece);
    if (ready_.empty() || (max_delta_bytes_ > 0 && ready_.back().bytes > 0 &&
                           ready_.back().bytes + bytes > max_delta_bytes_)) {
      ready_.emplace_back().out.kind = Outgoing::Kind::kDelta;
    }
    ready_.back().bytes += bytes;
    AddReadyBytesLocked(bytes);
    Outgoing& back = ready_.back().out;
    if (piece.id >= 0) back.ids.push_back(piece.id);
    back.text += piece.text;
    AppendChatDelta(std::move(piece.chat), &back);
    if (piece.sample.has_value()) {
      back.samples.push_back(*std::move(piece.sample));
    }
    pending_.pop_front();
  }
  return absl::InfiniteFuture();
}

void StreamBuffer::SetTextLocked(absl::string_view text, Piece* piece) {
  if (parser_ == nullptr) {
    piece->text.assign(text.data(), text.size());
  } else {
    piece->chat = parser_->Push(text);
  }
}

void StreamBuffer::AddPendingTokens(int64_t n) {
  const int64_t before =
      pending_tokens_.fetch_add(n, std::memory_order_relaxed);
  if (before == 0 && n > 0) pacer_->AddBufferingStreams(1);
  if (before > 0 && before + n == 0) pacer_->AddBufferingStreams(-1);
  pacer_->AddBufferedTokens(n);
}

void StreamBuffer::DropPendingTokens() {
  const int64_t n = pending_tokens_.exchange(0, std::memory_order_relaxed);
  pacer_->AddBufferedTokens(-n);
  if (n > 0) pacer_->AddBufferingStreams(-1);
}

}  // namespace paceline::server
