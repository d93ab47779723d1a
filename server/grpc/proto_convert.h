#ifndef PACELINE_SERVER_GRPC_PROTO_CONVERT_H_
#define PACELINE_SERVER_GRPC_PROTO_CONVERT_H_

// Between the internal types (engine, scheduler, stream buffer) and the
// wire messages of paceline/v1, and absl::Status -> grpc::Status.

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/sampling/sampler.h"
#include "chat/output_parser.h"
#include "engine/tokenizer/tokenizer.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "paceline/v1/model.pb.h"
#include "paceline/v1/paceline.pb.h"
#include "scheduler/token_sink.h"
#include "server/delivery/stream_buffer.h"

namespace paceline::server {

// Leaves `out` unset for InfinitePast / InfiniteFuture.
void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out);

void AddLogprob(const engine::SampleResult& sample,
                google::protobuf::RepeatedPtrField<v1::TokenLogprob>* out);

// The Finished message of a request that ended as `finish` says, delivered
// between `first_delivered` and `last_delivered`.
void FillFinished(const scheduler::FinishInfo& finish,
                  const engine::Tokenizer& tokenizer,
                  absl::Time first_delivered, absl::Time last_delivered,
                  v1::Finished* out);

// A chat request whose output held a complete tool call and ended by itself
// (EOS or a stop) finished with FINISH_REASON_TOOL_CALLS; a cut one
// (length, cancelled, error) keeps its reason.
void MarkToolCallsFinish(bool called_tools, v1::Finished* out);

// A chat delta's tool-call parts, as the wire streams them.
void AddToolCallDeltas(
    const std::vector<chat::ChatToolCallDelta>& calls,
    google::protobuf::RepeatedPtrField<v1::ToolCallDelta>* out);

// A chat request's unary answer from its whole split output (`chat`, a
// kDelta's fields): content, reasoning, and the complete tool calls — calls
// listed in broken_tool_calls are left out (chat_output.h).
void FillChatAnswer(const Outgoing& chat, v1::CompleteResponse* out);

// The same code and message; a retry hint (scheduler/retry_hint.h) is also
// put on `context`'s trailing metadata as "retry-after-ms".
grpc::Status ToGrpcStatus(const absl::Status& status,
                          grpc::ServerContextBase* context);

void FillModelInfo(const engine::ModelConfig& config,
                   const engine::Tokenizer& tokenizer, v1::ModelInfo* out);
void FillMemoryPlan(const engine::MemoryPlan& plan, v1::MemoryPlan* out);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_PROTO_CONVERT_H_
