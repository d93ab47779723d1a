#include "server/grpc/complete_call.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/frontend/answer_size.h"
#include "server/delivery/pacer.h"
#include "server/grpc/grpc_tsan.h"
#include "server/grpc/proto_convert.h"
#include "server/grpc/raw_rpc.h"

namespace paceline::server {

// The request's sink, and the pacer's target for the answer.
class CompleteCall::Sink final : public scheduler::TokenSink,
                                 public Deliverable,
                                 public std::enable_shared_from_this<Sink> {
 public:
  Sink(CompleteCall* call, Pacer* pacer, const DeliveryOptions& delivery)
      : pacer_(pacer),
        parser_(delivery.chat_output.has_value()
                    ? std::make_unique<chat::ChatOutputParser>(
                          *delivery.chat_output, delivery.tool_call_id_seed)
                    : nullptr),
        call_(call) {}

  // --- TokenSink (engine thread): append, hand over at the finish ---
  void OnAccepted(const scheduler::AcceptInfo& info) override {
    absl::MutexLock lock(&mu_);
    if (call_ == nullptr) return;
    v1::Accepted* a = call_->response_.mutable_accepted();
    a->set_request_id(info.id);
    a->set_prompt_tokens(info.prompt_tokens);
    a->set_cached_prompt_tokens(info.cached_prompt_tokens);
  }
  void OnTokens(const scheduler::TokenDelta& delta) override {
    absl::MutexLock lock(&mu_);
    if (call_ == nullptr) return;
    v1::CompleteResponse* r = &call_->response_;
    if (parser_ != nullptr) {
      AppendChatDelta(parser_->Push(delta.text), &chat_);
    } else {
      r->mutable_text()->append(delta.text.data(), delta.text.size());
    }
    r->mutable_token_ids()->Add(delta.ids.begin(), delta.ids.end());
    for (const engine::SampleResult& s : delta.samples) {
      AddLogprob(s, r->mutable_logprobs());
    }
  }
  void OnFinished(const scheduler::FinishInfo& info) override {
    {
      absl::MutexLock lock(&mu_);
      if (call_ == nullptr) return;
      if (parser_ != nullptr) AppendChatDelta(parser_->Finish(), &chat_);
      finish_ = info;
    }
    pacer_->Wake(shared_from_this());
  }

  // --- Deliverable (pacer thread): the answer ---
  absl::Time Release(absl::Time /*now*/) override {
    CompleteCall* call = nullptr;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (call_ == nullptr || !finish_.has_value()) {
        return absl::InfiniteFuture();
      }
      call = std::exchange(call_, nullptr);
      if (parser_ != nullptr) {
        FillChatAnswer(chat_, &call->response_);
        chat_.called_tools = parser_->saw_tool_calls();
      }
      status = call->Fill(*finish_, chat_.called_tools);
    }
    call->Answer(status);
    return absl::InfiniteFuture();
  }

  // Ends the call with `status` unless it has ended (any thread but the
  // engine's).
  void Abort(const absl::Status& status) {
    CompleteCall* call = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (call_ == nullptr) return;
      call = std::exchange(call_, nullptr);
    }
    call->Answer(ToGrpcStatus(status, call->context_));
  }

 private:
  Pacer* const pacer_;
  // Chat requests: the output parser and its split so far.
  const std::unique_ptr<chat::ChatOutputParser> parser_;
  absl::Mutex mu_;
  Outgoing chat_ ABSL_GUARDED_BY(mu_);
  CompleteCall* call_ ABSL_GUARDED_BY(mu_);  // null once handed over
  std::optional<scheduler::FinishInfo> finish_ ABSL_GUARDED_BY(mu_);
};

void CompleteCall::Start(absl::StatusOr<PacelineService::Admitted> admitted) {
  if (start_.CancelledEarly()) {
    admitted = absl::CancelledError("the client cancelled");
  }
  if (Submit(std::move(admitted)) && start_.MarkStarted()) CancelSubmitted();
  Release();
}

bool CompleteCall::Submit(absl::StatusOr<PacelineService::Admitted> admitted) {
  if (!admitted.ok()) {
    Answer(ToGrpcStatus(admitted.status(), context_));
    return false;
  }
  if (const std::optional<std::string> over = AnswerOverLimit(
          1, admitted->built.spec, service_->max_response_bytes())) {
    Answer(ToGrpcStatus(
        absl::InvalidArgumentError(absl::StrCat(
            "stopping.max_tokens: ", *over,
            ": lower max_tokens or top_logprobs, or call Generate")),
        context_));
    return false;
  }
  auto sink =
      std::make_shared<Sink>(this, service_->pacer(), admitted->built.delivery);
  admitted->built.spec.sink = sink;
  admitted->built.spec.pace_tokens_per_s = 0;  // answered at once
  // Held before the submission: the request may end (and Abort answer)
  // as soon as the loop has it.
  sink_ = sink;
  absl::StatusOr<scheduler::RequestId> id =
      service_->Submit(std::move(admitted->built.spec),
                       [sink](const absl::Status& s) { sink->Abort(s); });
  if (!id.ok()) {
    sink->Abort(id.status());
    return false;
  }
  id_ = *id;
  return true;
}

void CompleteCall::CancelSubmitted() {
  service_->loop().Cancel(id_);
  sink_->Abort(absl::CancelledError("the client cancelled"));
}

void CompleteCall::OnCancel() {
  if (start_.OnCancel()) CancelSubmitted();
}

void CompleteCall::OnDone() {
  TakeBackFromGrpc(this);
  Release();
}

void CompleteCall::Release() {
  if (!start_.Release()) return;
  if (id_ != 0) service_->Unregister(id_);
  delete this;
}

grpc::Status CompleteCall::Fill(const scheduler::FinishInfo& info,
                                bool called_tools) {
  if (info.reason == scheduler::FinishReason::kError &&
      !response_.has_accepted()) {
    return ToGrpcStatus(info.status, context_);  // refused at intake
  }
  FillFinished(info, service_->tokenizer(), absl::InfinitePast(),
               absl::InfinitePast(), response_.mutable_finished());
  MarkToolCallsFinish(called_tools, response_.mutable_finished());
  const bool bad =
      info.reason == scheduler::FinishReason::kError ||
      (info.reason == scheduler::FinishReason::kCancelled && !info.status.ok());
  return bad ? ToGrpcStatus(info.status, context_) : grpc::Status::OK;
}

void CompleteCall::Answer(grpc::Status status) {
  if (status.ok()) {
    status = ToGrpcStatus(SerializeMessage(response_, bytes_), context_);
  }
  HandOffToGrpc(this);
  Finish(status);
}

}  // namespace paceline::server
