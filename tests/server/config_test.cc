#include "server/config.h"

#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"

namespace paceline::server {
namespace {

using ::paceline::testing::TempPath;
using ::paceline::testing::WriteFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kAliceDigest =
    "cdabd6c99d102e7c4bd22674e77ed48f54b5c5790aee9f05d5be8efcdf2ebaeb";
const std::string kBobDigest =
    "18f19cbec1bab41c1c4ef048c490fd45969426c9ce284ff5e849ed41d36e099f";

// A minimal valid config with `tenants` text appended.
std::string Minimal(const std::string& more) {
  return absl::StrCat("model { path: \"dummy:stories15m\" }\n", more);
}

std::string Tenant(const std::string& name, const std::string& digest,
                   const std::string& more = "") {
  return absl::StrCat("tenants {\n  name: \"", name, "\"\n  api_key_sha256: \"",
                      digest, "\"\n", more, "}\n");
}

// Loads `text` as a file named `name`; the error message (or "" when OK).
std::string LoadError(const std::string& name, const std::string& text) {
  absl::StatusOr<v1::ServerConfig> config =
      LoadConfigFile(WriteFile(name, text));
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

TEST(ConfigTest, FullConfigLoadsEveryField) {
  const std::string cert = WriteFile("full_cert.pem", "cert");
  const std::string key = WriteFile("full_key.pem", "key");
  const std::string ca = WriteFile("full_ca.pem", "ca");
  const std::string model = WriteFile("full_model.gguf", "GGUF");
  const std::string text = absl::StrCat(R"(
listen: "[::1]:6000"
tls { cert_file: ")",
                                        cert, R"(" key_file: ")", key,
                                        R"(" client_ca_file: ")", ca, R"(" }
model { path: ")",
                                        model, R"(" backend: "cpu" }
kv_cache { memory_bytes: 1073741824 block_size: 32 }
scheduler {
  max_batched_tokens: 1024
  max_running: 64
  prompt_token_weight: 0.5
  generated_token_weight: 3
}
threads: 8
metrics_listen: "0.0.0.0:9464"
drain_timeout_seconds: 0
grpc {
  max_message_bytes: 1048576
  max_concurrent_streams: 10
  keepalive_time_seconds: 30
  keepalive_timeout_seconds: 5
}
tenants {
  name: "alice"
  api_key_sha256: ")",
                                        kAliceDigest, R"("
  api_key_sha256: "ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789"
  weight: 2.5
  max_running: 4
  max_queued: 0
  tokens_per_minute: 60000
  default_pace_tokens_per_s: 10
  max_pace_tokens_per_s: 50
  default_burst_tokens: 4
  max_prompt_tokens: 2048
  max_tokens_limit: 512
  default_max_tokens: 128
  prefix_cache_scope: "shared-docs"
}
)",
                                        Tenant("bob", kBobDigest));
  absl::StatusOr<v1::ServerConfig> config =
      LoadConfigFile(WriteFile("full.textproto", text));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen(), "[::1]:6000");
  EXPECT_EQ(config->tls().cert_file(), cert);
  EXPECT_EQ(config->tls().key_file(), key);
  EXPECT_EQ(config->tls().client_ca_file(), ca);
  EXPECT_EQ(config->model().path(), model);
  EXPECT_EQ(config->model().backend(), "cpu");
  EXPECT_EQ(config->kv_cache().memory_bytes(), 1073741824u);
  EXPECT_FALSE(config->kv_cache().has_memory_fraction());
  EXPECT_EQ(config->kv_cache().block_size(), 32);
  EXPECT_EQ(config->scheduler().max_batched_tokens(), 1024);
  EXPECT_EQ(config->scheduler().max_running(), 64);
  EXPECT_EQ(config->scheduler().prompt_token_weight(), 0.5);
  EXPECT_EQ(config->scheduler().generated_token_weight(), 3);
  EXPECT_EQ(config->threads(), 8);
  EXPECT_EQ(config->metrics_listen(), "0.0.0.0:9464");
  EXPECT_EQ(config->drain_timeout_seconds(), 0);
  EXPECT_EQ(config->grpc().max_message_bytes(), 1048576);
  EXPECT_EQ(config->grpc().max_concurrent_streams(), 10);
  EXPECT_EQ(config->grpc().keepalive_time_seconds(), 30);
  EXPECT_EQ(config->grpc().keepalive_timeout_seconds(), 5);
  ASSERT_EQ(config->tenants_size(), 2);
  const v1::TenantConfig& alice = config->tenants(0);
  EXPECT_EQ(alice.name(), "alice");
  ASSERT_EQ(alice.api_key_sha256_size(), 2);
  EXPECT_EQ(alice.api_key_sha256(0), kAliceDigest);
  // Digests are normalized to lower case.
  EXPECT_EQ(alice.api_key_sha256(1),
            "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  EXPECT_EQ(alice.weight(), 2.5);
  EXPECT_EQ(alice.max_running(), 4);
  EXPECT_EQ(alice.max_queued(), 0);
  EXPECT_EQ(alice.tokens_per_minute(), 60000);
  EXPECT_EQ(alice.default_pace_tokens_per_s(), 10);
  EXPECT_EQ(alice.max_pace_tokens_per_s(), 50);
  EXPECT_EQ(alice.default_burst_tokens(), 4);
  EXPECT_EQ(alice.max_prompt_tokens(), 2048);
  EXPECT_EQ(alice.max_tokens_limit(), 512);
  EXPECT_EQ(alice.default_max_tokens(), 128);
  EXPECT_EQ(alice.prefix_cache_scope(), "shared-docs");
  EXPECT_EQ(config->tenants(1).name(), "bob");
}

TEST(ConfigTest, DefaultsFillUnsetFields) {
  absl::StatusOr<v1::ServerConfig> config = LoadConfigFile(WriteFile(
      "defaults.textproto",
      Minimal(Tenant("alice", kAliceDigest, "max_tokens_limit: 100\n") +
              Tenant("bob", kBobDigest, "max_pace_tokens_per_s: 30\n"))));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen(), "127.0.0.1:50051");
  EXPECT_FALSE(config->has_tls());
  EXPECT_EQ(config->model().backend(), "");
  EXPECT_EQ(config->kv_cache().memory_fraction(), 0.5);
  EXPECT_EQ(config->kv_cache().block_size(), 16);
  EXPECT_EQ(config->scheduler().max_batched_tokens(), 0);
  EXPECT_EQ(config->scheduler().max_running(), 256);
  EXPECT_EQ(config->scheduler().prompt_token_weight(), 1);
  EXPECT_EQ(config->scheduler().generated_token_weight(), 2);
  EXPECT_EQ(config->threads(), 0);
  EXPECT_EQ(config->metrics_listen(), "");
  EXPECT_EQ(config->drain_timeout_seconds(), 30);
  EXPECT_EQ(config->max_stream_seconds(), 3600);
  EXPECT_GE(config->intake().threads(), 1);
  EXPECT_EQ(config->intake().max_queued_per_tenant(), 1024);
  EXPECT_EQ(config->grpc().max_message_bytes(), 4 << 20);
  EXPECT_EQ(config->grpc().max_concurrent_streams(), 1000);
  EXPECT_EQ(config->grpc().keepalive_time_seconds(), 60);
  EXPECT_EQ(config->grpc().keepalive_timeout_seconds(), 20);
  const v1::TenantConfig& alice = config->tenants(0);
  EXPECT_EQ(alice.weight(), 1);
  EXPECT_EQ(alice.max_running(), 0);
  EXPECT_EQ(alice.max_queued(), 1024);
  EXPECT_EQ(alice.tokens_per_minute(), 0);
  EXPECT_EQ(alice.default_pace_tokens_per_s(), 0);
  EXPECT_EQ(alice.default_burst_tokens(), 1);
  EXPECT_EQ(alice.min_pace_tokens_per_s(), 1);
  EXPECT_EQ(alice.max_stop_strings(), 16);
  EXPECT_EQ(alice.max_stop_string_bytes(), 256);
  EXPECT_EQ(alice.max_stop_token_ids(), 64);
  EXPECT_EQ(alice.default_max_tokens(), 100);  // 256 capped by the limit
  EXPECT_EQ(alice.prefix_cache_scope(), "");
  const v1::TenantConfig& bob = config->tenants(1);
  EXPECT_EQ(bob.default_pace_tokens_per_s(), 30);  // the max pace
  EXPECT_EQ(bob.default_max_tokens(), 256);

  v1::ServerConfig again = *config;
  ApplyDefaults(&again);
  EXPECT_EQ(again.SerializeAsString(), config->SerializeAsString());
}

TEST(ConfigTest, SyntaxErrorHasFileLineColumn) {
  const std::string path = WriteFile("syntax.textproto", Minimal(R"(
tenants {
  name: "alice"
  wieght: 2
}
)"));
  absl::StatusOr<ParsedConfigFile> parsed = ParseConfigFile(path);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      parsed.status().message(),
      AllOf(HasSubstr(absl::StrCat(path, ":5:9: ")), HasSubstr("wieght")));
}

TEST(ConfigTest, TypeErrorAndDuplicateFieldAreSyntaxErrors) {
  std::string path = WriteFile("type.textproto", "threads: \"eight\"\n");
  EXPECT_THAT(ParseConfigFile(path).status().message(),
              HasSubstr(absl::StrCat(path, ":1:10: ")));
  path = WriteFile("twice.textproto", "threads: 1\nthreads: 2\n");
  EXPECT_THAT(ParseConfigFile(path).status().message(),
              HasSubstr(absl::StrCat(path, ":2:")));
  path = WriteFile("oneof.textproto",
                   "kv_cache {\n memory_bytes: 10\n memory_fraction: 0.5\n}\n");
  EXPECT_THAT(
      ParseConfigFile(path).status().message(),
      AllOf(HasSubstr(absl::StrCat(path, ":3:")), HasSubstr("memory_bytes")));
}

TEST(ConfigTest, MissingFileIsNotFound) {
  absl::StatusOr<v1::ServerConfig> config =
      LoadConfigFile(TempPath("no_such.textproto"));
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("no_such.textproto"));
}

// Each case: a config, the line and field path its error must name.
struct SemanticCase {
  std::string text;
  int line = 0;
  std::string field;
  std::string message;
};

TEST(ConfigTest, SemanticErrorsNameFileLineAndField) {
  const std::string a = Tenant("alice", kAliceDigest);  // 4 lines
  const SemanticCase cases[] = {
      // Line 1 is the model line of Minimal().
      {Minimal(a + Tenant("bob", kBobDigest, "  weight: -1\n")), 9,
       "tenants[1].weight", "must be > 0, got -1"},
      {Minimal(a + Tenant("bob", kBobDigest, "  max_queued: -3\n")), 9,
       "tenants[1].max_queued", "must be >= 0, got -3"},
      {Minimal(a + Tenant("bob", kBobDigest,
                          "  max_pace_tokens_per_s: 10\n"
                          "  default_pace_tokens_per_s: 20\n")),
       10, "tenants[1].default_pace_tokens_per_s", "must be in (0"},
      {Minimal(a + Tenant("bob", kBobDigest, "  max_stop_string_bytes: 0\n")),
       9, "tenants[1].max_stop_string_bytes", "must be >= 1"},
      {Minimal(a + Tenant("bob", kBobDigest, "  min_pace_tokens_per_s: 0\n")),
       9, "tenants[1].min_pace_tokens_per_s", "must be > 0"},
      {Minimal(a + Tenant("bob", kBobDigest,
                          "  default_pace_tokens_per_s: 0.5\n")),
       9, "tenants[1].default_pace_tokens_per_s",
       "must be 0 (unpaced) or at least min_pace_tokens_per_s = 1"},
      {Minimal(a + Tenant("bob", kBobDigest,
                          "  max_tokens_limit: 10\n"
                          "  default_max_tokens: 20\n")),
       10, "tenants[1].default_max_tokens", "max_tokens_limit"},
      {Minimal(a + Tenant("b o b", kBobDigest)), 7, "tenants[1].name",
       "A-Za-z0-9"},
      {Minimal(a + Tenant("bob", kBobDigest, "  max_priority: \"urgent\"\n")),
       9, "tenants[1].max_priority",
       "must be \"interactive\", \"standard\" or \"batch\", got \"urgent\""},
      {Minimal(a + Tenant("bob", kBobDigest,
                          "  speculation { max_draft_tokens: 17 }\n")),
       9, "tenants[1].speculation.max_draft_tokens",
       "must be in [0, 16], got 17"},
      {Minimal(a + "scheduler {\n  speculation_max_step_tokens: -1\n}\n"), 7,
       "scheduler.speculation_max_step_tokens", "must be >= 0"},
      {Minimal(a + "kv_cache {\n  block_size: 24\n}\n"), 7,
       "kv_cache.block_size", "power of two"},
      {Minimal(a + "kv_cache { memory_fraction: 1.5 }\n"), 6,
       "kv_cache.memory_fraction", "(0, 1]"},
      {Minimal(a + "\nlisten: \"localhost\"\n"), 7, "listen", "HOST:PORT"},
      {Minimal(a + "listen: \"[::1:80\"\n"), 6, "listen", "IPv6"},
      {Minimal(a + "metrics_listen: \"1.2.3.4:70000\"\n"), 6, "metrics_listen",
       "0..65535"},
      {Minimal(a + "threads: -2\n"), 6, "threads", "must be >= 0, got -2"},
      {Minimal(a + "max_stream_seconds: -1\n"), 6, "max_stream_seconds",
       "must be >= 0, got -1"},
      {Minimal(a + "intake {\n  threads: 0\n}\n"), 7, "intake.threads",
       "must be >= 1, got 0"},
      {Minimal(a + "intake { max_queued_per_tenant: 0 }\n"), 6,
       "intake.max_queued_per_tenant", "must be >= 1, got 0"},
      {Minimal(a + "grpc {\n  keepalive_time_seconds: 0\n}\n"), 7,
       "grpc.keepalive_time_seconds", "must be >= 1, got 0"},
      {Minimal(a + "scheduler {\n  generated_token_weight: 0\n}\n"), 7,
       "scheduler.generated_token_weight", "must be > 0"},
      {"model { backend: \"tpu\" path: \"dummy:stories15m\" }\n" + a, 1,
       "model.backend", "tpu"},
      {"model { path: \"dummy:no-such-shape\" }\n" + a, 1, "model.path",
       "no-such-shape"},
      {Minimal(a + "cpu_kernels: \"fastest\"\n"), 6, "cpu_kernels",
       "must be \"measure\" or \"highest\", got \"fastest\""},
      {Minimal(a + "state_dir: \"/etc/hostname\"\n"), 6, "state_dir",
       "exists and is not a directory"},
      // A missing field takes the line of the block around it.
      {Minimal("tenants {\n  name: \"alice\"\n}\n"), 2,
       "tenants[0].api_key_sha256", "at least one"},
  };
  int n = 0;
  for (const SemanticCase& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string path =
        WriteFile(absl::StrCat("semantic", n++, ".textproto"), c.text);
    absl::StatusOr<v1::ServerConfig> config = LoadConfigFile(path);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(),
                AllOf(HasSubstr(absl::StrCat(path, ":", c.line, ": field ",
                                             c.field, ": ")),
                      HasSubstr(c.message)));
  }
}

TEST(ConfigTest, ExampleErrorReadsAsDocumented) {
  const std::string path = WriteFile(
      "weight.textproto", Minimal(Tenant("alice", kAliceDigest) +
                                  Tenant("bob", kBobDigest, "  weight: -1\n")));
  EXPECT_EQ(LoadConfigFile(path).status().message(),
            absl::StrCat(path,
                         ":9: field tenants[1].weight: must be > 0, "
                         "got -1"));
}

TEST(ConfigTest, EveryProblemIsReported) {
  const std::string message = LoadError(
      "many.textproto", Minimal(Tenant("alice", kAliceDigest, "  weight: 0\n") +
                                "threads: -1\n"));
  EXPECT_THAT(message, HasSubstr("tenants[0].weight"));
  EXPECT_THAT(message, HasSubstr("field threads"));
}

TEST(ConfigTest, NoTenantsIsAnError) {
  const std::string path = WriteFile("none.textproto", Minimal(""));
  EXPECT_THAT(LoadConfigFile(path).status().message(),
              HasSubstr(absl::StrCat(path, ": field tenants: at least one")));
}

TEST(ConfigTest, DuplicateTenantName) {
  EXPECT_THAT(
      LoadError("dupname.textproto", Minimal(Tenant("alice", kAliceDigest) +
                                             Tenant("alice", kBobDigest))),
      AllOf(HasSubstr(":7: field tenants[1].name"),
            HasSubstr("duplicate tenant name \"alice\""),
            HasSubstr("tenants[0]")));
}

TEST(ConfigTest, DuplicateDigestAcrossTenantsInAnyCase) {
  std::string upper = kAliceDigest;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  EXPECT_THAT(
      LoadError("dupkey.textproto",
                Minimal(Tenant("alice", kAliceDigest) + Tenant("bob", upper))),
      AllOf(HasSubstr(":8: field tenants[1].api_key_sha256[0]"),
            HasSubstr("same key digest as tenants[0] (\"alice\")")));
  EXPECT_THAT(LoadError("dupkey_same.textproto",
                        Minimal(Tenant(
                            "alice", kAliceDigest,
                            "  api_key_sha256: \"" + kAliceDigest + "\"\n"))),
              HasSubstr("tenants[0].api_key_sha256[1]: the same key digest "
                        "is listed twice"));
}

TEST(ConfigTest, BadHexDigest) {
  EXPECT_THAT(LoadError("badhex.textproto",
                        Minimal(Tenant("alice", std::string(63, 'a') + "g"))),
              AllOf(HasSubstr(":4: field tenants[0].api_key_sha256[0]"),
                    HasSubstr("64 hex digits")));
  EXPECT_THAT(LoadError("shorthex.textproto", Minimal(Tenant("alice", "abcd"))),
              HasSubstr("64 hex digits"));
}

TEST(ConfigTest, TlsNeedsCertAndKeyAndReadableFiles) {
  const std::string cert = WriteFile("tls_cert.pem", "cert");
  const std::string tenants = Tenant("alice", kAliceDigest);
  EXPECT_THAT(
      LoadError("tls_nokey.textproto",
                Minimal("tls {\n  cert_file: \"" + cert + "\"\n}\n" + tenants)),
      HasSubstr(":2: field tls.key_file: required with tls.cert_file"));
  const std::string missing = TempPath("no_such_key.pem");
  EXPECT_THAT(
      LoadError("tls_missing.textproto",
                Minimal("tls {\n  cert_file: \"" + cert + "\"\n  key_file: \"" +
                        missing + "\"\n}\n" + tenants)),
      AllOf(HasSubstr(":4: field tls.key_file: cannot read"),
            HasSubstr("no_such_key.pem")));
  EXPECT_THAT(
      LoadError("tls_ca.textproto", Minimal("tls {\n  client_ca_file: \"" +
                                            cert + "\"\n}\n" + tenants)),
      HasSubstr(":3: field tls.client_ca_file: needs tls.cert_file"));
}

TEST(ConfigTest, ModelFileMustBeReadable) {
  EXPECT_THAT(LoadError("model_missing.textproto",
                        "model {\n  path: \"/no/such/model.gguf\"\n}\n" +
                            Tenant("alice", kAliceDigest)),
              HasSubstr(":2: field model.path: cannot read"));
  EXPECT_THAT(LoadError("model_unset.textproto", Tenant("alice", kAliceDigest)),
              HasSubstr(": field model.path: required"));
}

TEST(ConfigTest, ChatTemplateFileMustBeReadable) {
  EXPECT_THAT(LoadError("chat_missing.textproto",
                        "model {\n  path: \"dummy:stories15m\"\n"
                        "  chat_template_file: \"/no/such/chat.jinja\"\n}\n" +
                            Tenant("alice", kAliceDigest)),
              HasSubstr(":3: field model.chat_template_file: cannot read "
                        "'/no/such/chat.jinja'"));
  EXPECT_THAT(LoadError("chat_dir.textproto",
                        "model {\n  path: \"dummy:stories15m\"\n"
                        "  chat_template_file: \"/tmp\"\n}\n" +
                            Tenant("alice", kAliceDigest)),
              HasSubstr(":3: field model.chat_template_file: '/tmp' is not a "
                        "regular file"));
  const std::string chat = WriteFile("config_chat.jinja", "{{ messages }}");
  EXPECT_EQ(LoadError("chat_ok.textproto",
                      "model {\n  path: \"dummy:stories15m\"\n"
                      "  chat_template_file: \"" +
                          chat + "\"\n}\n" + Tenant("alice", kAliceDigest)),
            "");
}

TEST(ConfigTest, ValidateWithoutSourceNamesFieldOnly) {
  v1::ServerConfig config;
  config.mutable_model()->set_path("dummy:stories15m");
  v1::TenantConfig* t = config.add_tenants();
  t->set_name("alice");
  t->add_api_key_sha256(kAliceDigest);
  t->set_weight(-1);
  EXPECT_EQ(ValidateConfig(config).message(),
            "field tenants[0].weight: must be > 0, got -1");
  t->set_weight(1);
  EXPECT_TRUE(ValidateConfig(config).ok());
  ApplyDefaults(&config);
  EXPECT_TRUE(ValidateConfig(config).ok());
}

TEST(ConfigTest, HostPort) {
  for (const char* ok : {"127.0.0.1:50051", "[::1]:0", "[::]:65535",
                         "localhost:80", "my-host.example.com:443"}) {
    EXPECT_TRUE(CheckHostPort(ok).ok()) << ok;
  }
  for (const char* bad :
       {"", "50051", ":50051", "host:", "host:65536", "host:-1", "::1:80",
        "[::1]", "[]:80", "host:8o", "a b:1", "[zz]:80"}) {
    EXPECT_FALSE(CheckHostPort(bad).ok()) << bad;
  }
}

TEST(ConfigTest, UnixListen) {
  EXPECT_EQ(
      LoadError("unix.textproto", Minimal("listen: \"unix:/tmp/p.sock\"\n" +
                                          Tenant("alice", kAliceDigest))),
      "");
  EXPECT_THAT(
      LoadError("unix_empty.textproto",
                Minimal("listen: \"unix:\"\n" + Tenant("alice", kAliceDigest))),
      HasSubstr(":2: field listen: unix: needs"));
}

}  // namespace
}  // namespace paceline::server
