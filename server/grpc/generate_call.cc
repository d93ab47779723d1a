#include "server/grpc/generate_call.h"

#include <utility>

#include "absl/status/statusor.h"
#include "server/grpc/grpc_tsan.h"
#include "server/grpc/proto_convert.h"
#include "server/grpc/raw_rpc.h"

namespace paceline::server {

void GenerateCall::Start(absl::StatusOr<BuiltRequest> built) {
  if (built.ok()) built->delivery.max_delta_bytes = max_delta_bytes_;
  const absl::Status started =
      stream_.Start(std::move(built), this, /*observed=*/true);
  if (!started.ok()) FinishWith(ToGrpcStatus(started, context_));
  Release();
}

void GenerateCall::Release() {
  if (stream_.Release()) delete this;
}

void GenerateCall::Send(const Outgoing& out) {
  response_.Clear();
  switch (out.kind) {
    case Outgoing::Kind::kAccepted: {
      v1::Accepted* a = response_.mutable_accepted();
      a->set_request_id(out.accepted.id);
      a->set_prompt_tokens(out.accepted.prompt_tokens);
      a->set_cached_prompt_tokens(out.accepted.cached_prompt_tokens);
      if (Serialize()) StartWrite(&bytes_);
      return;
    }
    case Outgoing::Kind::kDelta: {
      v1::Delta* d = response_.mutable_delta();
      d->set_text(out.text);
      d->set_reasoning(out.reasoning);
      AddToolCallDeltas(out.tool_calls, d->mutable_tool_calls());
      d->mutable_token_ids()->Add(out.ids.begin(), out.ids.end());
      for (const engine::SampleResult& s : out.samples) {
        AddLogprob(s, d->mutable_logprobs());
      }
      if (Serialize()) StartWrite(&bytes_);
      return;
    }
    case Outgoing::Kind::kFinished:
      SendFinished(out);
      return;
  }
}

void GenerateCall::SendFinished(const Outgoing& out) {
  // A client that cancelled hears nothing more; a stream the server cut
  // (drain timeout, a reader too slow) gets a Finished with the usage so
  // far, then the status (which a stalled reader sees once it reads).
  if (!out.aborted.ok() &&
      (!out.was_accepted ||
       out.aborted.code() == absl::StatusCode::kCancelled)) {
    FinishWith(ToGrpcStatus(out.aborted, context_));
    return;
  }
  if (!out.was_accepted) {  // refused at intake
    FinishWith(ToGrpcStatus(out.finish.status, context_));
    return;
  }
  FillFinished(out.finish, frontend_->tokenizer(), out.first_delivered,
               out.last_delivered, response_.mutable_finished());
  MarkToolCallsFinish(out.called_tools, response_.mutable_finished());
  // A request that failed or was cut by shutdown ends with its status,
  // after the Finished message that says so.
  const bool bad = out.finish.reason == scheduler::FinishReason::kError ||
                   (out.finish.reason == scheduler::FinishReason::kCancelled &&
                    !out.finish.status.ok());
  if (!Serialize()) return;
  StartWriteAndFinish(
      &bytes_, grpc::WriteOptions(),
      bad ? ToGrpcStatus(out.finish.status, context_) : grpc::Status::OK);
}

// Serializing fails only past protobuf's 2 GiB, which a message of at most
// max_delta_bytes of output never reaches. Should it, the buffer waits for
// a write completion that never comes, until OnDone detaches it.
bool GenerateCall::Serialize() {
  const absl::Status serialized = SerializeMessage(response_, &bytes_);
  if (serialized.ok()) {
    HandOffToGrpc(this);  // a write starts next
    return true;
  }
  FinishWith(ToGrpcStatus(serialized, context_));
  return false;
}

void GenerateCall::FinishWith(const grpc::Status& status) {
  HandOffToGrpc(this);
  Finish(status);
}

void GenerateCall::OnWriteDone(bool ok) {
  TakeBackFromGrpc(this);
  stream_.buffer().OnWriteDone(ok);
}

void GenerateCall::OnCancel() { stream_.OnCancel(); }

void GenerateCall::OnDone() {
  TakeBackFromGrpc(this);
  Release();
}

}  // namespace paceline::server
