#ifndef PACELINE_SERVER_REQUEST_BUILDER_H_
#define PACELINE_SERVER_REQUEST_BUILDER_H_

// GenerateRequest (the wire) -> scheduler::RequestSpec + delivery options,
// with every field checked and the tenant's rules applied. Every error is
// InvalidArgument naming the field ("sampling.top_p must be in (0, 1], got
// 0"); a request over a tenant limit (prompt tokens, max_tokens) is
// InvalidArgument too, naming the limit: it can never succeed as sent.
// Checks run in this order, and the first failure is returned: input (text
// or token_ids, then the prompt limit), sampling and logprobs, stopping,
// priority, delivery. Nothing here touches queue state; the scheduler's own
// checks (context length, queue limits) follow at submission.

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"
#include "paceline/v1/paceline.pb.h"
#include "scheduler/request.h"
#include "server/delivery/stream_buffer.h"
#include "server/tenant_policy.h"

namespace paceline::server {

struct BuiltRequest {
  scheduler::RequestSpec spec;  // no sink yet
  DeliveryOptions delivery;
};

struct ModelLimits {
  int32_t vocab_size = 0;
  int64_t context_length = 0;
};

// `seed` is used when the request names none (the server's random pick).
absl::StatusOr<BuiltRequest> BuildRequest(const v1::GenerateRequest& request,
                                          const TenantPolicy& tenant,
                                          const engine::Tokenizer& tokenizer,
                                          const ModelLimits& model,
                                          uint64_t seed);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_REQUEST_BUILDER_H_
