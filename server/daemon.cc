#include "server/daemon.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "engine/model/memory_plan.h"
#include "engine/model_loader.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "metrics/exposer.h"
#include "metrics/metrics.h"
#include "scheduler/serving_loop.h"
#include "server/auth.h"
#include "server/daemon_flags.h"
#include "server/delivery/pacer.h"
#include "server/engine_factory.h"
#include "server/metrics_adapter.h"
#include "server/sd_notify.h"
#include "server/service.h"

namespace paceline::server {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

void Log(absl::string_view line) {
  std::cerr << "pacelined: " << line << std::endl;  // flushed: tests read it
}

int Fail(int code, absl::string_view what, const absl::Status& status) {
  std::cerr << "pacelined: " << what << ": " << status.message() << std::endl;
  return code;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const v1::ServerConfig::Tls& tls) {
  if (tls.cert_file().empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      tls.client_ca_file().empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadFile(tls.key_file()));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadFile(tls.cert_file()));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file().empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadFile(tls.client_ca_file()));
  }
  return grpc::SslServerCredentials(options);
}

std::vector<TenantPolicy> Policies(const v1::ServerConfig& config) {
  std::vector<TenantPolicy> out;
  for (const v1::TenantConfig& t : config.tenants()) {
    TenantPolicy p;
    p.name = t.name();
    p.default_pace = t.default_pace_tokens_per_s();
    p.max_pace = t.max_pace_tokens_per_s();
    p.default_burst = t.default_burst_tokens();
    p.max_prompt_tokens = t.max_prompt_tokens();
    p.max_tokens_limit = t.max_tokens_limit();
    p.default_max_tokens = t.default_max_tokens();
    p.cache_salt = t.prefix_cache_scope().empty()
                       ? t.name()
                       : absl::StrCat("scope:", t.prefix_cache_scope());
    out.push_back(std::move(p));
  }
  return out;
}

scheduler::SchedulerOptions SchedulerOptionsFrom(
    const v1::ServerConfig& config) {
  scheduler::SchedulerOptions o;
  o.max_batched_tokens = config.scheduler().max_batched_tokens();
  o.max_running = config.scheduler().max_running();
  o.fair_share.w_in = config.scheduler().prompt_token_weight();
  o.fair_share.w_out = config.scheduler().generated_token_weight();
  for (const v1::TenantConfig& t : config.tenants()) {
    scheduler::TenantConfig tc;
    tc.name = t.name();
    tc.weight = t.weight();
    tc.max_running = t.max_running();
    tc.max_queued = t.max_queued();
    tc.tokens_per_minute = t.tokens_per_minute();
    o.tenants.push_back(std::move(tc));
  }
  return o;
}

// Waits for SIGTERM or SIGINT (blocked in every thread) and returns it.
int WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

}  // namespace

int RunDaemon(std::span<const std::string> args) {
  absl::StatusOr<DaemonOptions> flags = ParseDaemonFlags(args);
  if (!flags.ok()) {
    std::cerr << "pacelined: " << flags.status().message()
              << "\n(see pacelined --help)\n";
    return kExitUsage;
  }
  if (flags->help) {
    std::cout << kDaemonUsage;
    return kExitOk;
  }
  if (absl::Status st = CheckNotRoot(flags->allow_root); !st.ok()) {
    return Fail(kExitUsage, "start-up", st);
  }
  const v1::ServerConfig& config = flags->config;

  // Signals go to the waiting main thread only: block them before any
  // thread starts (threads inherit the mask).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // The model.
  const absl::Time load_start = absl::Now();
  absl::StatusOr<engine::LoadedModel> model =
      engine::OpenModel(config.model().path());
  if (!model.ok()) {
    return Fail(kExitFailure, absl::StrCat("model ", config.model().path()),
                model.status());
  }
  const engine::ModelConfig& mc = model->weights->config();
  Log(absl::StrFormat(
      "model %s: %s '%s', %d layers, %d dims, %d heads (%d KV), vocab %d, "
      "context %d, %.1f M parameters, loaded in %.2f s",
      config.model().path(), mc.architecture, mc.name, mc.n_layers, mc.n_embd,
      mc.n_heads, mc.n_kv_heads, mc.n_vocab, mc.context_length,
      static_cast<double>(mc.ParameterCount()) / 1e6,
      absl::ToDoubleSeconds(absl::Now() - load_start)));

  // The engine (backend and KV pool).
  absl::StatusOr<ServingEngine> serving =
      MakeServingEngine(config, model->weights);
  if (!serving.ok()) return Fail(kExitFailure, "engine", serving.status());
  for (const std::string& line : serving->log_lines) Log(line);
  const engine::MemoryPlan plan = serving->plan;
  const int32_t block_size = serving->block_size;
  const int64_t num_blocks = serving->num_blocks;

  // Auth.
  std::vector<TenantKeyDigest> keys;
  for (const v1::TenantConfig& t : config.tenants()) {
    for (const std::string& digest : t.api_key_sha256()) {
      keys.push_back(TenantKeyDigest{t.name(), digest});
    }
  }
  absl::StatusOr<TenantAuthenticator> auth = TenantAuthenticator::Create(keys);
  if (!auth.ok()) return Fail(kExitUsage, "tenants", auth.status());

  // Metrics: every stage reports to the adapter, scrapes read it.
  const std::string model_id =
      mc.name.empty() ? config.model().path() : mc.name;
  metrics::MetricsOptions metrics_options;
  metrics_options.model = model_id;
  for (const v1::TenantConfig& t : config.tenants()) {
    metrics_options.tenants.push_back(t.name());
  }
  metrics::Metrics metrics(std::move(metrics_options));
  const engine::Tokenizer* tokenizer = model->tokenizer.get();
  MetricsAdapter metrics_adapter(
      &metrics, [tokenizer](int32_t token) { return tokenizer->IsEog(token); });

  // The engine thread and the pacer.
  scheduler::ServingLoopOptions loop_options;
  loop_options.scheduler = SchedulerOptionsFrom(config);
  loop_options.metrics = &metrics_adapter;
  absl::StatusOr<std::unique_ptr<scheduler::ServingLoop>> loop =
      scheduler::ServingLoop::Create(std::move(serving->engine), model->tokenizer.get(),
                                     loop_options);
  if (!loop.ok()) return Fail(kExitUsage, "scheduler", loop.status());
  scheduler::Clock* clock = scheduler::SystemClock::Get();
  Pacer pacer(clock);
  metrics_adapter.AttachSources(loop->get(), &pacer);

  ServiceOptions service_options;
  service_options.tenants = Policies(config);
  service_options.model_id = model_id;
  service_options.rejections = &metrics_adapter;
  service_options.delivery = &metrics_adapter;
  service_options.memory_plan = plan;
  service_options.kv_block_size = block_size;
  service_options.kv_blocks = num_blocks;
  service_options.backend = serving->backend;
  PacelineService service(std::move(service_options), &*auth, &mc,
                          model->tokenizer.get(), loop->get(), &pacer, clock);

  // The gRPC server.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
      Credentials(config.tls());
  if (!creds.ok()) return Fail(kExitUsage, "tls", creds.status());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen(), *creds, &port);
  builder.SetMaxReceiveMessageSize(config.grpc().max_message_bytes());
  builder.SetMaxSendMessageSize(config.grpc().max_message_bytes());
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             config.grpc().max_concurrent_streams());
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             config.grpc().keepalive_time_seconds() * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             config.grpc().keepalive_timeout_seconds() * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             10000);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Fail(kExitFailure, "listen",
                absl::UnavailableError(absl::StrCat(
                    "cannot listen on ", config.listen(),
                    " (address in use, or a bad address?)")));
  }
  std::unique_ptr<metrics::MetricsExposer> exposer;
  if (!config.metrics_listen().empty()) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> started =
        metrics::MetricsExposer::Start(config.metrics_listen(), &metrics);
    if (!started.ok()) {
      server->Shutdown();
      return Fail(kExitFailure, "metrics_listen", started.status());
    }
    exposer = *std::move(started);
    const std::string& m = config.metrics_listen();
    Log(absl::StrCat("metrics on ", m.substr(0, m.rfind(':')), ":",
                     exposer->port(), "/metrics"));
  }
  (*loop)->Start();
  pacer.Start();
  std::string host = config.listen().substr(0, config.listen().rfind(':'));
  Log(absl::StrCat("listening on ", host, ":", port));
  if (!config.tls().cert_file().empty()) {
    Log(config.tls().client_ca_file().empty()
            ? "TLS: on"
            : "TLS: on, client certificates required (mutual TLS)");
  }
  Log("ready");
  if (absl::Status st = SdNotify("READY=1"); !st.ok()) {
    Log(absl::StrCat("sd_notify: ", st.message()));
  }

  // Serve until a signal, then drain.
  const int sig = WaitForSignal();
  const absl::Duration drain_timeout =
      absl::Seconds(config.drain_timeout_seconds());
  service.BeginDrain();
  server->GetHealthCheckService()->SetServingStatus(false);
  SdNotify("STOPPING=1").IgnoreError();
  Log(absl::StrCat("received ", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                   "; draining (timeout ",
                   absl::FormatDuration(drain_timeout), ")"));
  const absl::Time deadline = absl::Now() + drain_timeout;
  while (service.live_calls() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const int64_t cut = service.live_calls();
  if (cut > 0) {
    Log(absl::StrCat("drain timeout: aborting ", cut, " call(s)"));
    service.AbortAll(absl::AbortedError("the server shut down (drain timeout)"));
  }
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  (*loop)->Stop(scheduler::StopMode::kCancel);
  pacer.Stop();
  server->Wait();
  Log("stopped");
  return kExitOk;
}

}  // namespace paceline::server
