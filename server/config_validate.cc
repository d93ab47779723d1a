// ValidateConfig and CheckHostPort (config.h): every field's check, each
// error described by the field's ConfigSource.

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/backend.h"
#include "engine/model/model_shapes.h"
#include "server/config.h"
#include "server/frontend/tenant_policy.h"

namespace paceline::server {
namespace {

absl::Status CheckReadableFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read '", path, "': ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a regular file"));
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read '", path, "': ", std::strerror(errno)));
  }
  std::fclose(f);
  return absl::OkStatus();
}

// 1-64 of [A-Za-z0-9_.-].
bool IsValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '.' || c == '-';
  });
}

bool IsHexDigest(absl::string_view digest) {
  return digest.size() == 64 &&
         std::all_of(digest.begin(), digest.end(), [](char c) {
           return absl::ascii_isxdigit(static_cast<unsigned char>(c));
         });
}

// Collects every problem found, each with where its field came from.
class Checker {
 public:
  explicit Checker(const ConfigSource* source) : source_(source) {}

  void Fail(absl::string_view path, absl::string_view message) {
    std::string where = source_ != nullptr ? source_->Describe(path)
                                           : absl::StrCat("field ", path);
    errors_.push_back(absl::StrCat(where, ": ", message));
  }

  template <typename T>
  void AtLeast(absl::string_view path, T value, T min) {
    if (!(value >= min)) {
      Fail(path, absl::StrCat("must be >= ", min, ", got ", value));
    }
  }

  // > 0 and finite (rules out NaN and infinities too).
  void Positive(absl::string_view path, double value) {
    if (!(value > 0) || !std::isfinite(value)) {
      Fail(path, absl::StrCat("must be > 0, got ", value));
    }
  }

  void NonNegative(absl::string_view path, double value) {
    if (!(value >= 0) || !std::isfinite(value)) {
      Fail(path, absl::StrCat("must be >= 0, got ", value));
    }
  }

  void Readable(absl::string_view path, const std::string& file) {
    if (absl::Status s = CheckReadableFile(file); !s.ok()) {
      Fail(path, s.message());
    }
  }

  absl::Status Result() const {
    if (errors_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
  }

 private:
  const ConfigSource* source_;
  std::vector<std::string> errors_;
};

// `at`: the message's path ("tls", "http.tls").
void CheckTls(const v1::ServerConfig::Tls& tls, Checker& check,
              absl::string_view at = "tls") {
  const auto field = [&](absl::string_view name) {
    return absl::StrCat(at, ".", name);
  };
  const bool cert = !tls.cert_file().empty();
  const bool key = !tls.key_file().empty();
  if (cert && !key) {
    check.Fail(field("key_file"),
               absl::StrCat("required with ", at, ".cert_file"));
  }
  if (key && !cert) {
    check.Fail(field("cert_file"),
               absl::StrCat("required with ", at, ".key_file"));
  }
  if (!tls.client_ca_file().empty() && !(cert && key)) {
    check.Fail(field("client_ca_file"),
               absl::StrCat("needs ", at, ".cert_file and ", at,
                            ".key_file (mutual TLS)"));
  }
  if (cert) check.Readable(field("cert_file"), tls.cert_file());
  if (key) check.Readable(field("key_file"), tls.key_file());
  if (!tls.client_ca_file().empty()) {
    check.Readable(field("client_ca_file"), tls.client_ca_file());
  }
}

// A served name: what a `model` field can carry in any API, and a
// Prometheus label value.
std::string ServedNameProblem(absl::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 256) return "is longer than 256 bytes";
  for (char c : name) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                    absl::StrContains("._-:/@+", c);
    if (!ok) {
      return absl::StrCat("has '", std::string(1, c),
                          "': letters, digits and ._-:/@+ only");
    }
  }
  return "";
}

void CheckServedNames(const v1::ServerConfig::Model& model, Checker& check) {
  std::vector<std::string> seen;
  auto one = [&](const std::string& field, const std::string& name) {
    if (std::string problem = ServedNameProblem(name); !problem.empty()) {
      check.Fail(field, absl::StrCat("'", name, "' ", problem));
    } else if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      check.Fail(field, absl::StrCat("'", name, "' is named twice"));
    }
    seen.push_back(name);
  };
  if (!model.served_name().empty()) {
    one("model.served_name", model.served_name());
  }
  for (int i = 0; i < model.aliases_size(); ++i) {
    one(absl::StrCat("model.aliases[", i, "]"), model.aliases(i));
  }
}

void CheckModel(const v1::ServerConfig::Model& model, Checker& check) {
  if (model.path().empty()) {
    check.Fail("model.path",
               "required: a GGUF file or dummy:SHAPE (or pass --model)");
  } else if (engine::IsDummyModelSpec(model.path())) {
    auto spec = engine::ParseDummyModelSpec(model.path());
    if (!spec.ok()) check.Fail("model.path", spec.status().message());
  } else {
    check.Readable("model.path", model.path());
  }
  if (!model.chat_template_file().empty()) {
    check.Readable("model.chat_template_file", model.chat_template_file());
  }
  CheckServedNames(model, check);
  if (model.backend() != "" && model.backend() != "cpu" &&
      model.backend() != "cuda") {
    check.Fail("model.backend",
               absl::StrCat("must be \"cpu\", \"cuda\" or \"\" (auto), got \"",
                            model.backend(), "\""));
  }
}

// cpu_kernels and state_dir.
void CheckMachineState(const v1::ServerConfig& config, Checker& check) {
  if (config.cpu_kernels() != "" && config.cpu_kernels() != "measure" &&
      config.cpu_kernels() != "highest") {
    check.Fail("cpu_kernels",
               absl::StrCat("must be \"measure\" or \"highest\", got \"",
                            config.cpu_kernels(), "\""));
  }
  struct stat st;
  if (!config.state_dir().empty() &&
      stat(config.state_dir().c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    check.Fail("state_dir", absl::StrCat("'", config.state_dir(),
                                         "' exists and is not a directory"));
  }
}

void CheckKvCache(const v1::ServerConfig::KvCache& kv, Checker& check) {
  if (kv.has_memory_bytes() && kv.memory_bytes() == 0) {
    check.Fail("kv_cache.memory_bytes", "must be > 0, got 0");
  }
  if (kv.has_memory_fraction()) {
    const double f = kv.memory_fraction();
    if (!(f > 0 && f <= 1)) {
      check.Fail("kv_cache.memory_fraction",
                 absl::StrCat("must be in (0, 1], got ", f));
    }
  }
  if (!kv.dtype().empty() && !engine::ParseKvDtype(kv.dtype()).ok()) {
    check.Fail("kv_cache.dtype",
               absl::StrCat("must be \"f32\", \"f16\", \"q8_0\", \"bf16\" "
                            "(CUDA, beside BF16 weights) or \"\" (the "
                            "backend's), got \"",
                            kv.dtype(), "\""));
  }
  if (kv.has_block_size()) {
    const int32_t b = kv.block_size();
    if (b < 1 || b > 256 || (b & (b - 1)) != 0) {
      check.Fail("kv_cache.block_size",
                 absl::StrCat("must be a power of two in [1, 256], got ", b));
    }
  }
}

void CheckScheduler(const v1::ServerConfig::Scheduler& s, Checker& check) {
  check.AtLeast("scheduler.max_batched_tokens", s.max_batched_tokens(), 0);
  if (s.has_max_running()) {
    check.AtLeast("scheduler.max_running", s.max_running(), 1);
  }
  if (s.has_speculation_max_step_tokens()) {
    check.AtLeast("scheduler.speculation_max_step_tokens",
                  s.speculation_max_step_tokens(), 0);
  }
  if (s.has_prompt_token_weight()) {
    check.Positive("scheduler.prompt_token_weight", s.prompt_token_weight());
  }
  if (s.has_generated_token_weight()) {
    check.Positive("scheduler.generated_token_weight",
                   s.generated_token_weight());
  }
}

void CheckGrpc(const v1::ServerConfig::Grpc& g, Checker& check) {
  if (g.has_max_message_bytes()) {
    check.AtLeast("grpc.max_message_bytes", g.max_message_bytes(), 1024);
  }
  if (g.has_max_concurrent_streams()) {
    check.AtLeast("grpc.max_concurrent_streams", g.max_concurrent_streams(), 1);
  }
  if (g.has_keepalive_time_seconds()) {
    check.AtLeast("grpc.keepalive_time_seconds", g.keepalive_time_seconds(), 1);
  }
  if (g.has_keepalive_timeout_seconds()) {
    check.AtLeast("grpc.keepalive_timeout_seconds",
                  g.keepalive_timeout_seconds(), 1);
  }
}

void CheckHttp(const v1::ServerConfig::Http& h, Checker& check) {
  if (h.has_listen() && !h.listen().empty()) {
    if (absl::Status s = CheckHostPort(h.listen()); !s.ok()) {
      check.Fail("http.listen", s.message());
    }
  }
  if (h.has_tls()) CheckTls(h.tls(), check, "http.tls");
  if (h.has_max_header_bytes()) {
    check.AtLeast("http.max_header_bytes", h.max_header_bytes(), 1024);
  }
  if (h.has_max_body_bytes()) {
    check.AtLeast("http.max_body_bytes", h.max_body_bytes(), int64_t{1024});
  }
  if (h.has_request_timeout_seconds()) {
    check.AtLeast("http.request_timeout_seconds", h.request_timeout_seconds(),
                  1);
  }
  if (h.has_idle_timeout_seconds()) {
    check.AtLeast("http.idle_timeout_seconds", h.idle_timeout_seconds(), 1);
  }
  if (h.has_max_connections()) {
    check.AtLeast("http.max_connections", h.max_connections(), 1);
  }
  if (h.has_threads()) check.AtLeast("http.threads", h.threads(), 1);
  if (h.has_send_buffer_bytes()) {
    check.AtLeast("http.send_buffer_bytes", h.send_buffer_bytes(), 4096);
  }
  for (int i = 0; i < h.cors_origins_size(); ++i) {
    const std::string& origin = h.cors_origins(i);
    // An origin is scheme://host[:port], nothing after (RFC 6454).
    const size_t scheme = origin.find("://");
    const bool ok =
        origin == "*" || (scheme != std::string::npos && scheme > 0 &&
                          scheme + 3 < origin.size() &&
                          origin.find('/', scheme + 3) == std::string::npos);
    if (!ok) {
      check.Fail(absl::StrCat("http.cors_origins[", i, "]"),
                 absl::StrCat("'", origin,
                              "' is not an origin: scheme://host[:port] "
                              "(\"https://app.example.com\") or \"*\""));
    }
  }
}

void CheckAddresses(const v1::ServerConfig& config, Checker& check) {
  if (absl::StartsWith(config.listen(), "unix:")) {
    if (config.listen().size() == 5) {
      check.Fail("listen", "unix: needs a socket path, e.g. unix:/run/p.sock");
    }
  } else if (!config.listen().empty()) {
    if (absl::Status s = CheckHostPort(config.listen()); !s.ok()) {
      check.Fail("listen", s.message());
    }
  }
  if (!config.metrics_listen().empty()) {
    if (absl::Status s = CheckHostPort(config.metrics_listen()); !s.ok()) {
      check.Fail("metrics_listen", s.message());
    }
    const absl::string_view listen =
        config.listen().empty() ? kDefaultListen : config.listen();
    if (config.metrics_listen() == listen &&
        !absl::EndsWith(config.metrics_listen(), ":0")) {
      check.Fail("metrics_listen", "must differ from listen");
    }
  }
}

// One tenant's own fields; names and digests across tenants are checked by
// the caller.
void CheckTenant(const v1::TenantConfig& t, const std::string& at,
                 Checker& check) {
  if (!IsValidName(t.name())) {
    check.Fail(
        at + ".name",
        absl::StrCat("must be 1-64 of [A-Za-z0-9_.-], got \"", t.name(), "\""));
  }
  if (t.api_key_sha256().empty()) {
    check.Fail(at + ".api_key_sha256",
               "at least one API-key digest is required");
  }
  for (int k = 0; k < t.api_key_sha256_size(); ++k) {
    if (!IsHexDigest(t.api_key_sha256(k))) {
      check.Fail(absl::StrCat(at, ".api_key_sha256[", k, "]"),
                 absl::StrCat("must be 64 hex digits (the key's SHA-256, not "
                              "the key itself), got ",
                              t.api_key_sha256(k).size(), " characters"));
    }
  }
  if (t.has_weight()) check.Positive(at + ".weight", t.weight());
  check.AtLeast(at + ".max_running", t.max_running(), 0);
  if (t.has_max_queued()) check.AtLeast(at + ".max_queued", t.max_queued(), 0);
  check.AtLeast<int64_t>(at + ".tokens_per_minute", t.tokens_per_minute(), 0);
  check.NonNegative(at + ".max_pace_tokens_per_s", t.max_pace_tokens_per_s());
  if (t.has_max_stop_strings()) {
    check.AtLeast(at + ".max_stop_strings", t.max_stop_strings(), 0);
  }
  if (t.has_max_stop_string_bytes()) {
    check.AtLeast(at + ".max_stop_string_bytes", t.max_stop_string_bytes(), 1);
  }
  if (t.has_max_stop_token_ids()) {
    check.AtLeast(at + ".max_stop_token_ids", t.max_stop_token_ids(), 0);
  }
  const int32_t drafts = t.speculation().max_draft_tokens();
  if (drafts < 0 || drafts > scheduler::kMaxDraftTokens) {
    check.Fail(at + ".speculation.max_draft_tokens",
               absl::StrCat("must be in [0, ", scheduler::kMaxDraftTokens,
                            "], got ", drafts));
  }
  if (!ParseMaxPriority(t.max_priority())) {
    check.Fail(at + ".max_priority",
               absl::StrCat("must be \"interactive\", \"standard\" or "
                            "\"batch\", got \"",
                            t.max_priority(), "\""));
  }
  if (t.has_min_pace_tokens_per_s()) {
    const double min = t.min_pace_tokens_per_s();
    const double max = t.max_pace_tokens_per_s();
    if (!(min > 0 && std::isfinite(min)) || (max > 0 && min > max)) {
      check.Fail(at + ".min_pace_tokens_per_s",
                 absl::StrCat("must be > 0 and at most max_pace_tokens_per_s "
                              "when that is set, got ",
                              min));
    }
  }
  if (t.has_default_pace_tokens_per_s()) {
    const double pace = t.default_pace_tokens_per_s();
    const double max = t.max_pace_tokens_per_s();
    check.NonNegative(at + ".default_pace_tokens_per_s", pace);
    if (t.has_min_pace_tokens_per_s() && pace > 0 &&
        pace < t.min_pace_tokens_per_s()) {
      check.Fail(at + ".default_pace_tokens_per_s",
                 absl::StrCat("must be 0 (unpaced) or at least "
                              "min_pace_tokens_per_s = ",
                              t.min_pace_tokens_per_s(), ", got ", pace));
    }
    if (max > 0 && !(pace > 0 && pace <= max)) {
      check.Fail(at + ".default_pace_tokens_per_s",
                 absl::StrCat("must be in (0, max_pace_tokens_per_s = ", max,
                              "], got ", pace,
                              pace == 0 ? " (unpaced exceeds the cap)" : ""));
    }
  }
  if (t.has_default_burst_tokens()) {
    check.AtLeast(at + ".default_burst_tokens", t.default_burst_tokens(), 1);
  }
  check.AtLeast(at + ".max_prompt_tokens", t.max_prompt_tokens(), 0);
  check.AtLeast(at + ".max_tokens_limit", t.max_tokens_limit(), 0);
  if (t.has_default_max_tokens()) {
    check.AtLeast(at + ".default_max_tokens", t.default_max_tokens(), 1);
    if (t.max_tokens_limit() > 0 &&
        t.default_max_tokens() > t.max_tokens_limit()) {
      check.Fail(
          at + ".default_max_tokens",
          absl::StrCat("must be <= max_tokens_limit = ", t.max_tokens_limit(),
                       ", got ", t.default_max_tokens()));
    }
  }
  if (!t.prefix_cache_scope().empty() && !IsValidName(t.prefix_cache_scope())) {
    check.Fail(at + ".prefix_cache_scope",
               absl::StrCat("must be \"\" or 1-64 of [A-Za-z0-9_.-], got \"",
                            t.prefix_cache_scope(), "\""));
  }
}

void CheckTenants(const v1::ServerConfig& config, Checker& check) {
  if (config.tenants().empty()) {
    check.Fail("tenants",
               "at least one tenant is required (in the config, or "
               "--tenant NAME:KEY)");
  }
  absl::flat_hash_map<std::string, int> names;    // name -> first tenant
  absl::flat_hash_map<std::string, int> digests;  // lower-case -> tenant
  for (int i = 0; i < config.tenants_size(); ++i) {
    const v1::TenantConfig& t = config.tenants(i);
    const std::string at = absl::StrCat("tenants[", i, "]");
    CheckTenant(t, at, check);
    if (auto [it, added] = names.try_emplace(t.name(), i); !added) {
      check.Fail(at + ".name",
                 absl::StrCat("duplicate tenant name \"", t.name(),
                              "\" (also tenants[", it->second, "])"));
    }
    for (int k = 0; k < t.api_key_sha256_size(); ++k) {
      if (!IsHexDigest(t.api_key_sha256(k))) continue;
      auto [it, added] =
          digests.try_emplace(absl::AsciiStrToLower(t.api_key_sha256(k)), i);
      if (added) continue;
      const int other = it->second;
      check.Fail(absl::StrCat(at, ".api_key_sha256[", k, "]"),
                 other == i
                     ? std::string("the same key digest is listed twice")
                     : absl::StrCat("the same key digest as tenants[", other,
                                    "] (\"", config.tenants(other).name(),
                                    "\"): a key must name one tenant"));
    }
  }
}

}  // namespace

absl::Status ValidateConfig(const v1::ServerConfig& config,
                            const ConfigSource* source) {
  Checker check(source);
  CheckAddresses(config, check);
  CheckTls(config.tls(), check);
  CheckModel(config.model(), check);
  CheckKvCache(config.kv_cache(), check);
  CheckMachineState(config, check);
  CheckScheduler(config.scheduler(), check);
  check.AtLeast("threads", config.threads(), 0);
  if (config.has_drain_timeout_seconds()) {
    check.AtLeast("drain_timeout_seconds", config.drain_timeout_seconds(), 0);
  }
  if (config.has_max_response_bytes()) {
    check.AtLeast("max_response_bytes", config.max_response_bytes(),
                  int64_t{0});
  }
  if (config.has_max_unread_bytes()) {
    check.AtLeast("max_unread_bytes", config.max_unread_bytes(), int64_t{0});
  }
  if (config.has_max_stream_seconds()) {
    check.AtLeast("max_stream_seconds", config.max_stream_seconds(), 0);
  }
  if (config.intake().has_threads()) {
    check.AtLeast("intake.threads", config.intake().threads(), 1);
  }
  if (config.intake().has_max_queued_per_tenant()) {
    check.AtLeast("intake.max_queued_per_tenant",
                  config.intake().max_queued_per_tenant(), 1);
  }
  CheckGrpc(config.grpc(), check);
  CheckHttp(config.http(), check);
  CheckTenants(config, check);
  return check.Result();
}

absl::Status CheckHostPort(absl::string_view address) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "want HOST:PORT (e.g. 127.0.0.1:50051 or [::1]:50051), got \"", address,
        "\": ", why));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return invalid("no port");
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty()) return invalid("no host");
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') {
      return invalid("unterminated IPv6 address");
    }
    host = host.substr(1, host.size() - 2);
    const bool ok = std::all_of(host.begin(), host.end(), [](char c) {
      return absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == ':' ||
             c == '.' || c == '%';
    });
    if (!ok || host.find(':') == absl::string_view::npos) {
      return invalid("bad IPv6 address");
    }
  } else {
    const bool ok = std::all_of(host.begin(), host.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
             c == '.' || c == '_';
    });
    if (!ok) return invalid("bad host (an IPv6 address needs [brackets])");
  }
  int port_number = 0;
  if (port.empty() ||
      !std::all_of(port.begin(), port.end(),
                   [](char c) { return c >= '0' && c <= '9'; }) ||
      port.size() > 5 || !absl::SimpleAtoi(port, &port_number) ||
      port_number > 65535) {
    return invalid("port must be a number in 0..65535");
  }
  return absl::OkStatus();
}

}  // namespace paceline::server
