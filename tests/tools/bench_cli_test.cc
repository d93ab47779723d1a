// The real `paceline bench` against the real pacelined on stories260K: a
// closed loop whose JSON adds up, a paced run whose delivered latency
// dwarfs the computed one, an open loop over two tenants that writes
// plots, and per-tenant populations whose service follows the tenants'
// weights. They skip when ../shared/models is absent.

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/frontend/sha256.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;

constexpr char kAliceKey[] = "alice-bench-key";
constexpr char kBobKey[] = "bob-bench-key";

// The value at `path` (object keys) in `root`; a null Value when absent.
Value At(const Struct& root, std::initializer_list<const char*> path) {
  Value v;
  *v.mutable_struct_value() = root;
  for (const char* key : path) {
    if (!v.has_struct_value()) return Value();
    const auto& fields = v.struct_value().fields();
    auto it = fields.find(key);
    if (it == fields.end()) return Value();
    Value next = it->second;
    v = std::move(next);
  }
  return v;
}

double Num(const Struct& root, std::initializer_list<const char*> path) {
  const Value v = At(root, path);
  EXPECT_TRUE(v.has_number_value()) << "no number at a path";
  return v.number_value();
}

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) {
      GTEST_SKIP() << "no " << kStories260KPath;
    }
    ASSERT_TRUE(
        daemon_
            .Start({"--model", kStories260KPath, "--listen", "127.0.0.1:0",
                    "--tenant", absl::StrCat("alice:", kAliceKey), "--tenant",
                    absl::StrCat("bob:", kBobKey), "--allow-root"})
            .ok())
        << daemon_.stderr_text();
  }

  void TearDown() override {
    if (daemon_.pid() < 0) return;
    EXPECT_EQ(daemon_.Drain().value_or(-1), 0) << daemon_.stderr_text();
  }

  // `paceline bench --server ADDR --json --no-progress args...`, parsed.
  Struct BenchJson(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", daemon_.address()});
    return BenchJsonOver(std::move(args));
  }

  // The same over the daemon's OpenAI HTTP API: `paceline bench --api
  // openai --url http://127.0.0.1:HTTP_PORT --json ... args...`.
  Struct BenchOpenAiJson(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"--api", "openai", "--url",
                 absl::StrCat("http://127.0.0.1:", daemon_.http_port())});
    return BenchJsonOver(std::move(args));
  }

  // `paceline bench --json --no-progress --timeout 60 args...`, parsed.
  Struct BenchJsonOver(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"bench", "--json", "--no-progress", "--timeout", "60"});
    const CommandResult r = RunPaceline(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    Struct json;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &json).ok())
        << r.out;
    return json;
  }

  DaemonProcess daemon_;
};

// p50 <= p90 <= p99 <= max for a distribution that has samples.
void ExpectOrdered(const Struct& run, const char* side, const char* metric) {
  SCOPED_TRACE(absl::StrCat(side, ".", metric));
  EXPECT_GT(Num(run, {"all", side, metric, "count"}), 0);
  const double p50 = Num(run, {"all", side, metric, "p50"});
  const double p90 = Num(run, {"all", side, metric, "p90"});
  const double p99 = Num(run, {"all", side, metric, "p99"});
  const double max = Num(run, {"all", side, metric, "max"});
  EXPECT_GE(p50, 0);
  EXPECT_LE(p50, p90);
  EXPECT_LE(p90, p99);
  EXPECT_LE(p99, max);
}

TEST_F(BenchCliTest, ClosedLoopJsonAddsUp) {
  const Struct json =
      BenchJson({"--api-key", kAliceKey, "--concurrency", "4", "--requests",
                 "20", "--prompt-tokens", "32", "--max-tokens", "24",
                 "--temperature", "0", "--slo-ttft", "60000"});
  const Value runs = At(json, {"runs"});
  ASSERT_EQ(runs.list_value().values_size(), 1);
  const Struct& run = runs.list_value().values(0).struct_value();
  EXPECT_EQ(At(run, {"mode"}).string_value(), "closed");
  EXPECT_EQ(Num(run, {"concurrency"}), 4);
  EXPECT_EQ(Num(run, {"all", "requests"}), 20);
  EXPECT_EQ(Num(run, {"all", "ok"}), 20);
  EXPECT_EQ(Num(run, {"all", "failed"}), 0);
  EXPECT_EQ(Num(run, {"all", "completion_tokens"}), 20 * 24);
  EXPECT_EQ(Num(run, {"all", "prompt_tokens"}), 20 * 32);
  EXPECT_GT(Num(run, {"all", "output_throughput"}), 0);
  // A generous TTFT objective: every request meets it.
  EXPECT_DOUBLE_EQ(Num(run, {"all", "goodput", "delivered"}),
                   Num(run, {"all", "request_throughput"}));
  for (const char* m : {"ttft", "tpot", "e2e", "queue"}) {
    ExpectOrdered(run, "computed_ms", m);
  }
  for (const char* m : {"ttft", "tpot", "itl", "e2e"}) {
    ExpectOrdered(run, "delivered_ms", m);
  }
  // 23 gaps per request.
  EXPECT_EQ(Num(run, {"all", "delivered_ms", "itl", "count"}), 20 * 23);
  // The client sends before the server queues and receives after the
  // server computes; allow 1 ms for the two clocks' reading.
  EXPECT_GE(Num(run, {"all", "delivered_ms", "ttft", "p50"}) + 1,
            Num(run, {"all", "computed_ms", "ttft", "p50"}));
  EXPECT_GE(Num(run, {"all", "delivered_ms", "e2e", "p50"}) + 1,
            Num(run, {"all", "computed_ms", "e2e", "p50"}));
}

// The load of ClosedLoopJsonAddsUp once over gRPC and once over the OpenAI
// HTTP API of the same daemon: the same requests, tokens and gaps, and the
// OpenAI side's token counts come from the usage chunk.
TEST_F(BenchCliTest, OpenAiApiCountsWhatGrpcCounts) {
  ASSERT_GT(daemon_.http_port(), 0) << daemon_.stderr_text();
  const std::vector<std::string> load = {
      "--api-key",    kAliceKey, "--concurrency",   "4",
      "--requests",   "20",      "--prompt-tokens", "32",
      "--max-tokens", "24",      "--temperature",   "0",
      "--slo-ttft",   "60000"};
  const Struct grpc = BenchJson(load);
  const Struct openai = BenchOpenAiJson(load);
  EXPECT_EQ(At(openai, {"api"}).string_value(), "openai");
  const Value grpc_runs = At(grpc, {"runs"});
  const Value openai_runs = At(openai, {"runs"});
  ASSERT_EQ(grpc_runs.list_value().values_size(), 1);
  ASSERT_EQ(openai_runs.list_value().values_size(), 1);
  const Struct& g = grpc_runs.list_value().values(0).struct_value();
  const Struct& o = openai_runs.list_value().values(0).struct_value();
  EXPECT_EQ(Num(o, {"all", "ok"}), 20);
  EXPECT_EQ(Num(o, {"all", "failed"}), 0);
  for (const char* field : {"ok", "prompt_tokens", "completion_tokens"}) {
    EXPECT_EQ(Num(o, {"all", field}), Num(g, {"all", field})) << field;
  }
  EXPECT_EQ(Num(o, {"all", "delivered_ms", "itl", "count"}),
            Num(g, {"all", "delivered_ms", "itl", "count"}));
  EXPECT_EQ(Num(o, {"all", "completion_tokens"}), 20 * 24);
  EXPECT_EQ(Num(o, {"all", "delivered_ms", "itl", "count"}), 20 * 23);
  EXPECT_EQ(Num(o, {"all", "completion_tokens_from_chunks"}), 0);
}

TEST_F(BenchCliTest, PacedDeliveryTakesLongerThanComputing) {
  const Struct json = BenchJson({"--api-key", kAliceKey, "--concurrency", "2",
                                 "--requests", "4", "--prompt-tokens", "16",
                                 "--max-tokens", "21", "--pace", "50"});
  const Value runs = At(json, {"runs"});
  ASSERT_EQ(runs.list_value().values_size(), 1);
  const Struct& run = runs.list_value().values(0).struct_value();
  EXPECT_EQ(Num(run, {"all", "ok"}), 4);
  // 20 paced gaps of 20 ms after the first token: at least 400 ms
  // delivered, and never before the tokens were computed. Only the bounds
  // pacing guarantees are checked (a loaded machine stretches the rest).
  const double delivered = Num(run, {"all", "delivered_ms", "e2e", "p50"});
  const double computed = Num(run, {"all", "computed_ms", "e2e", "p50"});
  EXPECT_GE(delivered, 390);  // 20 gaps of 20 ms, less rounding
  EXPECT_GE(delivered, computed);
  EXPECT_GE(Num(run, {"all", "delivered_ms", "tpot", "p50"}), 15);
}

TEST_F(BenchCliTest, OpenLoopTwoTenantsWithPlots) {
  const std::string dir = TempPath("bench_plots");
  const Struct json = BenchJson(
      {"--tenant", absl::StrCat("alice:", kAliceKey, ":3"), "--tenant",
       absl::StrCat("bob:", kBobKey, ":1"), "--rate", "40", "--burstiness",
       "0.5", "--requests", "24", "--prompt-tokens", "8:24", "--max-tokens",
       "4:12", "--seed", "7", "--plot", dir});
  const Value runs = At(json, {"runs"});
  ASSERT_EQ(runs.list_value().values_size(), 1);
  const Struct& run = runs.list_value().values(0).struct_value();
  EXPECT_EQ(At(run, {"mode"}).string_value(), "open");
  EXPECT_EQ(Num(run, {"rate"}), 40);
  EXPECT_EQ(Num(run, {"all", "ok"}), 24);
  const double alice = Num(run, {"tenants", "alice", "ok"});
  const double bob = Num(run, {"tenants", "bob", "ok"});
  EXPECT_EQ(alice + bob, 24);
  EXPECT_GT(alice, bob);  // shares 3:1
  EXPECT_GT(bob, 0);
  EXPECT_GE(Num(run, {"all", "completion_tokens"}), 24 * 4);
  EXPECT_LE(Num(run, {"all", "completion_tokens"}), 24 * 12);
  EXPECT_TRUE(std::filesystem::exists(dir + "/plots.gp"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/throughput.dat"));
  EXPECT_TRUE(
      std::filesystem::exists(dir + "/cdf_open-r40_ttft_delivered.dat"));
  std::filesystem::remove_all(dir);
}

// Two tenants of weights 1 and 3, each keeping 8 streams in flight against
// a server that runs 4 at once: each has requests waiting whatever share it
// gets (with 4 streams, the tenant with 3 slots would have one left to
// queue, and every slot it frees before its client sends the next would go
// to the other tenant), so fair share decides every admission and each
// tenant's delivered tokens over the common window follow its weight.
TEST(BenchFairShareTest, PerTenantPopulationsGetServiceByWeight) {
  if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  const std::string config = WriteFile(
      "fair_share.textproto",
      absl::StrCat(
          "model { path: \"", kStories260KPath,
          "\" }\nlisten: \"127.0.0.1:0\"\nhttp { listen: \"127.0.0.1:0\" }\n"
          "scheduler { max_running: 4 }\n"
          "tenants { name: \"alice\" weight: 1 api_key_sha256: \"",
          server::Sha256Hex(kAliceKey),
          "\" }\ntenants { name: \"bob\" weight: 3 api_key_sha256: \"",
          server::Sha256Hex(kBobKey), "\" }\n"));
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start({"--config", config, "--allow-root"}).ok())
      << daemon.stderr_text();
  const CommandResult r = RunPaceline({"bench",
                                       "--json",
                                       "--no-progress",
                                       "--timeout",
                                       "60",
                                       "--server",
                                       daemon.address(),
                                       "--tenant",
                                       absl::StrCat("alice:", kAliceKey, ":1"),
                                       "--tenant",
                                       absl::StrCat("bob:", kBobKey, ":3"),
                                       "--per-tenant-concurrency",
                                       "8",
                                       "--requests",
                                       "256",
                                       "--prompt-tokens",
                                       "16",
                                       "--max-tokens",
                                       "32",
                                       "--temperature",
                                       "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &json).ok())
      << r.out;
  const Value runs = At(json, {"runs"});
  ASSERT_EQ(runs.list_value().values_size(), 1) << r.out;
  const Struct& run = runs.list_value().values(0).struct_value();
  EXPECT_EQ(Num(run, {"per_tenant_concurrency"}), 8);
  EXPECT_EQ(Num(run, {"tenants", "alice", "ok"}), 256);
  EXPECT_EQ(Num(run, {"tenants", "bob", "ok"}), 256);
  const Value window = At(run, {"fair_share", "window_s"});
  ASSERT_EQ(window.list_value().values_size(), 2) << r.out;
  const double from = window.list_value().values(0).number_value();
  const double to = window.list_value().values(1).number_value();
  EXPECT_LT(from, to);
  const double alice = Num(run, {"fair_share", "tenants", "alice", "tokens"});
  const double bob = Num(run, {"fair_share", "tenants", "bob", "tokens"});
  EXPECT_GT(alice, 0);
  // 1:3 within 15% (the common window's edges cut streams mid-way; 64
  // requests each, a 0.2 s window, spread 2.8-3.5 here, 256 spread 2.96-3.14).
  EXPECT_NEAR(bob / alice, 3.0, 0.45) << r.out;
  EXPECT_DOUBLE_EQ(Num(run, {"fair_share", "tenants", "bob", "expected"}),
                   0.75);
  EXPECT_EQ(daemon.Drain().value_or(-1), 0) << daemon.stderr_text();
}

}  // namespace
}  // namespace paceline::testing
