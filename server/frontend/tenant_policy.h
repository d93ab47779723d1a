#ifndef PACELINE_SERVER_FRONTEND_TENANT_POLICY_H_
#define PACELINE_SERVER_FRONTEND_TENANT_POLICY_H_

// A tenant's per-request rules, applied by the server before a request
// reaches the scheduler (which enforces the queue-level limits: running,
// queued, tokens per minute; see scheduler/tenant_queues.h).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "scheduler/request.h"

namespace paceline::server {

struct TenantPolicy {
  std::string name;
  double weight = 1;               // its share (the intake pool's too)
  double default_pace = 0;         // tokens/s for requests that set none
  double max_pace = 0;             // cap on a request's pace; 0 = no cap
  double min_pace = 1;             // slowest pace a paced request may ask
  int32_t max_stop_strings = 16;   // stop strings per request
  int32_t max_stop_string_bytes = 256;  // bytes of each stop string
  int32_t max_stop_token_ids = 64;      // stop token ids per request
  int32_t default_burst = 1;       // burst for requests that set none
  int32_t max_prompt_tokens = 0;   // 0 = the model's context
  int32_t max_tokens_limit = 0;    // cap on max_tokens; 0 = the context
  int32_t default_max_tokens = 256;
  int32_t default_max_draft_tokens = 0;  // speculation for requests that
                                         // set none
  // The highest class its requests run in (a higher one asked is lowered).
  scheduler::PriorityClass max_priority = scheduler::PriorityClass::kInteractive;
  // The prefix-cache salt: the tenant's name unless it shares a scope.
  std::string cache_salt;
};

// TenantConfig.max_priority: "" or "interactive", "standard", "batch";
// nullopt for anything else.
inline std::optional<scheduler::PriorityClass> ParseMaxPriority(
    std::string_view name) {
  if (name.empty() || name == "interactive") {
    return scheduler::PriorityClass::kInteractive;
  }
  if (name == "standard") return scheduler::PriorityClass::kStandard;
  if (name == "batch") return scheduler::PriorityClass::kBatch;
  return std::nullopt;
}

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_TENANT_POLICY_H_
