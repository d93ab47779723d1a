// ApplyDefaults (config.h): the defaults config.proto documents.

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "scheduler/scheduler.h"
#include "server/config.h"

namespace paceline::server {
namespace {

constexpr int32_t kDefaultBlockSize = 16;
constexpr double kDefaultMemoryFraction = 0.5;
constexpr int32_t kDefaultMaxRunning = 256;
constexpr double kDefaultPromptTokenWeight = 1;
constexpr double kDefaultGeneratedTokenWeight = 2;
constexpr int32_t kDefaultDrainTimeoutSeconds = 30;
constexpr int64_t kDefaultMaxUnreadBytes = 1 << 20;
constexpr int64_t kDefaultMaxResponseBytes = 8 << 20;
constexpr int32_t kDefaultMaxStreamSeconds = 3600;
constexpr int32_t kDefaultIntakeMaxQueued = 1024;
constexpr int32_t kCoresPerIntakeThread = 8;
constexpr int32_t kDefaultMaxMessageBytes = 4 << 20;
constexpr int32_t kDefaultMaxConcurrentStreams = 1000;
constexpr int32_t kDefaultKeepaliveTimeSeconds = 60;
constexpr int32_t kDefaultKeepaliveTimeoutSeconds = 20;
constexpr double kDefaultTenantWeight = 1;
constexpr int32_t kDefaultMaxQueued = 1024;
constexpr int32_t kDefaultBurstTokens = 1;
constexpr double kDefaultMinPace = 1;  // tokens/s
constexpr int32_t kDefaultMaxStopStrings = 16;
constexpr int32_t kDefaultMaxStopStringBytes = 256;
constexpr int32_t kDefaultMaxStopTokenIds = 64;
constexpr int32_t kDefaultMaxTokens = 256;
constexpr int32_t kDefaultHttpMaxHeaderBytes = 16 << 10;
constexpr int64_t kDefaultHttpMaxBodyBytes = 4 << 20;
constexpr int32_t kDefaultHttpRequestTimeoutSeconds = 30;
constexpr int32_t kDefaultHttpIdleTimeoutSeconds = 60;
constexpr int32_t kDefaultHttpMaxConnections = 4096;

void DefaultKvCache(v1::ServerConfig::KvCache* kv) {
  if (kv->budget_case() == v1::ServerConfig::KvCache::BUDGET_NOT_SET) {
    kv->set_memory_fraction(kDefaultMemoryFraction);
  }
  if (!kv->has_block_size()) kv->set_block_size(kDefaultBlockSize);
}

void DefaultScheduler(v1::ServerConfig::Scheduler* s) {
  if (!s->has_max_running()) s->set_max_running(kDefaultMaxRunning);
  if (!s->has_speculation_max_step_tokens()) {
    s->set_speculation_max_step_tokens(
        scheduler::SchedulerOptions{}.speculation_max_step_tokens);
  }
  if (!s->has_prompt_token_weight()) {
    s->set_prompt_token_weight(kDefaultPromptTokenWeight);
  }
  if (!s->has_generated_token_weight()) {
    s->set_generated_token_weight(kDefaultGeneratedTokenWeight);
  }
}

void DefaultIntake(v1::ServerConfig::Intake* in) {
  if (!in->has_threads()) {
    const int32_t cores =
        static_cast<int32_t>(std::thread::hardware_concurrency());
    in->set_threads(std::max(1, cores / kCoresPerIntakeThread));
  }
  if (!in->has_max_queued_per_tenant()) {
    in->set_max_queued_per_tenant(kDefaultIntakeMaxQueued);
  }
}

void DefaultGrpc(v1::ServerConfig::Grpc* g) {
  if (!g->has_max_message_bytes()) {
    g->set_max_message_bytes(kDefaultMaxMessageBytes);
  }
  if (!g->has_max_concurrent_streams()) {
    g->set_max_concurrent_streams(kDefaultMaxConcurrentStreams);
  }
  if (!g->has_keepalive_time_seconds()) {
    g->set_keepalive_time_seconds(kDefaultKeepaliveTimeSeconds);
  }
  if (!g->has_keepalive_timeout_seconds()) {
    g->set_keepalive_timeout_seconds(kDefaultKeepaliveTimeoutSeconds);
  }
}

void DefaultHttp(v1::ServerConfig::Http* h) {
  if (!h->has_listen()) h->set_listen(std::string(kDefaultHttpListen));
  if (!h->has_max_header_bytes()) {
    h->set_max_header_bytes(kDefaultHttpMaxHeaderBytes);
  }
  if (!h->has_max_body_bytes()) h->set_max_body_bytes(kDefaultHttpMaxBodyBytes);
  if (!h->has_request_timeout_seconds()) {
    h->set_request_timeout_seconds(kDefaultHttpRequestTimeoutSeconds);
  }
  if (!h->has_idle_timeout_seconds()) {
    h->set_idle_timeout_seconds(kDefaultHttpIdleTimeoutSeconds);
  }
  if (!h->has_max_connections()) {
    h->set_max_connections(kDefaultHttpMaxConnections);
  }
  if (!h->has_threads()) h->set_threads(1);
}

// Lower-cases the key digests too.
void DefaultTenant(v1::TenantConfig* t) {
  for (std::string& digest : *t->mutable_api_key_sha256()) {
    absl::AsciiStrToLower(&digest);
  }
  if (!t->has_weight()) t->set_weight(kDefaultTenantWeight);
  if (!t->has_max_queued()) t->set_max_queued(kDefaultMaxQueued);
  if (!t->has_default_pace_tokens_per_s()) {
    t->set_default_pace_tokens_per_s(t->max_pace_tokens_per_s());
  }
  if (!t->has_max_stop_strings()) {
    t->set_max_stop_strings(kDefaultMaxStopStrings);
  }
  if (!t->has_max_stop_string_bytes()) {
    t->set_max_stop_string_bytes(kDefaultMaxStopStringBytes);
  }
  if (!t->has_max_stop_token_ids()) {
    t->set_max_stop_token_ids(kDefaultMaxStopTokenIds);
  }
  if (!t->has_min_pace_tokens_per_s()) {
    t->set_min_pace_tokens_per_s(kDefaultMinPace);
  }
  if (!t->has_default_burst_tokens()) {
    t->set_default_burst_tokens(kDefaultBurstTokens);
  }
  if (!t->has_default_max_tokens()) {
    t->set_default_max_tokens(
        t->max_tokens_limit() > 0
            ? std::min(kDefaultMaxTokens, t->max_tokens_limit())
            : kDefaultMaxTokens);
  }
}

}  // namespace

void ApplyDefaults(v1::ServerConfig* config) {
  if (config->listen().empty()) config->set_listen(std::string(kDefaultListen));
  DefaultKvCache(config->mutable_kv_cache());
  DefaultScheduler(config->mutable_scheduler());
  if (!config->has_drain_timeout_seconds()) {
    config->set_drain_timeout_seconds(kDefaultDrainTimeoutSeconds);
  }
  if (!config->has_max_unread_bytes()) {
    config->set_max_unread_bytes(kDefaultMaxUnreadBytes);
  }
  if (!config->has_max_response_bytes()) {
    config->set_max_response_bytes(kDefaultMaxResponseBytes);
  }
  if (!config->has_max_stream_seconds()) {
    config->set_max_stream_seconds(kDefaultMaxStreamSeconds);
  }
  DefaultIntake(config->mutable_intake());
  DefaultGrpc(config->mutable_grpc());
  DefaultHttp(config->mutable_http());
  for (v1::TenantConfig& t : *config->mutable_tenants()) DefaultTenant(&t);
}

std::string ServedName(const v1::ServerConfig::Model& model) {
  if (!model.served_name().empty()) return model.served_name();
  absl::string_view path = model.path();
  if (absl::StartsWith(path, "dummy:")) return std::string(path);
  if (const size_t slash = path.rfind('/'); slash != path.npos) {
    path.remove_prefix(slash + 1);
  }
  absl::ConsumeSuffix(&path, ".gguf");
  return path.empty() ? std::string(model.path()) : std::string(path);
}

}  // namespace paceline::server
