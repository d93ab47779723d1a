#include "server/daemon_flags.h"

#include <unistd.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/args.h"
#include "common/status_macros.h"
#include "server/config.h"
#include "server/frontend/sha256.h"

namespace paceline::server {

const absl::string_view kDaemonUsage =
    R"(usage: pacelined [--config FILE] [flags]

Serves the Paceline gRPC API (proto/paceline/v1/paceline.proto) and the
OpenAI-compatible HTTP API from one model to the configured tenants. The
config file is a text-format paceline.v1.ServerConfig
(proto/paceline/v1/config.proto documents every field and its default);
each flag below overrides its field. A bad config stops start-up with the
file, line and field.

  --config FILE              the config file
  --model PATH               a GGUF file, or dummy:SHAPE[:DTYPE] for random
                             weights of a named shape        (model.path)
  --backend cpu|cuda         the engine backend; default: cuda when a GPU is
                             present, else cpu               (model.backend)
  --chat-template-file FILE  a Jinja chat template used instead of the
                             model's own        (model.chat_template_file)
  --served-model-name NAME[,ALIAS...]  the name requests use, default the
                             file's base name; more names after commas are
                             aliases         (model.served_name, aliases)
  --listen HOST:PORT         the gRPC address, e.g. 127.0.0.1:50051,
                             [::1]:50051, or unix:PATH       (listen)
  --metrics-listen HOST:PORT the Prometheus /metrics address (metrics_listen)
  --http-listen HOST:PORT    the OpenAI-compatible HTTP API's address;
                             default 127.0.0.1:8000, "" = off  (http.listen)
  --tenant NAME:KEY[:WEIGHT] adds a tenant with default limits whose API key
                             is KEY (no ':' in it); repeatable. The key shows
                             in `ps`: for trials only; keep real keys as
                             SHA-256 digests in the config file (tenants)
  --threads N                engine CPU threads, 0 = one per core (threads)
  --cpu-kernels measure|highest  CPU matmul kernels: the fastest level
                             measured at start-up (default), or the highest
                             the CPU runs                  (cpu_kernels)
  --state-dir DIR            keeps the measured kernel choices across
                             restarts; default $STATE_DIRECTORY (state_dir)
  --kv-memory BYTES          KV-cache memory: 512MiB, 2GiB, 1GB, 1e9, plain
                             bytes                  (kv_cache.memory_bytes)
  --kv-memory-fraction F     or a fraction in (0, 1] of the memory available
                             at start-up         (kv_cache.memory_fraction)
  --block-size N             tokens per KV block, a power of two in [1, 256]
                                                      (kv_cache.block_size)
  --kv-dtype f32|f16|q8_0    K/V element type (CPU default f16); f16 holds
                             2x the tokens of f32, q8_0 3.8x (kv_cache.dtype)
  --max-batched-tokens N     tokens per engine step, 0 = the engine's limit
                                            (scheduler.max_batched_tokens)
  --drain-timeout SECONDS    on SIGTERM, cut streams still running after this
                             long                   (drain_timeout_seconds)
  --allow-root               run even as root (refused otherwise)
  --help                     this text
)";

namespace {

constexpr FlagDef kFlags[] = {
    {"config", true},
    {"model", true},
    {"backend", true},
    {"chat-template-file", true},
    {"served-model-name", true},
    {"listen", true},
    {"metrics-listen", true},
    {"http-listen", true},
    {"tenant", true},
    {"threads", true},
    {"cpu-kernels", true},
    {"state-dir", true},
    {"kv-memory", true},
    {"kv-memory-fraction", true},
    {"block-size", true},
    {"kv-dtype", true},
    {"max-batched-tokens", true},
    {"drain-timeout", true},
    {"allow-root", false},
};

// --tenant NAME:KEY[:WEIGHT] as a tenant with default limits.
absl::StatusOr<v1::TenantConfig> TenantFlag(absl::string_view value) {
  const std::vector<absl::string_view> parts = absl::StrSplit(value, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() ||
      parts[1].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tenant wants NAME:KEY or NAME:KEY:WEIGHT, got '", value, "'"));
  }
  v1::TenantConfig tenant;
  tenant.set_name(std::string(parts[0]));
  tenant.add_api_key_sha256(Sha256Hex(parts[1]));
  if (parts.size() == 3) {
    ASSIGN_OR_RETURN(
        const double weight,
        ParseNumberFlag(absl::StrCat("tenant ", parts[0], ": WEIGHT"),
                        parts[2]));
    tenant.set_weight(weight);
  }
  return tenant;
}

// Applies every flag but --config, --allow-root and --tenant to `config`,
// recording in `source` which field each set.
absl::Status ApplyFieldFlags(const ParsedArgs& parsed, v1::ServerConfig& config,
                             ConfigSource& source) {
  auto string_flag = [&](absl::string_view flag, absl::string_view field,
                         std::string* target) {
    if (std::optional<std::string> v = parsed.Get(flag)) {
      *target = *std::move(v);
      source.MarkFromFlag(std::string(field), absl::StrCat("--", flag));
    }
  };
  string_flag("model", "model.path", config.mutable_model()->mutable_path());
  string_flag("backend", "model.backend",
              config.mutable_model()->mutable_backend());
  string_flag("chat-template-file", "model.chat_template_file",
              config.mutable_model()->mutable_chat_template_file());
  if (std::optional<std::string> v = parsed.Get("served-model-name")) {
    v1::ServerConfig::Model* model = config.mutable_model();
    const std::vector<std::string> names = absl::StrSplit(*v, ',');
    model->set_served_name(names.front());
    model->clear_aliases();
    for (size_t i = 1; i < names.size(); ++i) model->add_aliases(names[i]);
    source.MarkFromFlag("model.served_name", "--served-model-name");
    source.MarkFromFlag("model.aliases", "--served-model-name");
  }
  string_flag("listen", "listen", config.mutable_listen());
  string_flag("cpu-kernels", "cpu_kernels", config.mutable_cpu_kernels());
  string_flag("state-dir", "state_dir", config.mutable_state_dir());
  string_flag("metrics-listen", "metrics_listen",
              config.mutable_metrics_listen());
  string_flag("http-listen", "http.listen",
              config.mutable_http()->mutable_listen());
  string_flag("kv-dtype", "kv_cache.dtype",
              config.mutable_kv_cache()->mutable_dtype());

  // Whole-number flags: flag, field path, setter.
  struct IntFlag {
    absl::string_view flag;
    absl::string_view field;
    void (*set)(v1::ServerConfig&, int32_t);
  };
  const IntFlag int_flags[] = {
      {"threads", "threads",
       [](v1::ServerConfig& c, int32_t n) { c.set_threads(n); }},
      {"block-size", "kv_cache.block_size",
       [](v1::ServerConfig& c, int32_t n) {
         c.mutable_kv_cache()->set_block_size(n);
       }},
      {"max-batched-tokens", "scheduler.max_batched_tokens",
       [](v1::ServerConfig& c, int32_t n) {
         c.mutable_scheduler()->set_max_batched_tokens(n);
       }},
      {"drain-timeout", "drain_timeout_seconds",
       [](v1::ServerConfig& c, int32_t n) { c.set_drain_timeout_seconds(n); }},
  };
  for (const IntFlag& f : int_flags) {
    ASSIGN_OR_RETURN(const std::optional<int32_t> n,
                     GetInt32Flag(parsed, f.flag));
    if (n.has_value()) {
      f.set(config, *n);
      source.MarkFromFlag(std::string(f.field), absl::StrCat("--", f.flag));
    }
  }

  if (parsed.Has("kv-memory") && parsed.Has("kv-memory-fraction")) {
    return absl::InvalidArgumentError(
        "--kv-memory and --kv-memory-fraction: give one or the other");
  }
  ASSIGN_OR_RETURN(const std::optional<uint64_t> bytes,
                   GetByteSizeFlag(parsed, "kv-memory"));
  if (bytes.has_value()) {
    config.mutable_kv_cache()->set_memory_bytes(*bytes);
    source.MarkFromFlag("kv_cache.memory_bytes", "--kv-memory");
  }
  ASSIGN_OR_RETURN(const std::optional<double> fraction,
                   GetNumberFlag(parsed, "kv-memory-fraction"));
  if (fraction.has_value()) {
    config.mutable_kv_cache()->set_memory_fraction(*fraction);
    source.MarkFromFlag("kv_cache.memory_fraction", "--kv-memory-fraction");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonOptions> ParseDaemonFlags(
    std::span<const std::string> args) {
  ASSIGN_OR_RETURN(const ParsedArgs parsed, ParseArgs(args, kFlags));
  DaemonOptions options;
  if (parsed.help()) {
    options.help = true;
    return options;
  }
  if (!parsed.positional().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument '", parsed.positional()[0], "' (see --help)"));
  }
  options.allow_root = parsed.Has("allow-root");

  ConfigSource source;
  if (std::optional<std::string> file = parsed.Get("config")) {
    if (file->empty()) {
      return absl::InvalidArgumentError("--config must not be empty");
    }
    ASSIGN_OR_RETURN(ParsedConfigFile loaded, ParseConfigFile(*file));
    options.config = std::move(loaded.config);
    source = std::move(loaded.source);
    options.config_file = *std::move(file);
  }

  RETURN_IF_ERROR(ApplyFieldFlags(parsed, options.config, source));

  const int file_tenants = options.config.tenants_size();
  for (const std::string& value : parsed.GetAll("tenant")) {
    ASSIGN_OR_RETURN(v1::TenantConfig tenant, TenantFlag(value));
    for (int i = 0; i < file_tenants; ++i) {
      if (options.config.tenants(i).name() == tenant.name()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--tenant ", tenant.name(),
            ": the config file has a tenant of "
            "that name (",
            source.Describe(absl::StrCat("tenants[", i, "]")), ")"));
      }
    }
    source.MarkFromFlag(
        absl::StrCat("tenants[", options.config.tenants_size(), "]"),
        "--tenant");
    *options.config.add_tenants() = std::move(tenant);
  }

  ApplyDefaults(&options.config);
  RETURN_IF_ERROR(ValidateConfig(options.config, &source));
  return options;
}

absl::Status CheckNotRootForUid(bool allow_root, uid_t euid) {
  if (euid == 0 && !allow_root) {
    return absl::FailedPreconditionError(
        "refusing to run as root; pass --allow-root to do it anyway (better: "
        "run as an unprivileged user, e.g. the systemd unit's DynamicUser)");
  }
  return absl::OkStatus();
}

absl::Status CheckNotRoot(bool allow_root) {
  return CheckNotRootForUid(allow_root, ::geteuid());
}

}  // namespace paceline::server
