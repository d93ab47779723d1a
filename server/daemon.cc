#include "server/daemon.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "chat/model_templates.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "engine/backend.h"
#include "engine/model_loader.h"
#include "engine/sampling/grammar/grammar_cache.h"
#include "engine/sampling/grammar/token_trie.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "metrics/exposer.h"
#include "metrics/metrics.h"
#include "scheduler/serving_loop.h"
#include "server/anthropic/messages_service.h"
#include "server/config.h"
#include "server/daemon_flags.h"
#include "server/delivery/pacer.h"
#include "server/engine_factory.h"
#include "server/frontend/auth.h"
#include "server/frontend/frontend.h"
#include "server/frontend/tenant_policy.h"
#include "server/grpc/grpc_service.h"
#include "server/grpc/reflection_v1.h"
#include "server/http/cors.h"
#include "server/http/http_server.h"
#include "server/memory_trim.h"
#include "server/metrics_adapter.h"
#include "server/openai/openai_service.h"
#include "server/sd_notify.h"

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

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const v1::ServerConfig::Tls& tls) {
  if (tls.cert_file().empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      tls.client_ca_file().empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadWholeFile(tls.key_file()));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadWholeFile(tls.cert_file()));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file().empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs,
                     ReadWholeFile(tls.client_ca_file()));
  }
  return grpc::SslServerCredentials(options);
}

std::vector<TenantPolicy> Policies(const v1::ServerConfig& config) {
  std::vector<TenantPolicy> out;
  for (const v1::TenantConfig& t : config.tenants()) {
    TenantPolicy p;
    p.name = t.name();
    p.weight = t.weight();
    p.default_pace = t.default_pace_tokens_per_s();
    p.max_pace = t.max_pace_tokens_per_s();
    p.min_pace = t.min_pace_tokens_per_s();
    p.max_stop_strings = t.max_stop_strings();
    p.max_stop_string_bytes = t.max_stop_string_bytes();
    p.max_stop_token_ids = t.max_stop_token_ids();
    p.default_burst = t.default_burst_tokens();
    p.max_prompt_tokens = t.max_prompt_tokens();
    p.max_tokens_limit = t.max_tokens_limit();
    p.default_max_tokens = t.default_max_tokens();
    p.default_max_draft_tokens = t.speculation().max_draft_tokens();
    p.max_priority =
        ParseMaxPriority(t.max_priority())
            .value_or(scheduler::PriorityClass::kInteractive);  // validated
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
  o.speculation_max_step_tokens =
      config.scheduler().speculation_max_step_tokens();
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

absl::StatusOr<TenantAuthenticator> Authenticator(
    const v1::ServerConfig& config) {
  std::vector<TenantKeyDigest> keys;
  for (const v1::TenantConfig& t : config.tenants()) {
    for (const std::string& digest : t.api_key_sha256()) {
      keys.push_back(TenantKeyDigest{t.name(), digest});
    }
  }
  return TenantAuthenticator::Create(keys);
}

metrics::MetricsOptions MetricsOptionsFrom(const v1::ServerConfig& config,
                                           const std::string& model_id,
                                           const engine::Backend& backend) {
  metrics::MetricsOptions o;
  o.model = model_id;
  o.kv_block_size = backend.block_size;
  o.kv_num_blocks = backend.num_blocks;
  for (const v1::TenantConfig& t : config.tenants()) {
    o.tenants.push_back(t.name());
  }
  return o;
}

// While busy, free memory goes back to the system at most this often
// (idle: at once; memory_trim.h).
constexpr absl::Duration kTrimPeriod = absl::Seconds(10);

// A drain ends within drain_timeout_seconds plus this, whatever is open:
// the cut calls' last messages get half of it, the transports the rest.
constexpr absl::Duration kDrainMargin = absl::Seconds(2);

// Waits for SIGTERM or SIGINT (blocked in every thread) and returns it,
// calling `every_second` about once a second meanwhile.
int WaitForSignal(const std::function<void()>& every_second) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  const timespec second = {1, 0};
  while (true) {
    const int sig = sigtimedwait(&set, nullptr, &second);
    if (sig == SIGTERM || sig == SIGINT) return sig;
    if (sig < 0 && errno == EAGAIN) every_second();
  }
}

// Blocks SIGTERM and SIGINT so that only the waiting main thread takes
// them: before any thread starts (threads inherit the mask).
void BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// The daemon's parts, in the order they start; members are destroyed in
// reverse. Each step returns kExitOk or, having said why, the exit code.
class Daemon {
 public:
  explicit Daemon(const v1::ServerConfig& config) : config_(config) {}
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Loads the model, makes the engine, builds the service and starts the
  // servers, stopping at the first step that fails.
  int Start();
  // Serves until SIGTERM or SIGINT, then drains and stops.
  void ServeAndDrain();

 private:
  int LoadModel();
  int MakeEngine();
  int BuildService();
  int StartServers();
  FrontendOptions FrontendOptionsFor(const std::string& model_id) const;
  int StartGrpc();
  int StartHttp();
  int StartMetricsExposer();
  // Stops taking calls, waits until `start` + drain_timeout_seconds for
  // them to end, then cuts those left.
  void Drain(int sig, absl::Time start);
  // Until no call is live, or `deadline`.
  void WaitForCallsToEnd(absl::Time deadline);

  const v1::ServerConfig& config_;
  engine::LoadedModel model_;
  chat::ModelChatTemplates chat_templates_;  // model_'s, parsed
  engine::Backend backend_;                  // its engine moves into loop_
  std::optional<TenantAuthenticator> auth_;
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<MetricsAdapter> metrics_adapter_;
  std::unique_ptr<engine::grammar::GrammarCache> grammars_;
  std::unique_ptr<scheduler::ServingLoop> loop_;
  std::unique_ptr<Pacer> pacer_;
  std::unique_ptr<Frontend> frontend_;
  std::unique_ptr<GrpcService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<openai::OpenAiService> openai_;
  std::unique_ptr<http::HttpServer> http_;  // null: the HTTP API is off
  std::unique_ptr<metrics::MetricsExposer> exposer_;
};

int Daemon::Start() {
  if (int code = LoadModel(); code != kExitOk) return code;
  if (int code = MakeEngine(); code != kExitOk) return code;
  if (int code = BuildService(); code != kExitOk) return code;
  return StartServers();
}

int Daemon::LoadModel() {
  const absl::Time load_start = absl::Now();
  engine::ModelSourceOptions options;
  options.chat_template_file = config_.model().chat_template_file();
  absl::StatusOr<engine::LoadedModel> model =
      engine::OpenModel(config_.model().path(), options);
  if (!model.ok()) {
    return Fail(kExitFailure, absl::StrCat("model ", config_.model().path()),
                model.status());
  }
  model_ = *std::move(model);
  absl::StatusOr<chat::ModelChatTemplates> templates =
      chat::ParseChatTemplates(model_.chat_templates);
  if (!templates.ok()) {
    return Fail(kExitFailure, absl::StrCat("model ", config_.model().path()),
                templates.status());
  }
  chat_templates_ = *std::move(templates);
  const engine::ModelConfig& mc = model_.weights->config();
  Log(absl::StrFormat(
      "model %s: %s '%s', %d layers, %d dims, %d heads (%d KV), vocab %d, "
      "context %d, %.1f M parameters, loaded in %.2f s",
      config_.model().path(), mc.architecture, mc.name, mc.n_layers, mc.n_embd,
      mc.n_heads, mc.n_kv_heads, mc.n_vocab, mc.context_length,
      static_cast<double>(mc.ParameterCount()) / 1e6,
      absl::ToDoubleSeconds(absl::Now() - load_start)));
  const chat::ModelChatTemplates& chat = chat_templates_;
  for (const std::string& warning : chat.warnings) {
    Log(absl::StrCat("warning: ", warning));
  }
  if (chat.source == engine::ChatTemplateSource::kNone) {
    Log("chat template: none (chat requests are refused)");
  } else {
    Log(absl::StrCat(
        "chat template: ",
        chat.source == engine::ChatTemplateSource::kConfig
            ? config_.model().chat_template_file()
            : std::string(engine::kChatTemplateKey),
        chat.tool_use.has_value() ? " (and its tool_use variant)" : ""));
  }
  return kExitOk;
}

// The backend and its KV pool.
int Daemon::MakeEngine() {
  absl::StatusOr<engine::Backend> backend =
      engine::MakeBackend(BackendOptionsFrom(config_), model_.weights);
  if (!backend.ok()) return Fail(kExitFailure, "engine", backend.status());
  backend_ = *std::move(backend);
  for (const std::string& line : backend_.log_lines) Log(line);
  return kExitOk;
}

FrontendOptions Daemon::FrontendOptionsFor(const std::string& model_id) const {
  FrontendOptions o;
  o.tenants = Policies(config_);
  o.model.id = model_id;
  o.model.aliases.assign(config_.model().aliases().begin(),
                         config_.model().aliases().end());
  o.model.backend = backend_.name;
  o.model.memory_plan = backend_.plan;
  o.model.kv_block_size = backend_.block_size;
  o.model.kv_blocks = backend_.num_blocks;
  o.model.chat_templates = &chat_templates_;
  o.model.grammars = grammars_.get();
  o.rejections = metrics_adapter_.get();
  o.delivery = metrics_adapter_.get();
  o.max_unread_bytes = config_.max_unread_bytes();
  o.max_response_bytes = config_.max_response_bytes();
  o.max_call_lifetime = absl::Seconds(config_.max_stream_seconds());
  o.intake.threads = config_.intake().threads();
  o.intake.max_queued_per_tenant = config_.intake().max_queued_per_tenant();
  o.intake.observer = metrics_adapter_.get();
  return o;
}

// Auth, metrics, the engine thread, the pacer and the gRPC service.
int Daemon::BuildService() {
  absl::StatusOr<TenantAuthenticator> auth = Authenticator(config_);
  if (!auth.ok()) return Fail(kExitUsage, "tenants", auth.status());
  auth_.emplace(*std::move(auth));

  // Metrics: every stage reports to the adapter, scrapes read it.
  const engine::ModelConfig& mc = model_.weights->config();
  const std::string model_id = ServedName(config_.model());
  metrics_ = std::make_unique<metrics::Metrics>(
      MetricsOptionsFrom(config_, model_id, backend_));
  const engine::Tokenizer* tokenizer = model_.tokenizer.get();
  metrics_adapter_ = std::make_unique<MetricsAdapter>(
      metrics_.get(),
      [tokenizer](int32_t token) { return tokenizer->IsEog(token); });

  scheduler::ServingLoopOptions loop_options;
  loop_options.scheduler = SchedulerOptionsFrom(config_);
  loop_options.metrics = metrics_adapter_.get();
  absl::StatusOr<std::unique_ptr<scheduler::ServingLoop>> loop =
      scheduler::ServingLoop::Create(std::move(backend_.engine), tokenizer,
                                     loop_options);
  if (!loop.ok()) return Fail(kExitUsage, "scheduler", loop.status());
  loop_ = *std::move(loop);
  scheduler::Clock* clock = scheduler::SystemClock::Get();
  pacer_ = std::make_unique<Pacer>(clock);
  metrics_adapter_->AttachSources(loop_.get(), pacer_.get());
  // Structured output: the vocabulary's bytes in a trie, for token masks.
  grammars_ = std::make_unique<engine::grammar::GrammarCache>(
      engine::grammar::TokenTrie::FromTokenizer(*tokenizer));
  frontend_ =
      std::make_unique<Frontend>(FrontendOptionsFor(model_id), &*auth_, &mc,
                                 tokenizer, loop_.get(), pacer_.get(), clock);
  GrpcServiceOptions grpc_options;
  grpc_options.max_delta_bytes = config_.grpc().max_message_bytes() / 2;
  grpc_options.max_message_bytes = config_.grpc().max_message_bytes();
  service_ = std::make_unique<GrpcService>(grpc_options, frontend_.get());
  return kExitOk;
}

int Daemon::StartGrpc() {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
      Credentials(config_.tls());
  if (!creds.ok()) return Fail(kExitUsage, "tls", creds.status());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  const v1::ServerConfig::Grpc& g = config_.grpc();
  grpc::ServerBuilder builder;
  builder.SetOption(ReflectionV1Option());  // v1 next to v1alpha
  builder.AddListeningPort(config_.listen(), *creds, &port_);
  builder.SetMaxReceiveMessageSize(g.max_message_bytes());
  builder.SetMaxSendMessageSize(g.max_message_bytes());
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             g.max_concurrent_streams());
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             g.keepalive_time_seconds() * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             g.keepalive_timeout_seconds() * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT by default, so a second daemon on the same
  // address would start and take half the connections; refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return Fail(kExitFailure, "listen",
                absl::UnavailableError(
                    absl::StrCat("cannot listen on ", config_.listen(),
                                 " (address in use, or a bad address?)")));
  }
  // Health by service name too (grpc-health-probe -service, Kubernetes'
  // grpc probe with `service:`); Drain's SetServingStatus(false) covers it.
  server_->GetHealthCheckService()->SetServingStatus(
      v1::Paceline::service_full_name(), true);
  return kExitOk;
}

namespace {

// The status code a refusal of the HTTP server counts as.
absl::StatusCode HttpStatusCode(int status) {
  switch (status) {
    case 408:
      return absl::StatusCode::kDeadlineExceeded;
    case 503:
      return absl::StatusCode::kUnavailable;
    default:
      return status < 500 ? absl::StatusCode::kInvalidArgument
                          : absl::StatusCode::kInternal;
  }
}

}  // namespace

// The HTTP APIs (OpenAI's, Anthropic's), unless http.listen is "".
int Daemon::StartHttp() {
  const v1::ServerConfig::Http& h = config_.http();
  if (h.listen().empty()) return kExitOk;
  const v1::ServerConfig::Tls& tls = h.has_tls() ? h.tls() : config_.tls();
  http::HttpServerOptions o;
  o.listen = h.listen();
  if (!tls.cert_file().empty()) {
    absl::StatusOr<std::string> cert = ReadWholeFile(tls.cert_file());
    absl::StatusOr<std::string> key = ReadWholeFile(tls.key_file());
    if (!cert.ok() || !key.ok()) {
      return Fail(kExitUsage, "http tls",
                  !cert.ok() ? cert.status() : key.status());
    }
    o.cert_pem = *std::move(cert);
    o.key_pem = *std::move(key);
    if (!tls.client_ca_file().empty()) {
      absl::StatusOr<std::string> ca = ReadWholeFile(tls.client_ca_file());
      if (!ca.ok()) return Fail(kExitUsage, "http tls", ca.status());
      o.client_ca_pem = *std::move(ca);
    }
  }
  o.max_header_bytes = h.max_header_bytes();
  o.max_body_bytes = h.max_body_bytes();
  o.request_timeout = absl::Seconds(h.request_timeout_seconds());
  o.idle_timeout = absl::Seconds(h.idle_timeout_seconds());
  o.max_connections = h.max_connections();
  o.threads = h.threads();
  o.send_buffer_bytes = h.send_buffer_bytes();  // 0 when unset: the kernel's
  // The HTTP server's own refusals (a malformed request, 408, 413, 431,
  // too many connections): OpenAI's error shape, counted as rejections.
  o.error_body = [frontend = frontend_.get()](int status,
                                              absl::string_view message) {
    (void)frontend->Rejected("", absl::Status(HttpStatusCode(status), message));
    return openai::OpenAiService::ErrorBody(status, message);
  };
  openai_ = std::make_unique<openai::OpenAiService>(frontend_.get());
  openai_->AddRoutes(anthropic::MessagesRoutes(frontend_.get()));
  http::CorsOptions cors;
  cors.allowed_origins.assign(h.cors_origins().begin(), h.cors_origins().end());
  absl::StatusOr<std::unique_ptr<http::HttpServer>> started =
      http::HttpServer::Start(
          std::move(o),
          http::WithCors(std::move(cors),
                         [api = openai_.get()](
                             http::HttpRequest request,
                             std::shared_ptr<http::HttpExchange> exchange) {
                           api->Handle(std::move(request), std::move(exchange));
                         }));
  if (!started.ok()) {
    server_->Shutdown();
    return Fail(kExitFailure, "http.listen", started.status());
  }
  http_ = *std::move(started);
  Log(absl::StrCat("http on ", h.listen().substr(0, h.listen().rfind(':')), ":",
                   http_->port(), tls.cert_file().empty() ? "" : " (TLS)"));
  return kExitOk;
}

int Daemon::StartMetricsExposer() {
  if (config_.metrics_listen().empty()) return kExitOk;
  absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> started =
      metrics::MetricsExposer::Start(config_.metrics_listen(), metrics_.get());
  if (!started.ok()) {
    server_->Shutdown();
    return Fail(kExitFailure, "metrics_listen", started.status());
  }
  exposer_ = *std::move(started);
  const std::string& m = config_.metrics_listen();
  Log(absl::StrCat("metrics on ", m.substr(0, m.rfind(':')), ":",
                   exposer_->port(), "/metrics"));
  return kExitOk;
}

// The gRPC server, the metrics endpoint, the engine thread and the pacer;
// then "ready".
int Daemon::StartServers() {
  if (int code = StartGrpc(); code != kExitOk) return code;
  if (int code = StartHttp(); code != kExitOk) return code;
  if (int code = StartMetricsExposer(); code != kExitOk) return code;
  loop_->Start();
  pacer_->Start();
  const std::string& listen = config_.listen();
  Log(absl::StrCat("listening on ", listen.substr(0, listen.rfind(':')), ":",
                   port_));
  if (!config_.tls().cert_file().empty()) {
    Log(config_.tls().client_ca_file().empty()
            ? "TLS: on"
            : "TLS: on, client certificates required (mutual TLS)");
  }
  Log("ready");
  if (absl::Status st = SdNotify("READY=1"); !st.ok()) {
    Log(absl::StrCat("sd_notify: ", st.message()));
  }
  return kExitOk;
}

void Daemon::WaitForCallsToEnd(absl::Time deadline) {
  while (frontend_->live_calls() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
}

void Daemon::Drain(int sig, absl::Time start) {
  const absl::Duration drain_timeout =
      absl::Seconds(config_.drain_timeout_seconds());
  frontend_->BeginDrain();
  server_->GetHealthCheckService()->SetServingStatus(false);
  SdNotify("STOPPING=1").IgnoreError();
  Log(absl::StrCat("received ", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                   "; draining (timeout ", absl::FormatDuration(drain_timeout),
                   ")"));
  WaitForCallsToEnd(start + drain_timeout);
  const int64_t cut = frontend_->live_calls();
  if (cut > 0) {
    Log(absl::StrCat("drain timeout: aborting ", cut, " call(s)"));
    frontend_->AbortAll(
        absl::AbortedError("the server shut down (drain timeout)"));
    // The cut calls write their last messages within half the margin; a
    // client that does not read them is not waited for.
    WaitForCallsToEnd(start + drain_timeout + kDrainMargin / 2);
  }
}

void Daemon::ServeAndDrain() {
  MemoryTrimmer trimmer(kTrimPeriod, HeapOfThisProcess());
  const int sig = WaitForSignal([this, &trimmer] {
    if (const int64_t cut = frontend_->AbortExpired(); cut > 0) {
      Log(absl::StrCat("max_stream_seconds: cut ", cut, " call(s)"));
    }
    trimmer.Tick(frontend_->live_calls() == 0, absl::Now());
  });
  const absl::Time start = absl::Now();
  Drain(sig, start);
  // gRPC cancels what is still open at the deadline.
  const absl::Time deadline =
      start + absl::Seconds(config_.drain_timeout_seconds()) + kDrainMargin;
  server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
  loop_->Stop(scheduler::StopMode::kCancel);
  pacer_->Stop();
  if (http_ != nullptr) http_->Stop();
  server_->Wait();
  Log(absl::StrCat("stopped; the drain took ",
                   absl::FormatDuration(absl::Now() - start)));
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
  BlockSignals();
  Daemon daemon(flags->config);
  if (int code = daemon.Start(); code != kExitOk) return code;
  daemon.ServeAndDrain();
  return kExitOk;
}

}  // namespace paceline::server
