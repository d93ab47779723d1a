#include "engine/backend.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernel_choice.h"
#include "engine/model/kv_layout.h"
#if PACELINE_HAVE_CUDA
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cuda_engine.h"
#endif

namespace paceline::engine {
namespace {

// Device memory left for activations, cuBLAS workspace and CUDA graphs.
[[maybe_unused]] constexpr uint64_t kCudaWorkspaceReserve = uint64_t{1} << 30;

// MemAvailable from /proc/meminfo, in bytes; 0 if unknown.
uint64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

std::string Mib(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

int64_t BlocksPerSequence(int64_t context, int32_t block_size) {
  return (context + block_size - 1) / block_size;
}

// The pool's blocks of `block_bytes` each (explicit, or from the budget
// over `available` bytes), one full-context sequence holding at most
// `blocks_per_sequence` of them; fills the plan's KV fields.
absl::StatusOr<int64_t> SizePool(const BackendOptions& options,
                                 const ModelConfig& mc, uint64_t available,
                                 uint64_t kv_per_token, uint64_t block_bytes,
                                 int64_t blocks_per_sequence,
                                 MemoryPlan* plan) {
  int64_t num_blocks = options.kv_blocks;
  if (num_blocks > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_cache: ", num_blocks, " blocks is too many"));
  }
  if (num_blocks <= 0) {
    ASSIGN_OR_RETURN(
        num_blocks,
        KvPoolBlocksOfSize(options, blocks_per_sequence,
                           KvBudgetBytes(options, available), block_bytes));
  }
  plan->kv_bytes_per_token = kv_per_token;
  plan->context = mc.context_length;
  plan->sequences = num_blocks / blocks_per_sequence;
  plan->kv_bytes_per_sequence = block_bytes * blocks_per_sequence;
  plan->kv_bytes_per_sequence_full =
      kv_per_token * static_cast<uint64_t>(mc.context_length);
  plan->kv_bytes = block_bytes * num_blocks;
  plan->total_bytes = plan->weights_bytes + plan->kv_bytes;
  plan->rule_of_thumb_bytes =
      plan->weights_bytes + plan->weights_bytes * 3 / 10;
  return num_blocks;
}

// The state slots of a hybrid model, for the start-up log.
std::string StateLine(const ModelConfig& mc, int32_t slots) {
  const uint64_t bytes = static_cast<uint64_t>(mc.RecurrentStateBytes());
  return absl::StrFormat(
      "recurrent state: %d slots of %s (%d DeltaNet layer%s; max_running + "
      "%d for speculation snapshots; idle ones keep prefix snapshots), %s "
      "counted before the KV pool",
      slots, Mib(bytes), mc.NumRecurrentLayers(),
      mc.NumRecurrentLayers() == 1 ? "" : "s", kSpeculationStateSlots,
      Mib(bytes * static_cast<uint64_t>(slots)));
}

absl::Status MakeCpu(const BackendOptions& options,
                     std::shared_ptr<const ModelWeights> weights,
                     Backend* out) {
  const ModelConfig& mc = weights->config();
  out->plan.weights_bytes = weights->MatMulBytes();  // every expert resident
  const GgmlType kv_type = options.kv_type.value_or(cpu::kDefaultKvType);
  out->plan.kv_dtype = kv_type;
  // A hybrid model's DeltaNet layers keep no K/V (a state slot instead).
  const uint64_t kv_per_token =
      2ull * static_cast<uint64_t>(mc.n_layers - mc.NumRecurrentLayers()) *
      mc.n_kv_heads * cpu::KvCache::RowBytes(kv_type, mc.head_dim);
  cpu::CpuEngineOptions cpu_options;
  cpu_options.kv_window_release = options.kv_window_release;
  // Sliding layers' blocks beyond their window go back to the pool: a
  // block holds one KV group's layers (kv_layout.h).
  const KvLayout layout = PlanKvLayout(mc, cpu_options.kv_window_release);
  out->plan.kv_groups = layout.num_groups();
  out->plan.kv_slots = layout.slots;
  const uint64_t block_bytes = 2ull * layout.slots * mc.n_kv_heads *
                               cpu::KvCache::RowBytes(kv_type, mc.head_dim) *
                               options.block_size;
  const int64_t blocks_per_sequence =
      BlocksToHold(layout, options.block_size, mc.context_length,
                   options.max_tokens_per_step);
  cpu_options.kv_type = kv_type;
  cpu_options.block_size = options.block_size;
  cpu_options.max_tokens_per_step = options.max_tokens_per_step;
  cpu_options.num_threads = options.threads;
  cpu_options.pack_weights = options.pack_weights;
  // Ignored (none) for a model without DeltaNet layers.
  cpu_options.num_state_slots = StateSlots(options);
  if (options.measure_kernels) {
    ASSIGN_OR_RETURN(const cpu::KernelChoices choices,
                     cpu::ChooseKernels(cpu::CpuEngine::Matrices(*weights),
                                        {.threads = options.threads,
                                         .cache_dir = options.state_dir}));
    for (const std::string& w : choices.warnings) {
      out->log_lines.push_back(absl::StrCat("backend cpu: warning: ", w));
    }
    out->log_lines.push_back(
        absl::StrCat("backend cpu: ", cpu::KernelChoicesLine(choices)));
  }
  // The engine repacks matrices for this CPU's kernels into memory of its
  // own, allocated after this reading of MemAvailable.
  const uint64_t packed = cpu::CpuEngine::PackedBytes(*weights, cpu_options);
  // A hybrid model's state slots (running sequences, speculation and
  // prefix snapshots: any may be touched) come out of the budget first,
  // as on the CUDA engine.
  const uint64_t state =
      mc.NumRecurrentLayers() > 0
          ? static_cast<uint64_t>(mc.RecurrentStateBytes()) *
                static_cast<uint64_t>(cpu_options.num_state_slots)
          : 0;
  const uint64_t available = MemAvailableBytes();
  ASSIGN_OR_RETURN(
      out->num_blocks,
      SizePool(options, mc,
               available > packed + state ? available - packed - state : 0,
               kv_per_token, block_bytes, blocks_per_sequence, &out->plan));
  cpu_options.num_blocks = static_cast<int32_t>(out->num_blocks);
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuEngine> engine,
                   cpu::CpuEngine::Create(std::move(weights), cpu_options));
  out->log_lines.push_back(absl::StrFormat(
      "backend cpu: %d engine threads; %s of matrices repacked for this "
      "CPU's kernels (engine ready in %.2f s)",
      engine->num_threads(), Mib(engine->packed_bytes()),
      absl::ToDoubleSeconds(absl::Now() - start)));
  out->log_lines.push_back(absl::StrCat(
      "backend cpu: kernels (", cpu::IsaLevelName(cpu::EffectiveIsaLevel()),
      " on this CPU, ", cpu::CpuModelName(), "): ", engine->kernel_summary()));
  if (engine->num_state_slots() > 0) {
    out->log_lines.push_back(StateLine(mc, engine->num_state_slots()));
  }
  out->engine = std::move(engine);
  return absl::OkStatus();
}

#if PACELINE_HAVE_CUDA
absl::Status MakeCuda(const BackendOptions& options,
                      std::shared_ptr<const ModelWeights> weights,
                      Backend* out) {
  cuda::CudaEngineOptions cuda_options;
  cuda_options.kv_dtype = options.kv_type;  // CheckKvDtype refuses others
  // A hybrid model's recurrent-state slots, as MakeCpu's (none otherwise).
  if (weights->config().NumRecurrentLayers() > 0) {
    cuda_options.num_state_slots = StateSlots(options);
  }
  const cuda::CudaEngineFootprint f =
      cuda::CudaEngine::Footprint(*weights, cuda_options);
  // Before sizing the pool: a Q8_0 row of a head that is not whole blocks
  // has no size.
  RETURN_IF_ERROR(cuda::CudaEngine::CheckKvDtype(*weights, f.kv_dtype));
  uint64_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(cuda::CudaEngine::DeviceMemory(0, &free_bytes, &total_bytes));
  const uint64_t reserved =
      f.weight_bytes + f.state_bytes + kCudaWorkspaceReserve;
  const uint64_t available = free_bytes > reserved ? free_bytes - reserved : 0;
  out->plan.weights_bytes = f.weight_bytes;
  out->plan.kv_dtype = f.kv_dtype;
  // As MakeCpu: sliding layers' blocks beyond their window go back to the
  // pool, a block holding one KV group's layer slots (kv_layout.h).
  const ModelConfig& mc = weights->config();
  cuda_options.kv_window_release = options.kv_window_release;
  const KvLayout layout = PlanKvLayout(mc, cuda_options.kv_window_release);
  out->plan.kv_groups = layout.num_groups();
  out->plan.kv_slots = layout.slots;
  // Per attention layer (a hybrid's DeltaNet layers keep none).
  const int64_t kv_layers = mc.n_layers - mc.NumRecurrentLayers();
  const uint64_t block_bytes =
      f.kv_bytes_per_token /
      static_cast<uint64_t>(std::max<int64_t>(1, kv_layers)) * layout.slots *
      options.block_size;
  ASSIGN_OR_RETURN(
      out->num_blocks,
      SizePool(options, mc, available, f.kv_bytes_per_token, block_bytes,
               BlocksToHold(layout, options.block_size, mc.context_length,
                            options.max_tokens_per_step),
               &out->plan));
  cuda_options.block_size = options.block_size;
  cuda_options.max_tokens_per_step = options.max_tokens_per_step;
  cuda_options.num_blocks = static_cast<int32_t>(out->num_blocks);
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaEngine> engine,
                   cuda::CudaEngine::Create(std::move(weights), cuda_options));
  out->log_lines.push_back(absl::StrCat(
      "backend cuda: device 0, ", Mib(free_bytes), " free of ",
      Mib(total_bytes),
      " before the KV pool; requests without penalties or logprobs are "
      "sampled on the GPU"));
  if (engine->num_state_slots() > 0) {
    out->log_lines.push_back(StateLine(mc, engine->num_state_slots()));
  }
  out->engine = std::move(engine);
  return absl::OkStatus();
}
#endif

// The backend to use for `asked` ("" = by availability), with the log line
// that says why when "" falls back to the CPU.
absl::StatusOr<std::string> ChooseBackend(const BackendOptions& options,
                                          std::vector<std::string>* log) {
  const std::string& asked = options.backend;
  const std::string& setting = options.backend_setting;
  if (asked.empty()) {
    if (CudaAvailable()) return std::string("cuda");
    log->push_back(BuildHasCuda()
                       ? "no CUDA device found: using the CPU backend"
                       : "this build has no CUDA backend: using the CPU");
    return std::string("cpu");
  }
  if (asked == "cpu") return asked;
  if (asked != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat(setting, " must be cpu or cuda, got '", asked, "'"));
  }
  if (!BuildHasCuda()) {
    return absl::FailedPreconditionError(absl::StrCat(
        setting,
        " is cuda but this build has no CUDA backend (nvcc was not found when "
        "it was built)"));
  }
  if (!CudaAvailable()) {
    return absl::FailedPreconditionError(
        absl::StrCat(setting, " is cuda but no CUDA device was found"));
  }
  return asked;
}

std::string MemoryLine(const BackendOptions& options, const Backend& b) {
  std::string line = absl::StrFormat(
      "memory: weights %s, KV %d bytes per token (%s), %d blocks of %d tokens "
      "= %s",
      Mib(b.plan.weights_bytes), b.plan.kv_bytes_per_token,
      DtypeName(b.plan.kv_dtype), b.num_blocks, b.block_size,
      Mib(b.plan.kv_bytes));
  if (options.kv_blocks <= 0) {
    absl::StrAppend(&line, " (", b.plan.sequences, " full-context sequences)");
  }
  if (b.plan.kv_groups > 1) {
    absl::StrAppend(
        &line,
        absl::StrFormat(
            "; sliding windows released: %d KV groups of %d layer slots, %s "
            "per full-context sequence (%s with every layer's full history)",
            b.plan.kv_groups, b.plan.kv_slots,
            Mib(b.plan.kv_bytes_per_sequence),
            Mib(b.plan.kv_bytes_per_sequence_full)));
  }
  return line;
}

}  // namespace

bool BuildHasCuda() { return PACELINE_HAVE_CUDA != 0; }

bool CudaAvailable() {
#if PACELINE_HAVE_CUDA
  auto devices = cuda::ListCudaDevices();
  return devices.ok() && !devices->empty();
#else
  return false;
#endif
}

int32_t StateSlots(const BackendOptions& options) {
  return static_cast<int32_t>(std::min<int64_t>(
      int64_t{std::max(1, options.max_running)} + kSpeculationStateSlots,
      std::numeric_limits<int32_t>::max()));
}

uint64_t KvBudgetBytes(const BackendOptions& options, uint64_t available) {
  if (options.kv_memory_bytes > 0) return options.kv_memory_bytes;
  return static_cast<uint64_t>(static_cast<double>(available) *
                               options.kv_memory_fraction);
}

absl::StatusOr<int64_t> KvPoolBlocks(const BackendOptions& options,
                                     int64_t context, uint64_t budget,
                                     uint64_t kv_bytes_per_token) {
  const int32_t block_size = options.block_size;
  if (block_size < 1 || kv_bytes_per_token == 0 || context < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_cache: block size ", block_size, ", ", kv_bytes_per_token,
        " KV bytes per token and a context of ", context,
        " must all be positive"));
  }
  return KvPoolBlocksOfSize(options, BlocksPerSequence(context, block_size),
                            budget, kv_bytes_per_token * block_size);
}

absl::StatusOr<int64_t> KvPoolBlocksOfSize(const BackendOptions& options,
                                           int64_t blocks_per_seq,
                                           uint64_t budget,
                                           uint64_t block_bytes) {
  const int32_t block_size = options.block_size;
  if (block_size < 1 || block_bytes == 0 || blocks_per_seq < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_cache: block size ", block_size, ", ", block_bytes,
                     " bytes per block and ", blocks_per_seq,
                     " blocks per sequence must all be positive"));
  }
  const int64_t useful = blocks_per_seq * std::max(1, options.max_running);
  const int64_t affordable = static_cast<int64_t>(budget / block_bytes);
  const int64_t num_blocks = std::min<int64_t>(
      {affordable, useful, std::numeric_limits<int32_t>::max()});
  if (num_blocks < blocks_per_seq) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kv_cache: the budget of ", Mib(budget), " holds ", num_blocks,
        " blocks of ", block_size,
        " tokens; one sequence of the model's context needs ", blocks_per_seq));
  }
  return num_blocks;
}

absl::StatusOr<Backend> MakeBackend(
    const BackendOptions& options,
    std::shared_ptr<const ModelWeights> weights) {
  if (options.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_cache: the block size must be >= 1, got ", options.block_size));
  }
  Backend out;
  out.block_size = options.block_size;
  out.plan.parameters = weights->config().ParameterCount();
  out.plan.weights_dtype = "file";
  ASSIGN_OR_RETURN(out.name, ChooseBackend(options, &out.log_lines));
  if (out.name == "cpu") {
    RETURN_IF_ERROR(MakeCpu(options, std::move(weights), &out));
  } else {
#if PACELINE_HAVE_CUDA
    RETURN_IF_ERROR(MakeCuda(options, std::move(weights), &out));
#endif
  }
  out.log_lines.push_back(MemoryLine(options, out));
  return out;
}

}  // namespace paceline::engine
