#ifndef PACELINE_ENGINE_BACKEND_H_
#define PACELINE_ENGINE_BACKEND_H_

// Backend selection: which engine runs a model (CPU or CUDA) and how large
// its KV pool is. The one place that knows both backends; the daemon and
// `paceline generate` create their engines here.
//
// Backend: BackendOptions::backend, or when "" CUDA if this build has it and
// a device is present, else the CPU (with a log line saying why). An
// explicit "cuda" without a device (or in a build without CUDA) is
// FailedPrecondition: the caller asked for something that cannot run here.
//
// KV pool, unless kv_blocks is given: kv_memory_bytes, or kv_memory_fraction
// of what is available — host MemAvailable less the CPU engine's packed
// matrices; for CUDA the device's free memory less the weights and a
// workspace reserve — capped at what max_running sequences of the model's
// full context use. At least one full-context sequence must fit
// (ResourceExhausted otherwise).
//
// Recurrent-state slots (a hybrid model's DeltaNet layers, Engine::
// num_state_slots): StateSlots(options), one per running sequence
// (max_running) plus kSpeculationStateSlots for the snapshots of sequences
// verifying drafts; the scheduler's pager holds as many and admits no more
// running sequences than there are slots. None for other models.
//
// Thread-safety: the functions here are safe to call from any thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/engine.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"

namespace paceline::engine {

struct BackendOptions {
  // "cpu", "cuda", or "" = cuda when available (CudaAvailable), else cpu.
  // Anything else is InvalidArgument.
  std::string backend;
  // How the caller's user spells that setting ("model.backend",
  // "--backend"): the errors about it name it.
  std::string backend_setting = "backend";
  int threads = 0;  // CPU engine threads; 0 = one per hardware thread
  // The CPU engine repacks matrices for its kernels (CpuEngineOptions::
  // pack_weights).
  bool pack_weights = true;
  int32_t block_size = 16;            // tokens per KV block
  // The KV cache's element type: kF32, kF16 or kQ8_0 on either backend
  // (Q8_0 needs a head size that is a multiple of 32), and on CUDA also
  // kBF16 for a model whose weights are BF16; anything else is
  // InvalidArgument. Unset: CpuEngineOptions' default on the CPU
  // (cpu::kDefaultKvType, F16), the device dtype on CUDA
  // (CudaEngineFootprint: F32, F16 or BF16).
  std::optional<GgmlType> kv_type;
  int32_t max_tokens_per_step = 512;  // the engine's step limit
  // Both engines give sliding layers' blocks beyond their window back to
  // the pool (CpuEngineOptions / CudaEngineOptions::kv_window_release).
  bool kv_window_release = true;

  // The KV pool. kv_blocks > 0: exactly that many blocks (at most
  // INT32_MAX, else InvalidArgument), with no budget and no full-context
  // minimum (for a caller that knows its requests). Otherwise
  // kv_memory_bytes when > 0, else kv_memory_fraction (in (0, 1]) of the
  // memory available to the backend, capped at max_running (less than 1
  // counts as 1) full-context sequences.
  int64_t kv_blocks = 0;
  uint64_t kv_memory_bytes = 0;
  double kv_memory_fraction = 0.5;
  // The scheduler's max_running: the KV cap above and the state slots.
  int32_t max_running = 1;
  // CPU: choose each weight type's kernel level by measuring the
  // candidates at start-up (cpu/kernel_choice.h) instead of taking the
  // highest; the choices are kept in state_dir when it is not "".
  bool measure_kernels = false;
  std::string state_dir;
};

// Recurrent-state slots beyond max_running: snapshots of sequences that
// verify speculative drafts (scheduler.cc, AddDrafts). Drafts ride on
// steps of a few tokens only (SchedulerOptions::
// speculation_max_step_tokens, 4 by default), each drafting sequence
// bringing at least two, so a few snapshots at once; a step without a
// spare slot drafts nothing.
inline constexpr int32_t kSpeculationStateSlots = 4;

// The state slots a hybrid model's engine gets: max_running (less than 1
// counts as 1) + kSpeculationStateSlots, at most INT32_MAX.
int32_t StateSlots(const BackendOptions& options);

struct Backend {
  std::unique_ptr<Engine> engine;
  std::string name;  // "cpu" or "cuda"
  // Weights, KV per token and dtype, context, full-context sequences and
  // KV bytes of the pool as created.
  MemoryPlan plan;
  int32_t block_size = 0;
  int64_t num_blocks = 0;
  // What a start-up log says about the choice and the memory, in order.
  std::vector<std::string> log_lines;
};

// Chooses the backend for `options` and creates its engine over `weights`.
// Errors: as above; InvalidArgument for a block size below 1; the engine's
// own Create errors, unchanged.
absl::StatusOr<Backend> MakeBackend(
    const BackendOptions& options, std::shared_ptr<const ModelWeights> weights);

// Whether this build has the CUDA backend.
bool BuildHasCuda();

// Whether this build has the CUDA backend and the machine a CUDA device.
bool CudaAvailable();

// The KV budget in bytes: kv_memory_bytes when > 0, else kv_memory_fraction
// of `available` bytes (rounded down).
uint64_t KvBudgetBytes(const BackendOptions& options, uint64_t available);

// KV blocks of options.block_size tokens for `budget` bytes at
// `kv_bytes_per_token`: floor(budget / block bytes), capped at
// options.max_running sequences of `context` tokens (and at INT32_MAX).
// ResourceExhausted when one `context`-token sequence does not fit;
// InvalidArgument unless block_size, context and kv_bytes_per_token are
// positive.
absl::StatusOr<int64_t> KvPoolBlocks(const BackendOptions& options,
                                     int64_t context, uint64_t budget,
                                     uint64_t kv_bytes_per_token);
// The same in blocks of `block_bytes` bytes, one `context`-token sequence
// holding `blocks_per_sequence` of them (with sliding windows released,
// fewer than context / block_size: model/kv_layout.h BlocksToHold).
absl::StatusOr<int64_t> KvPoolBlocksOfSize(const BackendOptions& options,
                                           int64_t blocks_per_sequence,
                                           uint64_t budget,
                                           uint64_t block_bytes);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_BACKEND_H_
