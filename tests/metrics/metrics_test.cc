// metrics/: every family, serialized with prometheus-cpp's TextSerializer
// and read back: names, types, labels (model everywhere, tenants bounded
// to the configured ones plus "other"), values, the busy window, the
// collect hook and the HTTP exposer.

#include "metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "metrics/exposer.h"
#include "tests/testing/exposition.h"
#include "tests/testing/http_get.h"

namespace paceline::metrics {
namespace {

using ::paceline::testing::Exposition;
using ::paceline::testing::ParseExposition;

// A settable clock for the busy window; starts on a whole second.
struct TestClock {
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
};

MetricsOptions Options(TestClock* clock = nullptr) {
  MetricsOptions o;
  o.model = "m";
  o.tenants = {"alice", "bob"};
  if (clock != nullptr) o.now = [clock] { return clock->now; };
  return o;
}

Exposition Scrape(const Metrics& metrics) {
  return ParseExposition(metrics.Serialize());
}

TEST(MetricsTest, FinishReasonLabels) {
  EXPECT_EQ(FinishReasonLabel(FinishReason::kStop, true), "eos");
  EXPECT_EQ(FinishReasonLabel(FinishReason::kStop, false), "stop");
  EXPECT_EQ(FinishReasonLabel(FinishReason::kLength, false), "length");
  EXPECT_EQ(FinishReasonLabel(FinishReason::kCancelled, false), "cancelled");
  EXPECT_EQ(FinishReasonLabel(FinishReason::kError, false), "error");
  // end_of_sequence refines kStop only.
  EXPECT_EQ(FinishReasonLabel(FinishReason::kLength, true), "length");
  EXPECT_EQ(FinishReasonLabel(FinishReason::kError, true), "error");
}

TEST(MetricsTest, EveryFamilyHasItsTypeAndTheModelLabel) {
  Metrics metrics(Options());
  const Exposition e = Scrape(metrics);
  const std::vector<std::pair<std::string, std::string>> families = {
      {"paceline_requests_total", "counter"},
      {"paceline_prompt_tokens_total", "counter"},
      {"paceline_generation_tokens_total", "counter"},
      {"paceline_requests_running", "gauge"},
      {"paceline_requests_waiting", "gauge"},
      {"paceline_num_requests_running", "gauge"},
      {"paceline_num_requests_waiting", "gauge"},
      {"paceline_kv_cache_usage_ratio", "gauge"},
      {"paceline_kv_cache_blocks", "gauge"},
      {"paceline_kv_cache_capacity_blocks", "gauge"},
      {"paceline_state_slots", "gauge"},
      {"paceline_prefix_cache_queried_tokens_total", "counter"},
      {"paceline_prefix_cache_hit_tokens_total", "counter"},
      {"paceline_time_to_first_token_seconds", "histogram"},
      {"paceline_inter_token_latency_seconds", "histogram"},
      {"paceline_e2e_request_latency_seconds", "histogram"},
      {"paceline_request_queue_time_seconds", "histogram"},
      {"paceline_intake_cpu_seconds_total", "counter"},
      {"paceline_intake_wait_seconds", "histogram"},
      {"paceline_time_to_first_token_delivered_seconds", "histogram"},
      {"paceline_inter_token_latency_delivered_seconds", "histogram"},
      {"paceline_preemptions_total", "counter"},
      {"paceline_spec_decode_draft_tokens_total", "counter"},
      {"paceline_spec_decode_accepted_tokens_total", "counter"},
      {"paceline_forced_tokens_total", "counter"},
      {"paceline_engine_step_duration_seconds", "histogram"},
      {"paceline_engine_step_tokens", "histogram"},
      {"paceline_engine_busy_seconds_total", "counter"},
      {"paceline_engine_busy_ratio", "gauge"},
      {"paceline_pacer_buffered_tokens", "gauge"},
      {"paceline_pacer_streams", "gauge"},
      {"paceline_build_info", "gauge"},
  };
  // (paceline_rejections_total has no series before the first rejection,
  // so it is not written yet.)
  for (const auto& [name, type] : families) {
    auto it = e.types.find(name);
    ASSERT_NE(it, e.types.end()) << name;
    EXPECT_EQ(it->second, type) << name;
  }
  // Every sample carries model="m"; no family is left undeclared.
  for (const auto& [series, value] : e.samples) {
    EXPECT_TRUE(absl::StrContains(series, "model=\"m\"")) << series;
    EXPECT_TRUE(absl::StartsWith(series, "paceline_")) << series;
  }
  EXPECT_EQ(e.types.size(), families.size());
}

TEST(MetricsTest, TenantSeriesExistFromTheStartAndOthersCountAsOther) {
  Metrics metrics(Options());
  Exposition e = Scrape(metrics);
  for (const char* t : {"alice", "bob", "other"}) {
    for (const char* r : {"eos", "stop", "length", "cancelled", "error"}) {
      EXPECT_EQ(e.Get(absl::StrCat("paceline_requests_total{finish_reason=\"",
                                   r, "\",model=\"m\",tenant=\"", t, "\"}")),
                0)
          << t << " " << r;
    }
    EXPECT_EQ(e.Get(absl::StrCat(
                  "paceline_requests_running{model=\"m\",tenant=\"", t, "\"}")),
              0);
  }
  EXPECT_EQ(metrics.TenantLabel("alice"), "alice");
  EXPECT_EQ(metrics.TenantLabel("mallory"), "other");
  EXPECT_EQ(metrics.TenantLabel(""), "other");

  metrics.RequestFinished("alice", FinishReason::kStop,
                          /*end_of_sequence=*/true, absl::Seconds(2));
  metrics.RequestFinished("mallory", FinishReason::kStop,
                          /*end_of_sequence=*/false, absl::Seconds(1));
  metrics.RequestFinished("", FinishReason::kError, /*end_of_sequence=*/true,
                          absl::Seconds(1));
  metrics.PromptTokens("bob", 7);
  metrics.PromptTokens("eve", 3);
  metrics.SetTenantLoad("bob", 2, 5);
  e = Scrape(metrics);
  EXPECT_EQ(e.Get("paceline_requests_total{finish_reason=\"eos\",model=\"m\","
                  "tenant=\"alice\"}"),
            1);
  EXPECT_EQ(e.Get("paceline_requests_total{finish_reason=\"stop\",model=\"m\","
                  "tenant=\"other\"}"),
            1);
  EXPECT_EQ(e.Get("paceline_requests_total{finish_reason=\"error\",model="
                  "\"m\",tenant=\"other\"}"),
            1);
  EXPECT_EQ(e.Get("paceline_prompt_tokens_total{model=\"m\",tenant=\"bob\"}"),
            7);
  EXPECT_EQ(e.Get("paceline_prompt_tokens_total{model=\"m\",tenant=\"other\"}"),
            3);
  EXPECT_EQ(e.Get("paceline_requests_running{model=\"m\",tenant=\"bob\"}"), 2);
  EXPECT_EQ(e.Get("paceline_requests_waiting{model=\"m\",tenant=\"bob\"}"), 5);
  EXPECT_EQ(e.Get("paceline_e2e_request_latency_seconds_count{model=\"m\"}"),
            3);
  EXPECT_DOUBLE_EQ(
      e.Get("paceline_e2e_request_latency_seconds_sum{model=\"m\"}"), 4);
  // No series names a tenant outside the configured set.
  for (const auto& [series, value] : e.samples) {
    EXPECT_FALSE(absl::StrContains(series, "mallory")) << series;
    EXPECT_FALSE(absl::StrContains(series, "eve")) << series;
  }
}

TEST(MetricsTest, IntakeCpuIsChargedPerTenant) {
  Metrics metrics(Options());
  metrics.IntakeJob("alice", absl::Milliseconds(4), absl::Milliseconds(250));
  metrics.IntakeJob("alice", absl::Milliseconds(6), absl::Milliseconds(500));
  metrics.IntakeJob("eve", absl::Milliseconds(1), absl::Milliseconds(125));
  const Exposition e = Scrape(metrics);
  EXPECT_DOUBLE_EQ(
      e.Get("paceline_intake_cpu_seconds_total{model=\"m\",tenant=\"alice\"}"),
      0.75);
  EXPECT_DOUBLE_EQ(
      e.Get("paceline_intake_cpu_seconds_total{model=\"m\",tenant=\"other\"}"),
      0.125);
  EXPECT_EQ(e.Get("paceline_intake_wait_seconds_count{model=\"m\"}"), 3);
  EXPECT_DOUBLE_EQ(e.Get("paceline_intake_wait_seconds_sum{model=\"m\"}"),
                   0.011);
}

// Forced tokens are generated tokens too, counted when their request
// finishes; their own counter has them alone.
TEST(MetricsTest, ForcedTokensCountAsGenerated) {
  Metrics metrics(Options());
  metrics.NextToken("bob", absl::Milliseconds(2));
  metrics.ForcedTokens("bob", 5);
  metrics.ForcedTokens("bob", 0);
  const Exposition e = Scrape(metrics);
  EXPECT_EQ(
      e.Get("paceline_generation_tokens_total{model=\"m\",tenant=\"bob\"}"), 6);
  EXPECT_EQ(e.Get("paceline_forced_tokens_total{model=\"m\"}"), 5);
}

TEST(MetricsTest, TokensAndLatencies) {
  Metrics metrics(Options());
  metrics.FirstToken("alice", absl::Milliseconds(30));
  metrics.NextToken("alice", absl::Milliseconds(2));
  metrics.NextToken("alice", absl::Milliseconds(4));
  metrics.FirstToken("zed", absl::Milliseconds(70));
  metrics.RequestQueued(absl::Milliseconds(3));
  metrics.Preempted();
  metrics.Preempted();
  const Exposition e = Scrape(metrics);
  EXPECT_EQ(
      e.Get("paceline_generation_tokens_total{model=\"m\",tenant=\"alice\"}"),
      3);
  EXPECT_EQ(
      e.Get("paceline_generation_tokens_total{model=\"m\",tenant=\"other\"}"),
      1);
  EXPECT_EQ(e.Get("paceline_time_to_first_token_seconds_count{model=\"m\"}"),
            2);
  EXPECT_DOUBLE_EQ(
      e.Get("paceline_time_to_first_token_seconds_sum{model=\"m\"}"), 0.1);
  // Buckets are cumulative: 30 ms is under 0.04, 70 ms is not.
  EXPECT_EQ(e.Get("paceline_time_to_first_token_seconds_bucket{le=\"0.04\","
                  "model=\"m\"}"),
            1);
  EXPECT_EQ(e.Get("paceline_time_to_first_token_seconds_bucket{le=\"+Inf\","
                  "model=\"m\"}"),
            2);
  EXPECT_EQ(e.Get("paceline_inter_token_latency_seconds_count{model=\"m\"}"),
            2);
  EXPECT_EQ(e.Get("paceline_inter_token_latency_seconds_bucket{le=\"0.0025\","
                  "model=\"m\"}"),
            1);
  EXPECT_EQ(e.Get("paceline_request_queue_time_seconds_count{model=\"m\"}"), 1);
  EXPECT_EQ(e.Get("paceline_preemptions_total{model=\"m\"}"), 2);
}

TEST(MetricsTest, DeliveryCountsEveryTokenOfACoalescedWrite) {
  Metrics metrics(Options());
  metrics.StreamOpened();
  metrics.StreamOpened();
  metrics.StreamClosed();
  metrics.FirstDelivered(absl::Milliseconds(50), 2);  // ttft + one 0 s gap
  metrics.NextDelivered(absl::Milliseconds(100), 3);  // 100 ms, 0, 0
  metrics.SetPacerBufferedTokens(12);
  const Exposition e = Scrape(metrics);
  EXPECT_EQ(e.Get("paceline_pacer_streams{model=\"m\"}"), 1);
  EXPECT_EQ(e.Get("paceline_pacer_buffered_tokens{model=\"m\"}"), 12);
  EXPECT_EQ(e.Get("paceline_time_to_first_token_delivered_seconds_count{"
                  "model=\"m\"}"),
            1);
  EXPECT_EQ(e.Get("paceline_inter_token_latency_delivered_seconds_count{"
                  "model=\"m\"}"),
            4);
  EXPECT_DOUBLE_EQ(e.Get("paceline_inter_token_latency_delivered_seconds_sum{"
                         "model=\"m\"}"),
                   0.1);
  EXPECT_EQ(e.Get("paceline_inter_token_latency_delivered_seconds_bucket{le="
                  "\"0.001\",model=\"m\"}"),
            3);
}

TEST(MetricsTest, KvCacheGaugesAndPrefixCountersAdvanceByTheIncrease) {
  Metrics metrics(Options());
  KvCacheState kv;
  kv.total_blocks = 100;
  kv.used_blocks = 25;
  kv.cached_blocks = 10;
  kv.free_blocks = 65;
  kv.prefix_query_tokens = 40;
  kv.prefix_hit_tokens = 16;
  kv.total_state_slots = 12;
  kv.free_state_slots = 5;
  kv.state_snapshots = 3;
  metrics.SetKvCache(kv);
  metrics.SetKvCache(kv);  // the same totals again: no double count
  kv.prefix_query_tokens = 50;
  kv.prefix_hit_tokens = 20;
  metrics.SetKvCache(kv);
  metrics.SetLoad(3, 4);
  const Exposition e = Scrape(metrics);
  EXPECT_DOUBLE_EQ(e.Get("paceline_kv_cache_usage_ratio{model=\"m\"}"), 0.25);
  EXPECT_EQ(e.Get("paceline_kv_cache_capacity_blocks{model=\"m\"}"), 100);
  EXPECT_EQ(e.Get("paceline_kv_cache_blocks{model=\"m\",state=\"used\"}"), 25);
  EXPECT_EQ(e.Get("paceline_kv_cache_blocks{model=\"m\",state=\"cached\"}"),
            10);
  EXPECT_EQ(e.Get("paceline_kv_cache_blocks{model=\"m\",state=\"free\"}"), 65);
  EXPECT_EQ(e.Get("paceline_state_slots{model=\"m\",state=\"running\"}"), 4);
  EXPECT_EQ(e.Get("paceline_state_slots{model=\"m\",state=\"snapshot\"}"),
            3);
  EXPECT_EQ(e.Get("paceline_state_slots{model=\"m\",state=\"free\"}"), 5);
  EXPECT_EQ(e.Get("paceline_prefix_cache_queried_tokens_total{model=\"m\"}"),
            50);
  EXPECT_EQ(e.Get("paceline_prefix_cache_hit_tokens_total{model=\"m\"}"), 20);
  EXPECT_EQ(e.Get("paceline_num_requests_running{model=\"m\"}"), 3);
  EXPECT_EQ(e.Get("paceline_num_requests_waiting{model=\"m\"}"), 4);
}

TEST(MetricsTest, EngineStepsAndTheBusyWindow) {
  TestClock clock;
  const absl::Time t0 = clock.now;
  Metrics metrics(Options(&clock));
  metrics.EngineStep(absl::Milliseconds(1500), 48, t0 + absl::Seconds(4));
  metrics.EngineStep(absl::Milliseconds(500), 1, t0 + absl::Seconds(7));
  clock.now = t0 + absl::Seconds(10);
  Exposition e = Scrape(metrics);
  EXPECT_DOUBLE_EQ(e.Get("paceline_engine_busy_seconds_total{model=\"m\"}"), 2);
  EXPECT_EQ(e.Get("paceline_engine_step_duration_seconds_count{model=\"m\"}"),
            2);
  EXPECT_EQ(e.Get("paceline_engine_step_tokens_bucket{le=\"1\",model=\"m\"}"),
            1);
  EXPECT_EQ(e.Get("paceline_engine_step_tokens_bucket{le=\"64\",model=\"m\"}"),
            2);
  EXPECT_DOUBLE_EQ(e.Get("paceline_engine_step_tokens_sum{model=\"m\"}"), 49);
  // Busy 2 s of the window [t0 + 1 s, t0 + 10 s].
  EXPECT_NEAR(e.Get("paceline_engine_busy_ratio{model=\"m\"}"), 2.0 / 9, 1e-9);
  // Just after start the window is the time since start.
  clock.now = t0 + absl::Seconds(5);
  e = Scrape(metrics);
  EXPECT_NEAR(e.Get("paceline_engine_busy_ratio{model=\"m\"}"), 1.5 / 5, 1e-9);
  // Later the steps have left the window; the total stays.
  clock.now = t0 + absl::Seconds(30);
  e = Scrape(metrics);
  EXPECT_EQ(e.Get("paceline_engine_busy_ratio{model=\"m\"}"), 0);
  EXPECT_DOUBLE_EQ(e.Get("paceline_engine_busy_seconds_total{model=\"m\"}"), 2);
}

TEST(MetricsTest, RejectionsByLowerCaseCodeName) {
  Metrics metrics(Options());
  metrics.Rejected("", absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Scrape(metrics).types.at("paceline_rejections_total"), "counter");
  metrics.Rejected("", absl::StatusCode::kUnauthenticated);
  metrics.Rejected("bob", absl::StatusCode::kResourceExhausted);
  metrics.Rejected("bob", absl::StatusCode::kResourceExhausted);
  metrics.Rejected("nobody", absl::StatusCode::kInvalidArgument);
  const Exposition e = Scrape(metrics);
  EXPECT_EQ(e.Get("paceline_rejections_total{model=\"m\",reason="
                  "\"unauthenticated\",tenant=\"other\"}"),
            2);
  EXPECT_EQ(e.Get("paceline_rejections_total{model=\"m\",reason="
                  "\"resource_exhausted\",tenant=\"bob\"}"),
            2);
  EXPECT_EQ(e.Get("paceline_rejections_total{model=\"m\",reason="
                  "\"invalid_argument\",tenant=\"other\"}"),
            1);
  EXPECT_EQ(RejectionReason(absl::StatusCode::kUnavailable), "unavailable");
  EXPECT_EQ(RejectionReason(absl::StatusCode::kNotFound), "not_found");
}

TEST(MetricsTest, BuildInfoIsOne) {
  Metrics metrics(Options());
  const Exposition e = Scrape(metrics);
  int found = 0;
  for (const auto& [series, value] : e.samples) {
    if (!absl::StartsWith(series, "paceline_build_info{")) continue;
    ++found;
    EXPECT_EQ(value, 1);
    EXPECT_TRUE(absl::StrContains(series, "commit=\"")) << series;
    EXPECT_TRUE(absl::StrContains(series, "version=\"")) << series;
  }
  EXPECT_EQ(found, 1);
}

TEST(MetricsTest, CacheConfigInfoIsOneWithTheKvPoolShape) {
  MetricsOptions o = Options();
  o.kv_block_size = 16;
  o.kv_num_blocks = 1024;
  Metrics metrics(std::move(o));
  const Exposition e = Scrape(metrics);
  auto it = e.types.find("paceline_cache_config_info");
  ASSERT_NE(it, e.types.end());
  EXPECT_EQ(it->second, "gauge");
  int found = 0;
  for (const auto& [series, value] : e.samples) {
    if (absl::StartsWith(series, "paceline_cache_config_info{")) ++found;
  }
  EXPECT_EQ(found, 1);
  EXPECT_EQ(e.Get("paceline_cache_config_info{block_size=\"16\",model=\"m\","
                  "num_blocks=\"1024\"}"),
            1);
}

TEST(MetricsTest, CacheConfigInfoIsAbsentUntilBothValuesAreSet) {
  for (const auto& [block_size, num_blocks] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {16, 0}, {0, 1024}}) {
    MetricsOptions o = Options();
    o.kv_block_size = block_size;
    o.kv_num_blocks = num_blocks;
    Metrics metrics(std::move(o));
    EXPECT_FALSE(Scrape(metrics).types.contains("paceline_cache_config_info"))
        << block_size << " " << num_blocks;
  }
}

TEST(MetricsTest, TheCollectHookRunsBeforeEveryCollection) {
  Metrics metrics(Options());
  int calls = 0;
  metrics.SetCollectHook([&] { metrics.SetLoad(++calls, 0); });
  EXPECT_EQ(Scrape(metrics).Get("paceline_num_requests_running{model=\"m\"}"),
            1);
  EXPECT_EQ(Scrape(metrics).Get("paceline_num_requests_running{model=\"m\"}"),
            2);
  metrics.SetCollectHook(nullptr);
  EXPECT_EQ(Scrape(metrics).Get("paceline_num_requests_running{model=\"m\"}"),
            2);
}

TEST(MetricsExposerTest, ServesMetricsOnAnAnyPortAndRunsTheHook) {
  Metrics metrics(Options());
  int scrapes = 0;
  metrics.SetCollectHook([&] { metrics.SetPacerBufferedTokens(++scrapes); });
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      MetricsExposer::Start("127.0.0.1:0", &metrics);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  ASSERT_GT((*exposer)->port(), 0);
  const ::paceline::testing::HttpResponse response =
      ::paceline::testing::HttpGet((*exposer)->port(), "/metrics");
  EXPECT_EQ(response.status, 200);
  const Exposition e = ParseExposition(response.body);
  EXPECT_EQ(e.types.at("paceline_build_info"), "gauge");
  EXPECT_EQ(e.Get("paceline_pacer_buffered_tokens{model=\"m\"}"), 1);

  // The same port again cannot be bound.
  absl::StatusOr<std::unique_ptr<MetricsExposer>> again = MetricsExposer::Start(
      absl::StrCat("127.0.0.1:", (*exposer)->port()), &metrics);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable)
      << again.status();
}

TEST(MetricsExposerTest, AnswersOtherRequestsWithPreciseStatuses) {
  Metrics metrics(Options());
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      MetricsExposer::Start("127.0.0.1:0", &metrics);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  using ::paceline::testing::HttpRaw;
  EXPECT_EQ(::paceline::testing::HttpGet(port, "/").status, 404);
  EXPECT_EQ(::paceline::testing::HttpGet(port, "/metrics?x=1").status, 200);
  EXPECT_EQ(HttpRaw(port, "POST /metrics HTTP/1.1\r\n\r\n").status, 405);
  EXPECT_EQ(HttpRaw(port, "hello\r\n\r\n").status, 400);
  EXPECT_EQ(HttpRaw(port, "GET /metrics HTTP/1.1\r\nX: " +
                              std::string(10000, 'a') + "\r\n\r\n")
                .status,
            431);
  const ::paceline::testing::HttpResponse head =
      HttpRaw(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  // Still serving after all that.
  EXPECT_EQ(::paceline::testing::HttpGet(port, "/metrics").status, 200);
}

TEST(MetricsExposerTest, RejectsMalformedAddresses) {
  Metrics metrics(Options());
  for (const char* address :
       {"9464", "127.0.0.1:", "127.0.0.1:70000", "[::1:9464", ":9464"}) {
    EXPECT_EQ(MetricsExposer::Start(address, &metrics).status().code(),
              absl::StatusCode::kInvalidArgument)
        << address;
  }
  EXPECT_EQ(
      MetricsExposer::Start("no.such.host.invalid:0", &metrics).status().code(),
      absl::StatusCode::kUnavailable);
}

// "localhost" serves on 127.0.0.1 (also on hosts that resolve it to ::1
// first: the exposer tries IPv4 addresses first).
TEST(MetricsExposerTest, LocalhostServesOnIpv4) {
  Metrics metrics(Options());
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      MetricsExposer::Start("localhost:0", &metrics);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  EXPECT_EQ(::paceline::testing::HttpGet((*exposer)->port(), "/metrics").status,
            200);
}

// Connected to 127.0.0.1:port; -1 on failure.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 &&
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Scrapes are answered while other clients stall: 20 connections that sent
// half a request line and a client dripping a byte every 50 ms. The old
// exposer served one connection at a time with a per-read timeout, so a
// scrape waited behind every stalled one and the dripping one held it
// for as long as it dripped.
TEST(MetricsExposerTest, StalledAndDrippingClientsDoNotBlockScrapes) {
  Metrics metrics(Options());
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      MetricsExposer::Start("127.0.0.1:0", &metrics);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  std::vector<int> stalled;
  for (int i = 0; i < 20; ++i) {
    const int fd = Connect(port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "GET /met", 8), 8);
    stalled.push_back(fd);
  }
  std::atomic<bool> stop{false}, dripping{true};
  std::thread dripper([&] {
    const int fd = Connect(port);
    const std::string request =
        "GET /metrics HTTP/1.0\r\nX-Pad: " + std::string(600, 'a') + "\r\n\r\n";
    // At most 30 s of drip, then the request completes.
    for (size_t i = 0; i < request.size() && !stop.load(); ++i) {
      if (write(fd, &request[i], 1) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    dripping = false;
    close(fd);
  });
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(::paceline::testing::HttpGet(port, "/metrics").status, 200);
  }
  EXPECT_TRUE(dripping.load());  // answered while it still dripped
  stop = true;
  dripper.join();
  // The stalled connections are still open (not closed to make way).
  for (const int fd : stalled) {
    char c;
    EXPECT_EQ(recv(fd, &c, 1, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    close(fd);
  }
}

// Stopping does not wait for a poll timeout (prometheus-cpp's exposer took
// ~2 s, which lengthened every drain).
TEST(MetricsExposerTest, StopsPromptly) {
  Metrics metrics(Options());
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      MetricsExposer::Start("127.0.0.1:0", &metrics);
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  exposer->reset();
  // Nothing listens on the port any more.
  EXPECT_EQ(::paceline::testing::HttpGet(port, "/metrics").status, 0);
}

}  // namespace
}  // namespace paceline::metrics
