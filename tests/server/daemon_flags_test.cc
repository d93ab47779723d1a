#include "server/daemon_flags.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/frontend/sha256.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"

namespace paceline::server {
namespace {

using ::paceline::testing::WriteFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kAliceDigest =
    "cdabd6c99d102e7c4bd22674e77ed48f54b5c5790aee9f05d5be8efcdf2ebaeb";

absl::StatusOr<DaemonOptions> Parse(std::vector<std::string> args) {
  return ParseDaemonFlags(args);
}

// A config file with tenant "alice" (the sample key) and a dummy model.
std::string AliceConfig() {
  return WriteFile("flags_alice.textproto", absl::StrCat(R"(
listen: "127.0.0.1:7000"
threads: 3
model { path: "dummy:stories15m" }
kv_cache { memory_fraction: 0.25 }
tenants {
  name: "alice"
  api_key_sha256: ")",
                                                         kAliceDigest, R"("
  weight: 2
}
)"));
}

TEST(DaemonFlagsTest, Help) {
  absl::StatusOr<DaemonOptions> options = Parse({"--help"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->help);
  EXPECT_THAT(kDaemonUsage, HasSubstr("--allow-root"));
}

TEST(DaemonFlagsTest, UsageDocumentsEveryFlag) {
  for (const char* flag :
       {"--config", "--model", "--backend", "--chat-template-file", "--listen",
        "--metrics-listen", "--http-listen", "--tenant", "--threads",
        "--kv-memory ", "--kv-memory-fraction", "--block-size", "--kv-dtype",
        "--max-batched-tokens", "--drain-timeout", "--cpu-kernels",
        "--state-dir", "--allow-root", "--help"}) {
    EXPECT_THAT(kDaemonUsage, HasSubstr(flag));
  }
}

TEST(DaemonFlagsTest, ConfigFileAlone) {
  const std::string file = AliceConfig();
  absl::StatusOr<DaemonOptions> options = Parse({"--config", file});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->help);
  EXPECT_FALSE(options->allow_root);
  EXPECT_EQ(options->config_file, file);
  EXPECT_EQ(options->config.listen(), "127.0.0.1:7000");
  EXPECT_EQ(options->config.threads(), 3);
  EXPECT_EQ(options->config.kv_cache().block_size(), 16);  // defaulted
  ASSERT_EQ(options->config.tenants_size(), 1);
  EXPECT_EQ(options->config.tenants(0).weight(), 2);
}

TEST(DaemonFlagsTest, FlagsOverrideTheFile) {
  absl::StatusOr<DaemonOptions> options = Parse({"--config",
                                                 AliceConfig(),
                                                 "--listen",
                                                 "[::1]:9000",
                                                 "--threads=5",
                                                 "--model",
                                                 "dummy:stories42m",
                                                 "--backend",
                                                 "cpu",
                                                 "--metrics-listen",
                                                 "127.0.0.1:9464",
                                                 "--kv-memory",
                                                 "512MiB",
                                                 "--block-size",
                                                 "32",
                                                 "--kv-dtype",
                                                 "f16",
                                                 "--max-batched-tokens",
                                                 "2048",
                                                 "--drain-timeout",
                                                 "7",
                                                 "--cpu-kernels",
                                                 "highest",
                                                 "--state-dir",
                                                 "/tmp",
                                                 "--allow-root"});
  ASSERT_TRUE(options.ok()) << options.status();
  const v1::ServerConfig& c = options->config;
  EXPECT_EQ(c.listen(), "[::1]:9000");
  EXPECT_EQ(c.threads(), 5);
  EXPECT_EQ(c.model().path(), "dummy:stories42m");
  EXPECT_EQ(c.model().backend(), "cpu");
  EXPECT_EQ(c.metrics_listen(), "127.0.0.1:9464");
  EXPECT_EQ(c.kv_cache().memory_bytes(), uint64_t{512} << 20);
  EXPECT_FALSE(c.kv_cache().has_memory_fraction());  // the flag replaced it
  EXPECT_EQ(c.kv_cache().block_size(), 32);
  EXPECT_EQ(c.kv_cache().dtype(), "f16");
  EXPECT_EQ(c.scheduler().max_batched_tokens(), 2048);
  EXPECT_EQ(c.drain_timeout_seconds(), 7);
  EXPECT_EQ(c.cpu_kernels(), "highest");
  EXPECT_EQ(c.state_dir(), "/tmp");
  EXPECT_TRUE(options->allow_root);
  EXPECT_EQ(c.tenants(0).name(), "alice");
}

TEST(DaemonFlagsTest, ChatTemplateFileFlag) {
  const std::string chat = WriteFile("flags_chat.jinja", "{{ messages }}");
  absl::StatusOr<DaemonOptions> options =
      Parse({"--config", AliceConfig(), "--chat-template-file", chat});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->config.model().chat_template_file(), chat);
  EXPECT_EQ(options->config.model().path(), "dummy:stories15m");  // the file's
}

TEST(DaemonFlagsTest, KvMemorySuffixes) {
  const std::string file = AliceConfig();
  const std::pair<const char*, uint64_t> cases[] = {
      {"512MiB", uint64_t{512} << 20},
      {"2GiB", uint64_t{2} << 30},
      {"1GB", 1'000'000'000},
      {"123456", 123456},
  };
  for (const auto& [text, bytes] : cases) {
    absl::StatusOr<DaemonOptions> options =
        Parse({"--config", file, "--kv-memory", text});
    ASSERT_TRUE(options.ok()) << text << ": " << options.status();
    EXPECT_EQ(options->config.kv_cache().memory_bytes(), bytes) << text;
  }
  EXPECT_THAT(
      Parse({"--config", file, "--kv-memory", "lots"}).status().message(),
      HasSubstr("--kv-memory"));
  EXPECT_THAT(Parse({"--config", file, "--kv-memory", "0"}).status().message(),
              HasSubstr("flag --kv-memory: field kv_cache.memory_bytes"));
  absl::StatusOr<DaemonOptions> fraction =
      Parse({"--config", file, "--kv-memory-fraction", "0.75"});
  ASSERT_TRUE(fraction.ok()) << fraction.status();
  EXPECT_EQ(fraction->config.kv_cache().memory_fraction(), 0.75);
  EXPECT_THAT(
      Parse({"--config", file, "--kv-memory", "1GB", "--kv-memory-fraction",
             "0.5"})
          .status()
          .message(),
      AllOf(HasSubstr("--kv-memory"), HasSubstr("--kv-memory-fraction")));
}

TEST(DaemonFlagsTest, TenantFlagAddsTenantWithKeyDigest) {
  absl::StatusOr<DaemonOptions> options =
      Parse({"--model", "dummy:stories15m", "--tenant", "carol:secret-c",
             "--tenant", "dave:secret-d:3"});
  ASSERT_TRUE(options.ok()) << options.status();
  const v1::ServerConfig& c = options->config;
  EXPECT_EQ(options->config_file, "");
  EXPECT_EQ(c.listen(), "127.0.0.1:50051");
  ASSERT_EQ(c.tenants_size(), 2);
  EXPECT_EQ(c.tenants(0).name(), "carol");
  ASSERT_EQ(c.tenants(0).api_key_sha256_size(), 1);
  EXPECT_EQ(c.tenants(0).api_key_sha256(0), Sha256Hex("secret-c"));
  EXPECT_EQ(c.tenants(0).weight(), 1);
  EXPECT_EQ(c.tenants(0).max_queued(), 1024);  // default limits
  EXPECT_EQ(c.tenants(1).name(), "dave");
  EXPECT_EQ(c.tenants(1).api_key_sha256(0), Sha256Hex("secret-d"));
  EXPECT_EQ(c.tenants(1).weight(), 3);
}

TEST(DaemonFlagsTest, TenantFlagAfterFileTenants) {
  absl::StatusOr<DaemonOptions> options =
      Parse({"--config", AliceConfig(), "--tenant", "bob:k"});
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_EQ(options->config.tenants_size(), 2);
  EXPECT_EQ(options->config.tenants(1).name(), "bob");
}

TEST(DaemonFlagsTest, TenantFlagErrors) {
  const std::string file = AliceConfig();
  EXPECT_THAT(
      Parse({"--config", file, "--tenant", "alice:other"}).status().message(),
      AllOf(HasSubstr("--tenant alice"),
            HasSubstr(absl::StrCat(file, ":6: field tenants[0]"))));
  for (const char* bad : {"nokey", "name:", ":key", "a:b:c:d"}) {
    EXPECT_THAT(Parse({"--config", file, "--tenant", bad}).status().message(),
                HasSubstr("--tenant wants NAME:KEY"))
        << bad;
  }
  EXPECT_THAT(
      Parse({"--config", file, "--tenant", "bob:k:heavy"}).status().message(),
      HasSubstr("WEIGHT wants a number"));
  EXPECT_THAT(
      Parse({"--config", file, "--tenant", "bob:k:-1"}).status().message(),
      HasSubstr("flag --tenant: field tenants[1].weight: must be > 0"));
  EXPECT_THAT(
      Parse({"--config", file, "--tenant", "bob:k", "--tenant", "bob:j"})
          .status()
          .message(),
      HasSubstr("flag --tenant: field tenants[2].name: duplicate"));
}

TEST(DaemonFlagsTest, BadFlagValuesNameTheFlag) {
  const std::string file = AliceConfig();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--threads", "many"}, "--threads wants a whole number"},
      {{"--threads", "-1"}, "flag --threads: field threads: must be >= 0"},
      {{"--threads", "99999999999"}, "--threads: 99999999999 is out of range"},
      {{"--block-size", "12"},
       "flag --block-size: field kv_cache.block_size: must be a power of two"},
      {{"--kv-dtype", "q4_0"},
       "flag --kv-dtype: field kv_cache.dtype: must be \"f32\", \"f16\", "
       "\"q8_0\", \"bf16\""},
      {{"--max-batched-tokens", "-5"},
       "flag --max-batched-tokens: field scheduler.max_batched_tokens"},
      {{"--drain-timeout", "soon"}, "--drain-timeout wants a whole number"},
      {{"--listen", "nowhere"}, "flag --listen: field listen: want HOST:PORT"},
      {{"--metrics-listen", "h:99999"}, "flag --metrics-listen"},
      {{"--backend", "tpu"}, "flag --backend: field model.backend"},
      {{"--cpu-kernels", "fast"}, "flag --cpu-kernels: field cpu_kernels"},
      {{"--state-dir", "/etc/hostname"},
       "flag --state-dir: field state_dir: '/etc/hostname' exists and is "
       "not a directory"},
      {{"--chat-template-file", "/no/such.jinja"},
       "flag --chat-template-file: field model.chat_template_file: cannot "
       "read '/no/such.jinja'"},
      {{"--model", "/no/such.gguf"}, "flag --model: field model.path"},
      {{"--kv-memory-fraction", "2"},
       "flag --kv-memory-fraction: field kv_cache.memory_fraction"},
      {{"--kv-memory-fraction", "half"}, "--kv-memory-fraction wants a number"},
      {{"--kv-memory-fraction", "nan"}, "--kv-memory-fraction wants a number"},
      {{"--kv-memory", "24XB"}, "--kv-memory: '24XB' is not a byte size"},
      {{"--bogus"}, "unknown flag --bogus"},
      {{"--listen"}, "--listen needs a value"},
      {{"--allow-root=yes"}, "--allow-root takes no value"},
      {{"stray"}, "unexpected argument 'stray'"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--config", file};
    args.insert(args.end(), c.args.begin(), c.args.end());
    absl::StatusOr<DaemonOptions> options = Parse(args);
    ASSERT_FALSE(options.ok()) << c.args[0];
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(options.status().message(), HasSubstr(c.message));
  }
}

TEST(DaemonFlagsTest, FileErrorsKeepFileAndLine) {
  const std::string file = WriteFile("flags_bad.textproto", R"(
model { path: "dummy:stories15m" }
tenants {
  name: "alice"
  api_key_sha256: "abc"
}
)");
  EXPECT_THAT(Parse({"--config", file}).status().message(),
              HasSubstr(absl::StrCat(file,
                                     ":5: field "
                                     "tenants[0].api_key_sha256[0]")));
  EXPECT_EQ(Parse({"--config", "/no/such/config"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DaemonFlagsTest, NothingConfiguredFails) {
  absl::Status status = Parse({}).status();
  EXPECT_THAT(status.message(), HasSubstr("field model.path: required"));
  EXPECT_THAT(status.message(), HasSubstr("field tenants: at least one"));
}

TEST(DaemonFlagsTest, SampleConfigLoads) {
  const std::string sample =
      ::paceline::testing::SourcePath("deploy/config/pacelined.textproto");
  absl::StatusOr<DaemonOptions> options =
      Parse({"--config", sample, "--model", "dummy:stories15m"});
  ASSERT_TRUE(options.ok()) << options.status();
  const v1::ServerConfig& c = options->config;
  EXPECT_EQ(c.listen(), "127.0.0.1:50051");
  ASSERT_EQ(c.tenants_size(), 2);
  EXPECT_EQ(c.tenants(0).name(), "alice");
  EXPECT_EQ(c.tenants(0).weight(), 2);
  EXPECT_EQ(c.tenants(0).api_key_sha256(0), Sha256Hex("alice-key-change-me"));
  EXPECT_EQ(c.tenants(1).name(), "bob");
  EXPECT_EQ(c.tenants(1).api_key_sha256(0), Sha256Hex("bob-key-change-me"));
}

TEST(DaemonFlagsTest, RootIsRefusedUnlessAllowed) {
  absl::Status root = CheckNotRootForUid(false, 0);
  EXPECT_EQ(root.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.message(), AllOf(HasSubstr("refusing to run as root"),
                                    HasSubstr("--allow-root")));
  EXPECT_TRUE(CheckNotRootForUid(true, 0).ok());
  EXPECT_TRUE(CheckNotRootForUid(false, 1000).ok());
  EXPECT_TRUE(CheckNotRoot(true).ok());
}

}  // namespace
}  // namespace paceline::server
