#include "scheduler/offline_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/serving_loop.h"

namespace paceline::scheduler {

int64_t KvBlocksToRunTogether(absl::Span<const OfflineRequest> requests,
                              int32_t block_size) {
  int64_t blocks = 0;
  for (const OfflineRequest& r : requests) {
    const int64_t positions =
        static_cast<int64_t>(r.prompt.size()) + r.stop.max_tokens - 1;
    blocks += (positions + block_size - 1) / block_size;
  }
  return blocks;
}

int64_t KvBlocksToRunTogether(absl::Span<const OfflineRequest> requests,
                              int32_t block_size,
                              const engine::KvLayout& layout,
                              int64_t step_tokens) {
  int64_t blocks = 0;
  for (const OfflineRequest& r : requests) {
    const int64_t positions =
        static_cast<int64_t>(r.prompt.size()) + r.stop.max_tokens - 1;
    blocks += engine::BlocksToHold(layout, block_size, positions, step_tokens);
  }
  return blocks;
}

absl::StatusOr<std::vector<OfflineResult>> RunOffline(
    std::unique_ptr<engine::Engine> engine, const engine::Tokenizer& tokenizer,
    std::vector<OfflineRequest> requests, const OfflineOptions& options,
    OfflineStats* stats) {
  ServingLoopOptions loop_options;
  loop_options.scheduler.max_batched_tokens = options.max_batched_tokens;
  loop_options.scheduler.max_running = options.max_running;
  loop_options.scheduler.speculation_max_step_tokens =
      options.speculation_max_step_tokens;
  loop_options.engine_sampling = options.engine_sampling;
  loop_options.scheduler.tenants = {TenantConfig{.name = "offline"}};
  ASSIGN_OR_RETURN(
      std::unique_ptr<ServingLoop> loop,
      ServingLoop::Create(std::move(engine), &tokenizer, loop_options));

  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::vector<RequestSpec> specs;
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestSpec spec;
    spec.tenant = "offline";
    spec.prompt = std::move(requests[i].prompt);
    spec.sampling = requests[i].sampling;
    spec.stop = std::move(requests[i].stop);
    spec.max_draft_tokens = requests[i].max_draft_tokens;
    spec.max_forced_tokens = requests[i].max_forced_tokens;
    sinks.push_back(std::make_shared<CollectingSink>());
    spec.sink = sinks.back();
    if (absl::Status s = loop->scheduler().CheckRequest(spec); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("request ", i, ": ", s.message()));
    }
    specs.push_back(std::move(spec));
  }
  for (RequestSpec& spec : specs)
    RETURN_IF_ERROR(loop->Submit(std::move(spec)).status());

  const absl::Time start = absl::Now();
  const int64_t steps = loop->RunUntilIdle();
  const absl::Time end = absl::Now();

  std::vector<OfflineResult> results(sinks.size());
  for (size_t i = 0; i < sinks.size(); ++i) {
    if (!sinks[i]->finished()) {
      return absl::InternalError(
          absl::StrCat("request ", i, " did not finish"));
    }
    results[i].tokens = sinks[i]->tokens();
    results[i].finish = sinks[i]->finish();
  }
  if (stats != nullptr) {
    *stats = OfflineStats();
    stats->steps = steps;
    stats->elapsed = end - start;
    stats->preemptions = loop->scheduler().counters().preemptions;
    for (const OfflineResult& r : results) {
      stats->prompt_tokens += r.finish.usage.prompt_tokens;
      stats->generated_tokens += r.finish.usage.completion_tokens;
    }
  }
  return results;
}

}  // namespace paceline::scheduler
