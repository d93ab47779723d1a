#ifndef PACELINE_SERVER_ENGINE_FACTORY_H_
#define PACELINE_SERVER_ENGINE_FACTORY_H_

// Chooses the daemon's engine backend and sizes its KV pool.
//
// Backend: the config's model.backend, or when unset CUDA if this build has
// it and a device is present, else the CPU (with a log line saying why).
// An explicit "cuda" without a device (or in a build without CUDA) is an
// error: the operator asked for something that cannot run here.
//
// KV pool: kv_cache.memory_bytes, or memory_fraction (default 0.5) of what
// is available — host MemAvailable for the CPU; for CUDA the device's free
// memory minus the weights and a workspace reserve — capped at what
// scheduler.max_running sequences of full context can use. At least one
// full-context sequence must fit (ResourceExhausted otherwise).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/model/memory_plan.h"
#include "engine/model/weights.h"
#include "paceline/v1/config.pb.h"

namespace paceline::server {

struct ServingEngine {
  std::unique_ptr<engine::Engine> engine;
  std::string backend;  // "cpu" or "cuda"
  engine::MemoryPlan plan;
  int32_t block_size = 0;
  int64_t num_blocks = 0;
  // What the start-up log says about the choice and the memory.
  std::vector<std::string> log_lines;
};

absl::StatusOr<ServingEngine> MakeServingEngine(
    const v1::ServerConfig& config,
    std::shared_ptr<const engine::ModelWeights> weights);

// Whether this build has the CUDA backend.
bool BuildHasCuda();

}  // namespace paceline::server

#endif  // PACELINE_SERVER_ENGINE_FACTORY_H_
