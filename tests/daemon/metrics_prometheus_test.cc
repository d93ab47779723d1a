// The metrics end to end: the real pacelined (stories260K) serving
// /metrics on a loopback port, a real Prometheus (the Debian package's
// binary) scraping it every second, load from the real C++ gRPC client,
// then Prometheus's query API checked against what the clients received.
// Skips without /usr/bin/prometheus or the model; installs nothing.
//
// Counting rule: paceline_generation_tokens_total counts every token
// sampled, which is every token id the clients received plus the EOS (or
// stop token id) that ended a request, which is never delivered — i.e. the
// sum of Finished.usage.completion_tokens.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/http_get.h"
#include "tests/testing/stories260k_oracle.h"
#include "tests/testing/wait_for.h"

namespace paceline::server {
namespace {

using ::paceline::testing::DaemonProcess;
using ::paceline::testing::FreeLoopbackPort;
using ::paceline::testing::HaveStories260K;
using ::paceline::testing::HttpGet;
using ::paceline::testing::kStories260KPath;
using ::paceline::testing::MakeClientContext;
using ::paceline::testing::MakeTempDir;
using ::paceline::testing::UrlEncode;
using ::paceline::testing::WaitFor;
using ::paceline::testing::WriteFileAt;

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kAliceKey[] = "alice-metrics-key";
constexpr char kBobKey[] = "bob-metrics-key";

// A Prometheus server as a child process, in its own process group, with
// its config and storage in `dir`.
class PrometheusProcess {
 public:
  ~PrometheusProcess() { Stop(); }

  bool Start(const std::string& dir, const std::string& target) {
    port_ = FreeLoopbackPort();
    if (port_ == 0) return false;
    const std::string config = dir + "/prometheus.yml";
    if (!WriteFileAt(config, absl::StrCat("global:\n"
                                          "  scrape_interval: 1s\n"
                                          "  scrape_timeout: 1s\n"
                                          "scrape_configs:\n"
                                          "  - job_name: pacelined\n"
                                          "    static_configs:\n"
                                          "      - targets: ['",
                                          target, "']\n"))) {
      return false;
    }
    const std::vector<std::string> args = {
        kPrometheus, "--config.file=" + config,
        "--storage.tsdb.path=" + dir + "/data",
        absl::StrCat("--web.listen-address=127.0.0.1:", port_),
        "--log.level=warn"};
    const std::string log = dir + "/prometheus.log";
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      FILE* out = freopen(log.c_str(), "w", stdout);
      if (out != nullptr) dup2(fileno(stdout), fileno(stderr));
      std::vector<char*> argv;
      for (const std::string& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(kPrometheus, argv.data());
      _exit(127);
    }
    return pid_ > 0;
  }

  // Waits for /-/ready.
  ::testing::AssertionResult WaitReady(absl::Duration timeout) const {
    return WaitFor([this] { return HttpGet(port_, "/-/ready").status == 200; },
                   timeout, "Prometheus's /-/ready", absl::Milliseconds(100));
  }

  // The value of an instant query whose result is one sample; nullopt when
  // it has none (or the query failed).
  std::optional<double> Query(const std::string& promql) const {
    const std::string body =
        HttpGet(port_, "/api/v1/query?query=" + UrlEncode(promql)).body;
    // ..."value":[<time>,"<value>"]...
    const size_t v = body.find("\"value\":[");
    if (body.find("\"status\":\"success\"") == std::string::npos ||
        v == std::string::npos) {
      return std::nullopt;
    }
    const size_t open = body.find('"', body.find(',', v));
    const size_t close = body.find('"', open + 1);
    double out = 0;
    if (!absl::SimpleAtod(body.substr(open + 1, close - open - 1), &out)) {
      return std::nullopt;
    }
    return out;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGTERM);
    int status = 0;
    // Not a test failure when it is slow: it is killed instead.
    const bool exited =
        WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
                absl::Seconds(5), "Prometheus to exit on SIGTERM",
                absl::Milliseconds(50));
    if (!exited) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// What one request got back.
struct Outcome {
  grpc::Status status;
  int64_t delivered_ids = 0;
  bool finished = false;
  v1::Finished finish;
  bool streamed = false;
};

Outcome RunGenerate(v1::Paceline::Stub& stub, const std::string& key,
                    const v1::GenerateRequest& request) {
  Outcome out;
  out.streamed = true;
  auto ctx = MakeClientContext(key, absl::Seconds(120));
  auto reader = stub.Generate(ctx.get(), request);
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
    if (r.has_delta()) out.delivered_ids += r.delta().token_ids_size();
    if (r.has_finished()) {
      out.finished = true;
      out.finish = r.finished();
    }
  }
  out.status = reader->Finish();
  return out;
}

Outcome RunComplete(v1::Paceline::Stub& stub, const std::string& key,
                    const v1::GenerateRequest& request) {
  Outcome out;
  auto ctx = MakeClientContext(key, absl::Seconds(120));
  v1::CompleteResponse response;
  out.status = stub.Complete(ctx.get(), request, &response);
  out.delivered_ids = response.token_ids_size();
  out.finished = response.has_finished();
  out.finish = response.finished();
  return out;
}

v1::GenerateRequest Request(const std::string& prompt, int32_t max_tokens,
                            float temperature, uint64_t seed = 0) {
  v1::GenerateRequest r;
  r.set_text(prompt);
  r.mutable_sampling()->set_temperature(temperature);
  if (seed != 0) r.mutable_sampling()->set_seed(seed);
  r.mutable_stopping()->set_max_tokens(max_tokens);
  return r;
}

std::string Reason(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_EOS:
      return "eos";
    case v1::FINISH_REASON_STOP_SEQUENCE:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "error";
  }
}

TEST(MetricsPrometheusTest, PrometheusScrapesWhatTheClientsSaw) {
  if (access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << "no " << kPrometheus << " (Debian package prometheus)";
  }
  if (!HaveStories260K()) {
    GTEST_SKIP() << "no " << kStories260KPath;
  }
  const std::string dir = MakeTempDir("paceline_prom_");
  ASSERT_FALSE(dir.empty());

  DaemonProcess daemon;
  ASSERT_TRUE(
      daemon
          .Start({"--model", kStories260KPath, "--listen", "127.0.0.1:0",
                  "--metrics-listen", "127.0.0.1:0", "--tenant",
                  absl::StrCat("alice:", kAliceKey), "--tenant",
                  absl::StrCat("bob:", kBobKey), "--allow-root"})
          .ok());
  // "pacelined: metrics on 127.0.0.1:PORT/metrics"
  const std::string err = daemon.stderr_text();
  const std::string marker = "pacelined: metrics on ";
  const size_t at = err.find(marker);
  ASSERT_NE(at, std::string::npos) << err;
  const size_t begin = at + marker.size();
  const std::string target =
      err.substr(begin, err.find("/metrics", begin) - begin);
  int metrics_port = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(target.substr(target.rfind(':') + 1), &metrics_port))
      << target;
  ASSERT_GT(metrics_port, 0);
  ASSERT_EQ(HttpGet(metrics_port, "/metrics").status, 200);

  PrometheusProcess prometheus;
  ASSERT_TRUE(prometheus.Start(dir, target));
  ASSERT_TRUE(prometheus.WaitReady(absl::Seconds(60)))
      << "Prometheus did not become ready; see " << dir << "/prometheus.log";

  // Load: greedy streams (length), sampled calls (which may end with EOS),
  // a stop string, a stop token id (not delivered), and two refusals.
  auto stub = v1::Paceline::NewStub(daemon.Channel());
  // A stop token id the greedy story reaches: the last token of ".".
  int32_t period = -1;
  {
    v1::TokenizeRequest request;
    request.set_text(".");
    request.set_add_special_tokens(false);
    v1::TokenizeResponse response;
    auto ctx = MakeClientContext(kBobKey);
    ASSERT_TRUE(stub->Tokenize(ctx.get(), request, &response).ok());
    ASSERT_GT(response.token_ids_size(), 0);
    period = response.token_ids(response.token_ids_size() - 1);
  }
  std::vector<Outcome> outcomes;
  absl::Mutex mu;
  std::vector<std::thread> threads;
  const char* prompts[] = {"Once upon a time", "The little dog", "Lily was",
                           "One day"};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      Outcome o = RunGenerate(*stub, kAliceKey, Request(prompts[i], 24, 0));
      absl::MutexLock lock(&mu);
      outcomes.push_back(std::move(o));
    });
  }
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      Outcome o = RunComplete(*stub, kBobKey,
                              Request("Once upon a time", 400, 1.0f, 11 + i));
      absl::MutexLock lock(&mu);
      outcomes.push_back(std::move(o));
    });
  }
  threads.emplace_back([&] {
    v1::GenerateRequest r = Request("Once upon a time", 100, 0);
    r.mutable_stopping()->add_stop("was");
    Outcome o = RunGenerate(*stub, kBobKey, r);
    absl::MutexLock lock(&mu);
    outcomes.push_back(std::move(o));
  });
  threads.emplace_back([&] {
    v1::GenerateRequest r = Request("Once upon a time", 100, 0);
    r.mutable_stopping()->add_stop_token_ids(period);
    Outcome o = RunComplete(*stub, kBobKey, r);
    absl::MutexLock lock(&mu);
    outcomes.push_back(std::move(o));
  });
  for (std::thread& t : threads) t.join();
  const Outcome unauthenticated =
      RunGenerate(*stub, "wrong-key", Request("Hi", 4, 0));
  EXPECT_EQ(unauthenticated.status.error_code(), grpc::UNAUTHENTICATED);
  const Outcome invalid = RunComplete(*stub, kAliceKey, Request("", 4, 0));
  EXPECT_EQ(invalid.status.error_code(), grpc::INVALID_ARGUMENT);

  // What the clients saw.
  const int64_t requests = static_cast<int64_t>(outcomes.size());
  int64_t sampled = 0, delivered_plus_stop_tokens = 0, streams = 0;
  std::map<std::string, int64_t> by_reason;
  for (const Outcome& o : outcomes) {
    ASSERT_TRUE(o.status.ok()) << o.status.error_message();
    ASSERT_TRUE(o.finished);
    ASSERT_GT(o.finish.usage().completion_tokens(), 0);
    sampled += o.finish.usage().completion_tokens();
    delivered_plus_stop_tokens +=
        o.delivered_ids + (o.finish.has_stop_token_id() ? 1 : 0);
    ++by_reason[Reason(o.finish.reason())];
    if (o.streamed && o.delivered_ids > 0) ++streams;
  }
  EXPECT_EQ(sampled, delivered_plus_stop_tokens);
  std::cout << "requests " << requests << ", tokens sampled " << sampled
            << ", finish reasons: eos " << by_reason["eos"] << ", stop "
            << by_reason["stop"] << ", length " << by_reason["length"]
            << std::endl;

  // Wait for a scrape that saw every finish and both refusals.
  EXPECT_TRUE(WaitFor(
      [&] {
        return prometheus.Query("sum(paceline_requests_total)").value_or(-1) ==
                   requests &&
               prometheus.Query("sum(paceline_rejections_total)")
                       .value_or(-1) == 2;
      },
      absl::Seconds(60), "a scrape with every request and both refusals",
      absl::Milliseconds(250)));
  ASSERT_EQ(prometheus.Query("sum(paceline_requests_total)").value_or(-1),
            requests);

  // The engine's count: every token sampled. The stop-string request is
  // stopped one step late (delivery finds the string), so the engine may
  // have sampled a few more than its usage counts, never more than its
  // max_tokens of 100 in all; every other request's figures agree.
  constexpr int64_t kLate = 100;
  const double generated =
      prometheus.Query("sum(paceline_generation_tokens_total)").value_or(-1);
  EXPECT_GE(generated, sampled);
  EXPECT_LE(generated, sampled + kLate);
  for (const char* reason : {"eos", "stop", "length", "cancelled", "error"}) {
    EXPECT_EQ(
        prometheus.Query(absl::StrCat(
            "sum(paceline_requests_total{finish_reason=\"", reason, "\"})")),
        by_reason[reason])
        << reason;
  }
  EXPECT_EQ(prometheus.Query("sum(paceline_requests_total{tenant=\"alice\"})"),
            4);
  EXPECT_EQ(prometheus.Query("sum(paceline_requests_total{tenant=\"bob\"})"),
            5);
  EXPECT_EQ(prometheus.Query("paceline_time_to_first_token_seconds_count"),
            requests);
  EXPECT_EQ(prometheus.Query("paceline_e2e_request_latency_seconds_count"),
            requests);
  EXPECT_EQ(
      prometheus.Query("paceline_time_to_first_token_delivered_seconds_count"),
      streams);
  const double gaps =
      prometheus.Query("paceline_inter_token_latency_seconds_count")
          .value_or(-1);
  EXPECT_EQ(gaps - (sampled - requests), generated - sampled);
  EXPECT_EQ(prometheus.Query("paceline_rejections_total{reason="
                             "\"unauthenticated\",tenant=\"other\"}"),
            1);
  EXPECT_EQ(prometheus.Query("paceline_rejections_total{reason="
                             "\"invalid_argument\",tenant=\"alice\"}"),
            1);
  const std::optional<double> usage =
      prometheus.Query("paceline_kv_cache_usage_ratio");
  ASSERT_TRUE(usage.has_value());
  EXPECT_GE(*usage, 0);
  EXPECT_LE(*usage, 1);
  EXPECT_GT(prometheus.Query("paceline_kv_cache_capacity_blocks").value_or(0),
            0);
  EXPECT_GT(prometheus.Query("paceline_engine_busy_seconds_total").value_or(0),
            0);
  EXPECT_EQ(prometheus.Query("paceline_build_info"), 1);
  EXPECT_EQ(prometheus.Query("count(paceline_num_requests_waiting)"), 1);
  EXPECT_EQ(prometheus.Query("count(paceline_num_requests_running)"), 1);
  // Every series has the model label.
  EXPECT_EQ(prometheus.Query("count({__name__=~\"paceline_.*\",model=\"\"})"),
            std::nullopt);

  prometheus.Stop();
  EXPECT_EQ(daemon.Drain().value_or(-1), 0) << daemon.stderr_text();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace paceline::server
