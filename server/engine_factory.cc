#include "server/engine_factory.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_engine.h"
#if PACELINE_HAVE_CUDA
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cuda_engine.h"
#endif

namespace paceline::server {
namespace {

// Device memory left for activations, cuBLAS workspace and CUDA graphs.
constexpr uint64_t kCudaWorkspaceReserve = uint64_t{1} << 30;

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

bool HaveCudaDevice() {
#if PACELINE_HAVE_CUDA
  auto devices = engine::cuda::ListCudaDevices();
  return devices.ok() && !devices->empty();
#else
  return false;
#endif
}

// The budget for the KV pool, given what is `available` to the backend.
uint64_t KvBudget(const v1::ServerConfig& config, uint64_t available) {
  if (config.kv_cache().has_memory_bytes()) {
    return config.kv_cache().memory_bytes();
  }
  const double fraction = config.kv_cache().has_memory_fraction()
                              ? config.kv_cache().memory_fraction()
                              : 0.5;
  return static_cast<uint64_t>(static_cast<double>(available) * fraction);
}

// Blocks for `budget` bytes at `kv_per_token`, capped by what max_running
// full-context sequences use; fills the plan's KV fields.
absl::StatusOr<int64_t> SizePool(const v1::ServerConfig& config,
                                 const engine::ModelConfig& mc,
                                 uint64_t budget, uint64_t kv_per_token,
                                 int32_t block_size, engine::MemoryPlan* plan) {
  const int64_t blocks_per_seq =
      (mc.context_length + block_size - 1) / block_size;
  const int64_t useful =
      blocks_per_seq * std::max(1, config.scheduler().max_running());
  const int64_t affordable =
      static_cast<int64_t>(budget / (kv_per_token * block_size));
  const int64_t num_blocks = std::min<int64_t>(
      {affordable, useful, std::numeric_limits<int32_t>::max()});
  if (num_blocks < blocks_per_seq) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kv_cache: the budget of ", Mib(budget), " holds ", num_blocks,
        " blocks of ", block_size, " tokens; one sequence of the model's "
        "context needs ",
        blocks_per_seq));
  }
  plan->kv_bytes_per_token = kv_per_token;
  plan->context = mc.context_length;
  plan->sequences = num_blocks / blocks_per_seq;
  plan->kv_bytes = kv_per_token * block_size * num_blocks;
  plan->total_bytes = plan->weights_bytes + plan->kv_bytes;
  plan->rule_of_thumb_bytes =
      plan->weights_bytes + plan->weights_bytes * 3 / 10;
  return num_blocks;
}

absl::Status MakeCpu(const v1::ServerConfig& config,
                     std::shared_ptr<const engine::ModelWeights> weights,
                     ServingEngine* out) {
  const engine::ModelConfig& mc = weights->config();
  out->plan.weights_bytes = weights->MatMulBytesPerToken();
  out->plan.kv_dtype = "f32";
  const uint64_t kv_per_token =
      2ull * mc.n_layers * mc.n_kv_heads * mc.head_dim * sizeof(float);
  engine::cpu::CpuEngineOptions options;
  options.block_size = out->block_size;
  options.num_threads = config.threads();
  // The engine repacks matrices for this CPU's kernels into memory of its
  // own, allocated after this reading of MemAvailable.
  const uint64_t packed =
      engine::cpu::CpuEngine::PackedBytes(*weights, options);
  const uint64_t available = MemAvailableBytes();
  ASSIGN_OR_RETURN(
      out->num_blocks,
      SizePool(config, mc,
               KvBudget(config, available > packed ? available - packed : 0),
               kv_per_token, out->block_size, &out->plan));
  options.num_blocks = static_cast<int32_t>(out->num_blocks);
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<engine::cpu::CpuEngine> engine,
                   engine::cpu::CpuEngine::Create(std::move(weights), options));
  out->log_lines.push_back(absl::StrFormat(
      "backend cpu: %d engine threads; %s of matrices repacked for this "
      "CPU's kernels (engine ready in %.2f s)",
      engine->num_threads(), Mib(engine->packed_bytes()),
      absl::ToDoubleSeconds(absl::Now() - start)));
  out->engine = std::move(engine);
  return absl::OkStatus();
}

#if PACELINE_HAVE_CUDA
absl::Status MakeCuda(const v1::ServerConfig& config,
                      std::shared_ptr<const engine::ModelWeights> weights,
                      ServingEngine* out) {
  const engine::ModelConfig& mc = weights->config();
  const engine::cuda::CudaEngineFootprint f =
      engine::cuda::CudaEngine::Footprint(*weights);
  uint64_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(
      engine::cuda::CudaEngine::DeviceMemory(0, &free_bytes, &total_bytes));
  const uint64_t reserved = f.weight_bytes + kCudaWorkspaceReserve;
  const uint64_t available = free_bytes > reserved ? free_bytes - reserved : 0;
  out->plan.weights_bytes = f.weight_bytes;
  out->plan.kv_dtype = engine::cuda::DeviceDtypeName(f.dtype);
  ASSIGN_OR_RETURN(out->num_blocks,
                   SizePool(config, mc, KvBudget(config, available),
                            f.kv_bytes_per_token, out->block_size, &out->plan));
  engine::cuda::CudaEngineOptions options;
  options.block_size = out->block_size;
  options.num_blocks = static_cast<int32_t>(out->num_blocks);
  ASSIGN_OR_RETURN(std::unique_ptr<engine::cuda::CudaEngine> engine,
                   engine::cuda::CudaEngine::Create(std::move(weights), options));
  out->log_lines.push_back(absl::StrCat(
      "backend cuda: device 0, ", Mib(free_bytes), " free of ",
      Mib(total_bytes),
      " before the KV pool; requests without penalties or logprobs are "
      "sampled on the GPU"));
  out->engine = std::move(engine);
  return absl::OkStatus();
}
#endif

}  // namespace

bool BuildHasCuda() { return PACELINE_HAVE_CUDA != 0; }

absl::StatusOr<ServingEngine> MakeServingEngine(
    const v1::ServerConfig& config,
    std::shared_ptr<const engine::ModelWeights> weights) {
  ServingEngine out;
  out.block_size = config.kv_cache().block_size();
  out.plan.parameters = weights->config().ParameterCount();
  out.plan.weights_dtype = "file";
  std::string backend = config.model().backend();
  if (backend.empty()) {
    if (HaveCudaDevice()) {
      backend = "cuda";
    } else {
      backend = "cpu";
      out.log_lines.push_back(
          BuildHasCuda() ? "no CUDA device found: using the CPU backend"
                         : "this build has no CUDA backend: using the CPU");
    }
  }
  if (backend == "cuda") {
#if PACELINE_HAVE_CUDA
    if (!HaveCudaDevice()) {
      return absl::FailedPreconditionError(
          "model.backend is cuda but no CUDA device was found");
    }
    RETURN_IF_ERROR(MakeCuda(config, std::move(weights), &out));
#else
    return absl::FailedPreconditionError(
        "model.backend is cuda but this build has no CUDA backend (nvcc was "
        "not found when it was built)");
#endif
  } else if (backend == "cpu") {
    RETURN_IF_ERROR(MakeCpu(config, std::move(weights), &out));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("model.backend must be cpu or cuda, got '", backend, "'"));
  }
  out.backend = backend;
  out.log_lines.push_back(absl::StrFormat(
      "memory: weights %s, KV %d bytes per token (%s), %d blocks of %d tokens "
      "= %s (%d full-context sequences)",
      Mib(out.plan.weights_bytes), out.plan.kv_bytes_per_token,
      out.plan.kv_dtype, out.num_blocks, out.block_size,
      Mib(out.plan.kv_bytes), out.plan.sequences));
  return out;
}

}  // namespace paceline::server
