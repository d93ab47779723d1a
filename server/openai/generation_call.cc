#include "server/openai/generation_call.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "scheduler/retry_hint.h"
#include "server/delivery/stream_buffer.h"
#include "server/frontend/answer_size.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_http.h"
#include "server/openai/openai_tool_choice.h"

namespace paceline::server::openai {
namespace {

// The status a finished choice ends the answer with; OK when it ended by
// itself (stop, length).
absl::Status FailureOf(const Outgoing& out) {
  if (!out.aborted.ok()) return out.aborted;
  if (!out.was_accepted) return out.finish.status;
  const scheduler::FinishReason reason = out.finish.reason;
  if (reason == scheduler::FinishReason::kError) {
    return out.finish.status.ok() ? absl::InternalError("generation failed")
                                  : out.finish.status;
  }
  if (reason == scheduler::FinishReason::kCancelled) {
    return out.finish.status.ok() ? absl::CancelledError("cancelled")
                                  : out.finish.status;
  }
  return absl::OkStatus();
}

class Call;

// One choice's end of its StreamBuffer.
class ChoiceWriter final : public StreamWriter {
 public:
  ChoiceWriter(Call* call, int index) : call_(call), index_(index) {}
  void Send(const Outgoing& out) override;

 private:
  Call* const call_;
  const int index_;
};

class Call final : public std::enable_shared_from_this<Call> {
 public:
  Call(Frontend* frontend, OpenAiRequest request,
       std::unique_ptr<AnswerFormat> format,
       std::shared_ptr<http::HttpExchange> exchange)
      : frontend_(frontend),
        request_(std::move(request)),
        format_(std::move(format)),
        exchange_(std::move(exchange)) {}

  // Admits and submits every choice, or answers with the first refusal.
  void Start(const TenantPolicy* tenant);
  void OnSend(int index, const Outgoing& out);

 private:
  struct Choice {
    Choice(Call* call, int index, bool first_of_prompt)
        : writer(call, index), index(index), first_of_prompt(first_of_prompt) {}
    ChoiceWriter writer;
    int index = 0;
    std::shared_ptr<StreamBuffer> buffer;
    scheduler::RequestId id = 0;  // under mu_ (0: not submitted)
    bool first_of_prompt;
    bool finished = false;
  };

  // tool_choice required / named on a chat template without a call
  // format: refused naming tool_choice, before the request's constraint
  // (which needs the format) is built.
  absl::Status CheckToolChoice() const;
  // tool_choice required / named: the call's opening appended to the
  // prompt and given to the output parser (openai_tool_choice.h).
  absl::Status ForceToolCall(BuiltRequest* built) const;
  // Builds one prompt's choices; the refusal, if any.
  absl::Status AddPrompt(const TenantPolicy* tenant,
                         const v1::GenerateRequest& prompt,
                         std::vector<BuiltRequest>* built);
  // A non-streamed answer of every prompt's n choices, each like `spec`,
  // whose estimate passes max_response_bytes (answer_size.h): InvalidParam
  // naming what to lower.
  absl::Status CheckAnswerSize(const scheduler::RequestSpec& spec) const;
  // Submits the built choices; on a refusal answers with it and cancels
  // those submitted (which finish into the answer given).
  void SubmitAll(std::vector<BuiltRequest> built);
  void CancelAll(const absl::Status& status);

  // --- OnSend's parts (mu_ held); exchange calls only post, so they are
  // made under the lock; buffer and loop calls are made after it ---
  // The bytes of an Accepted message (opens the SSE answer).
  std::string AcceptedLocked(Choice& c, const Outgoing& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bytes of a Delta (streamed), or "" after adding it to the answer.
  // A non-streamed answer that grows past max_response_bytes (the
  // admission estimate was short) fails: *cancel is set.
  std::string DeltaLocked(Choice& c, const Outgoing& out, absl::Status* cancel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A finished choice. Returns the status the other choices are cancelled
  // with when the answer failed with this one; sets *release when the call
  // is over with nothing left to write.
  absl::Status FinishedLocked(Choice& c, const Outgoing& out, bool* release)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every choice has finished: the answer's end, after `tail`. Returns
  // whether the call is over already (nothing to write).
  bool EndLocked(std::string tail) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the answer with `status` before or after it opened.
  void FailLocked(const absl::Status& status, std::string* bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the last byte: the ids are released, and so is the call.
  std::function<void(bool)> Release();

  Frontend* const frontend_;
  const OpenAiRequest request_;
  // The answer's bytes; called under mu_ once the call has started.
  const std::unique_ptr<AnswerFormat> format_;
  const std::shared_ptr<http::HttpExchange> exchange_;
  // Set at Start, constant after (choices are found by index).
  std::vector<std::unique_ptr<Choice>> choices_;
  std::shared_ptr<Call> self_;  // alive until the answer is written
  // Every choice's released, unwritten output, counted together.
  const std::shared_ptr<UnreadBytes> unread_ = std::make_shared<UnreadBytes>();

  absl::Mutex mu_;
  bool opened_ ABSL_GUARDED_BY(mu_) = false;    // the SSE answer started
  bool answered_ ABSL_GUARDED_BY(mu_) = false;  // the answer is complete
  int unfinished_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // not streamed: the answer
  UsageCounter usage_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  // Why every choice was cancelled (the client left, the answer failed);
  // choices submitted later are cancelled at once.
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
};

void ChoiceWriter::Send(const Outgoing& out) { call_->OnSend(index_, out); }

void Call::Start(const TenantPolicy* tenant) {
  // Refusals of the call's own (the core counts those of Build).
  auto refuse = [&](const absl::Status& st) {
    format_->RespondError(*exchange_, frontend_->Rejected(tenant->name, st));
  };
  if (absl::Status st = CheckToolChoice(); !st.ok()) return refuse(st);
  std::vector<BuiltRequest> built;
  for (const v1::GenerateRequest& prompt : request_.prompts) {
    absl::Status st = AddPrompt(tenant, prompt, &built);
    // Every prompt shares the body's options: the first one's choices
    // tell the whole answer's size, before the others are built.
    if (st.ok() && built.size() == static_cast<size_t>(request_.n)) {
      if (st = CheckAnswerSize(built.front().spec); !st.ok()) {
        return refuse(st);
      }
    }
    if (!st.ok()) {
      format_->RespondError(*exchange_, st);
      return;
    }
  }
  for (size_t i = 0; i < built.size(); ++i) {
    const bool first = i % request_.n == 0;
    choices_.push_back(
        std::make_unique<Choice>(this, static_cast<int>(i), first));
  }
  {
    absl::MutexLock lock(&mu_);
    unfinished_ = static_cast<int>(choices_.size());
  }
  self_ = shared_from_this();
  std::weak_ptr<Call> weak = self_;
  exchange_->SetOnClose([weak] {
    if (auto call = weak.lock()) {
      call->CancelAll(absl::CancelledError("the client went away"));
    }
  });
  SubmitAll(std::move(built));
}

absl::Status Call::CheckAnswerSize(const scheduler::RequestSpec& spec) const {
  if (request_.stream) return absl::OkStatus();
  const int64_t limit = frontend_->max_response_bytes();
  const int64_t choices =
      static_cast<int64_t>(request_.prompts.size()) * request_.n;
  const std::optional<std::string> over = AnswerOverLimit(choices, spec, limit);
  if (!over.has_value()) return absl::OkStatus();
  // The factor whose lowering helps most, as the param.
  absl::string_view param = format_->MaxTokensParam();
  if (request_.logprobs &&
      choices * spec.stop.max_tokens * kAnswerTextBytesPerToken <= limit) {
    param = format_->LogprobsParam();
  } else if (request_.n > 1) {
    param = "n";
  } else if (request_.prompts.size() > 1) {
    param = "prompt";
  }
  return InvalidParam(param,
                      absl::StrCat(*over,
                                   ": lower max_tokens, n, the prompts or "
                                   "logprobs, or set stream: true"));
}

absl::Status Call::CheckToolChoice() const {
  const chat::ModelChatTemplates* templates = frontend_->model().chat_templates;
  if (templates == nullptr) return absl::OkStatus();  // Build refuses chat
  return ToolCallPrefix(templates->output.tool_calls, request_.tool_choice,
                        request_.tool_choice_name)
      .status();
}

absl::Status Call::ForceToolCall(BuiltRequest* built) const {
  const DeliveryOptions& delivery = built->delivery;
  const chat::ToolCallFormat format = delivery.chat_output.has_value()
                                          ? delivery.chat_output->tool_calls
                                          : chat::ToolCallFormat::kNone;
  const bool opened = delivery.chat_output.has_value() &&
                      delivery.chat_output->starts_in_tool_calls;
  absl::StatusOr<std::string> prefix = ToolCallPrefix(
      format, request_.tool_choice, request_.tool_choice_name, opened);
  if (!prefix.ok()) return prefix.status();
  if (prefix->empty()) return absl::OkStatus();
  // A prompt that opened the reasoning block (GLM 4.7's `<think>`, QwQ,
  // DeepSeek R1): the forced call comes after the block, closed here, or
  // the parser would read the call as thinking.
  if (delivery.chat_output.has_value() &&
      delivery.chat_output->starts_in_reasoning) {
    *prefix = absl::StrCat(delivery.chat_output->reasoning_close, *prefix);
  }
  engine::EncodeOptions encode;
  encode.parse_special = true;  // our own markers: control tokens
  const std::vector<int32_t> ids =
      frontend_->tokenizer().Encode(*prefix, encode);
  built->spec.prompt.insert(built->spec.prompt.end(), ids.begin(), ids.end());
  built->delivery.chat_output_prefix = *std::move(prefix);
  return absl::OkStatus();
}

absl::Status Call::AddPrompt(const TenantPolicy* tenant,
                             const v1::GenerateRequest& prompt,
                             std::vector<BuiltRequest>* built) {
  absl::StatusOr<BuiltRequest> one = frontend_->Build(*tenant, prompt);
  if (!one.ok()) return FromCore(one.status());
  if (!request_.stream) one->delivery.pace_tokens_per_s = 0;
  if (absl::Status st = ForceToolCall(&*one); !st.ok()) {
    return frontend_->Rejected(tenant->name, st);
  }
  // Choice i samples with seed + i (the request's seed, or the one drawn).
  const uint64_t seed = one->spec.sampling.seed;
  for (int i = 0; i < request_.n; ++i) {
    BuiltRequest choice = *one;
    choice.spec.sampling.seed = seed + static_cast<uint64_t>(i);
    choice.delivery.tool_call_id_seed = seed + static_cast<uint64_t>(i);
    built->push_back(std::move(choice));
  }
  return absl::OkStatus();
}

void Call::SubmitAll(std::vector<BuiltRequest> built) {
  const size_t n = static_cast<size_t>(request_.n);
  for (size_t first = 0; first < built.size(); first += n) {
    std::vector<Stream> streams;
    for (size_t i = first; i < first + n; ++i) {
      Choice& c = *choices_[i];
      // A non-streamed answer reaches the client whole at the end: its
      // choices' instant writes are not deliveries to time.
      streams.push_back(frontend_->OpenStream(std::move(built[i]), &c.writer,
                                              unread_, request_.stream));
      c.buffer = streams.back().buffer;  // before any Send can come
    }
    std::vector<Stream*> group;
    for (Stream& stream : streams) group.push_back(&stream);
    const absl::Status submitted = frontend_->Submit(group, this);
    if (submitted.ok()) {
      absl::Status cancelled;
      {
        absl::MutexLock lock(&mu_);
        for (size_t i = 0; i < n; ++i) choices_[first + i]->id = streams[i].id;
        cancelled = cancelled_;
      }
      // The client left (or the answer failed) while this group was being
      // submitted.
      if (!cancelled.ok()) CancelAll(cancelled);
      continue;
    }
    // A group no queue could ever admit whole (n over a limit) carries no
    // retry hint: retrying cannot help, so it is the request's fault.
    absl::Status refusal = submitted;
    if (refusal.code() == absl::StatusCode::kResourceExhausted &&
        !scheduler::RetryAfter(refusal).has_value()) {
      refusal = InvalidParam("n", refusal.message());
    }
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      std::string ignored;
      FailLocked(refusal, &ignored);
      for (size_t j = first; j < built.size(); ++j) {
        // Never submitted.
        if (choices_[j]->buffer != nullptr) choices_[j]->buffer->Detach();
        choices_[j]->finished = true;
      }
      unfinished_ -= static_cast<int>(built.size() - first);
      release = unfinished_ == 0;
    }
    CancelAll(refusal);
    if (release) Release()(true);
    return;
  }
}

void Call::CancelAll(const absl::Status& status) {
  std::vector<std::pair<scheduler::RequestId, std::shared_ptr<StreamBuffer>>>
      live;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_.ok()) cancelled_ = status;
    for (const std::unique_ptr<Choice>& c : choices_) {
      if (c->id != 0 && !c->finished) live.emplace_back(c->id, c->buffer);
    }
  }
  for (auto& [id, buffer] : live) {
    Stream stream;
    stream.buffer = std::move(buffer);
    stream.id = id;
    frontend_->Stop(stream, status);
  }
}

std::function<void(bool)> Call::Release() {
  return [this](bool) {
    std::vector<scheduler::RequestId> ids;
    {
      absl::MutexLock lock(&mu_);
      for (const std::unique_ptr<Choice>& c : choices_) {
        if (c->id != 0) ids.push_back(c->id);
      }
    }
    for (scheduler::RequestId id : ids) frontend_->Unregister(id);
    self_.reset();  // may delete this: last
  };
}

void Call::OnSend(int index, const Outgoing& out) {
  // The answer's last write may complete, and release the call, on the
  // HTTP thread as soon as mu_ is dropped below: this reference keeps the
  // call alive until OnSend returns. (This choice has not finished, so the
  // call has not been released yet.)
  const std::shared_ptr<Call> keep = shared_from_this();
  Choice& c = *choices_[index];
  std::optional<bool> done_now;  // OnWriteDone(ok) here, nothing written
  absl::Status cancel;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    if (out.kind == Outgoing::Kind::kFinished) {
      // The last message of the buffer: no OnWriteDone.
      cancel = FinishedLocked(c, out, &release);
    } else {
      std::string bytes = out.kind == Outgoing::Kind::kAccepted
                              ? AcceptedLocked(c, out)
                              : DeltaLocked(c, out, &cancel);
      if (request_.stream && opened_ && !answered_) {
        exchange_->Write(std::move(bytes), [buffer = c.buffer](bool ok) {
          buffer->OnWriteDone(ok);
        });
      } else {
        done_now = !answered_;
      }
    }
  }
  if (done_now.has_value()) c.buffer->OnWriteDone(*done_now);
  if (!cancel.ok()) CancelAll(cancel);
  if (release) Release()(true);  // may delete this: last
}

std::string Call::AcceptedLocked(Choice& c, const Outgoing& out) {
  if (!request_.stream || answered_) return "";
  std::string bytes;
  if (!opened_) {
    exchange_->StartStream(200, SseHeaders());
    opened_ = true;
    bytes = format_->StreamOpened(out.accepted);
  }
  return absl::StrCat(bytes, format_->StreamAccepted(c.index));
}

std::string Call::DeltaLocked(Choice& c, const Outgoing& out,
                              absl::Status* cancel) {
  if (!request_.stream) {
    if (answered_) return "";
    format_->Add(c.index, out);
    held_bytes_ += EstimatedBytes(out);
    const int64_t limit = frontend_->max_response_bytes();
    if (limit > 0 && held_bytes_ > limit) {
      *cancel = InvalidParam(
          format_->MaxTokensParam(),
          absl::StrCat("the answer grew past the server's "
                       "max_response_bytes ",
                       limit,
                       ": lower max_tokens, n, the prompts or logprobs, or "
                       "set stream: true"));
      std::string ignored;
      FailLocked(*cancel, &ignored);
    }
    return "";
  }
  return format_->StreamDelta(c.index, out);
}

void Call::FailLocked(const absl::Status& status, std::string* bytes) {
  if (!failure_.ok() || answered_) return;
  failure_ = status;
  if (!opened_) {
    answered_ = true;
    format_->RespondError(*exchange_, status);
    return;
  }
  // After the stream opened, the error is its last event.
  *bytes += format_->StreamFailed(status);
}

absl::Status Call::FinishedLocked(Choice& c, const Outgoing& out,
                                  bool* release) {
  c.finished = true;
  --unfinished_;
  const absl::Status fail = FailureOf(out);
  std::string bytes;
  if (out.was_accepted) usage_.Add(out.finish.usage, c.first_of_prompt);
  absl::Status cancel;
  if (fail.ok() && !answered_) {
    if (request_.stream) {
      bytes = format_->StreamFinished(c.index, out);
    } else {
      format_->Finished(c.index, out);
    }
  } else if (failure_.ok() && !answered_) {
    FailLocked(fail, &bytes);
    cancel = fail;  // the answer has failed: the other choices stop too
  }
  if (unfinished_ == 0) {
    *release = EndLocked(std::move(bytes));
  } else if (opened_ && !answered_ && !bytes.empty()) {
    exchange_->Write(std::move(bytes), {});
  }
  return cancel;
}

bool Call::EndLocked(std::string tail) {
  if (answered_) return true;  // answered with an error already
  answered_ = true;
  if (request_.stream) {
    if (failure_.ok()) tail += format_->StreamEnd(usage_);
    exchange_->Write(std::move(tail), {});
    exchange_->EndStream(Release());
    return false;
  }
  RespondJson(*exchange_, format_->Body(usage_), Release());
  return false;
}

}  // namespace

void StartGenerationCall(Frontend* frontend, const TenantPolicy* tenant,
                         OpenAiRequest request,
                         std::unique_ptr<AnswerFormat> format,
                         std::shared_ptr<http::HttpExchange> exchange) {
  auto call = std::make_shared<Call>(frontend, std::move(request),
                                     std::move(format), std::move(exchange));
  call->Start(tenant);
}

}  // namespace paceline::server::openai
