#include "server/grpc/complete_call.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/frontend/answer_size.h"
#include "server/grpc/grpc_tsan.h"
#include "server/grpc/proto_convert.h"
#include "server/grpc/raw_rpc.h"

namespace paceline::server {

void CompleteCall::Start(absl::StatusOr<BuiltRequest> built) {
  Prepare(built);
  const absl::Status started =
      stream_.Start(std::move(built), this, /*observed=*/false);
  if (!started.ok()) Answer(ToGrpcStatus(started, context_));
  Release();
}

void CompleteCall::Prepare(absl::StatusOr<BuiltRequest>& built) {
  if (!built.ok()) return;
  if (const std::optional<std::string> over =
          AnswerOverLimit(1, built->spec, frontend_->max_response_bytes())) {
    built = absl::InvalidArgumentError(
        absl::StrCat("stopping.max_tokens: ", *over,
                     ": lower max_tokens or top_logprobs, or call Generate"));
    return;
  }
  chat_ = built->delivery.chat_output.has_value();
  built->delivery.pace_tokens_per_s = 0;  // answered at once
}

void CompleteCall::OnCancel() { stream_.OnCancel(); }

void CompleteCall::OnDone() {
  TakeBackFromGrpc(this);
  Release();
}

void CompleteCall::Release() {
  if (stream_.Release()) delete this;
}

void CompleteCall::Send(const Outgoing& out) {
  switch (out.kind) {
    case Outgoing::Kind::kAccepted: {
      v1::Accepted* a = response_.mutable_accepted();
      a->set_request_id(out.accepted.id);
      a->set_prompt_tokens(out.accepted.prompt_tokens);
      a->set_cached_prompt_tokens(out.accepted.cached_prompt_tokens);
      break;
    }
    case Outgoing::Kind::kDelta:
      Add(out);
      break;
    case Outgoing::Kind::kFinished:
      Answer(Fill(out));  // the last message: no write to complete
      return;
  }
  stream_.buffer().OnWriteDone(true);
}

void CompleteCall::Add(const Outgoing& delta) {
  if (chat_) {
    AppendChatDelta(
        chat::ChatOutputDelta{delta.text, delta.reasoning, delta.tool_calls,
                              delta.broken_tool_calls},
        &chat_output_);
  } else {
    response_.mutable_text()->append(delta.text);
  }
  response_.mutable_token_ids()->Add(delta.ids.begin(), delta.ids.end());
  for (const engine::SampleResult& s : delta.samples) {
    AddLogprob(s, response_.mutable_logprobs());
  }
}

grpc::Status CompleteCall::Fill(const Outgoing& finished) {
  // Cut short (the client's cancel, a drain): the status alone.
  if (!finished.aborted.ok()) return ToGrpcStatus(finished.aborted, context_);
  const scheduler::FinishInfo& info = finished.finish;
  if (!finished.was_accepted) return ToGrpcStatus(info.status, context_);
  if (chat_) FillChatAnswer(chat_output_, &response_);
  FillFinished(info, frontend_->tokenizer(), absl::InfinitePast(),
               absl::InfinitePast(), response_.mutable_finished());
  MarkToolCallsFinish(finished.called_tools, response_.mutable_finished());
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
