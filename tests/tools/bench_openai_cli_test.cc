// The real `paceline bench --api openai` against a scripted
// OpenAI-compatible server (fake_openai_server.py, Python's standard
// library): what a peer receives, keep-alive reuse, usage and its absence,
// events split and coalesced, 429 answers, bad keys and flags.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"

namespace paceline::testing {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kKey[] = "fake-key";
const std::string kServer =
    ::paceline::testing::SourcePath("tests/tools/fake_openai_server.py");

Json ParseJson(const std::string& text) {
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

class BenchOpenAiCliTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_.pid() >= 0) {
      EXPECT_EQ(server_.Drain().value_or(-1), 0) << server_.stderr_text();
    }
    std::filesystem::remove(log_);
  }

  // Starts the fake server with `options` (besides --log and --key).
  void Start(std::vector<std::string> options) {
    std::filesystem::remove(log_);
    options.insert(options.begin(), {kServer, "--log", log_, "--key", kKey});
    ASSERT_TRUE(server_.Start(options).ok()) << server_.stderr_text();
  }

  std::string Url() const { return absl::StrCat("http://", server_.address()); }

  // `paceline bench --api openai --url URL --json --no-progress args...`.
  CommandResult Bench(std::vector<std::string> args) {
    args.insert(args.begin(), {"bench", "--api", "openai", "--url", Url(),
                               "--json", "--no-progress", "--timeout", "60"});
    return RunPaceline(args);
  }

  // The run of a successful --json bench.
  Json BenchRun(std::vector<std::string> args) {
    const CommandResult r = Bench(std::move(args));
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    const Json j = ParseJson(r.out);
    EXPECT_TRUE(j.is_object()) << r.out;
    if (!j.is_object() || !j["runs"].is_array() || j["runs"].empty()) {
      return Json::object();
    }
    EXPECT_EQ(j["api"], "openai");
    return j["runs"][0];
  }

  // The server's log: one object per line.
  std::vector<Json> Log() const {
    std::vector<Json> out;
    for (absl::string_view line :
         absl::StrSplit(ReadFile(log_), '\n', absl::SkipEmpty())) {
      out.push_back(ParseJson(std::string(line)));
    }
    return out;
  }

  std::vector<Json> Requests(const std::string& method) const {
    std::vector<Json> out;
    for (const Json& e : Log()) {
      if (e["event"] == "request" && e["method"] == method) out.push_back(e);
    }
    return out;
  }

  int Connections() const {
    int n = 0;
    for (const Json& e : Log()) n += e["event"] == "connection" ? 1 : 0;
    return n;
  }

  DaemonProcess server_{"/usr/bin/python3"};
  const std::string log_ = TempPath("fake_openai_log.jsonl");
};

TEST_F(BenchOpenAiCliTest, SendsTheLoadAndCountsUsage) {
  Start({"--vocab", "300"});
  Json run = BenchRun({"--api-key", kKey, "--concurrency", "2", "--requests",
                       "6", "--prompt-tokens", "5", "--max-tokens", "4",
                       "--pace", "20", "--temperature", "0.5", "--seed", "3"});
  EXPECT_EQ(run["all"]["ok"], 6);
  EXPECT_EQ(run["all"]["failed"], 0);
  EXPECT_EQ(run["all"]["prompt_tokens"], 30);
  EXPECT_EQ(run["all"]["completion_tokens"], 24);
  EXPECT_EQ(run["all"]["completion_tokens_from_chunks"], 0);
  EXPECT_EQ(run["all"]["delivered_ms"]["ttft"]["count"], 6);
  EXPECT_EQ(run["all"]["delivered_ms"]["itl"]["count"], 6 * 3);
  EXPECT_EQ(run["all"]["computed_ms"]["ttft"]["count"], 0);

  const std::vector<Json> gets = Requests("GET");
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0]["path"], "/v1/models");
  const std::vector<Json> posts = Requests("POST");
  ASSERT_EQ(posts.size(), 6u);
  for (const Json& p : posts) {
    SCOPED_TRACE(p.dump());
    EXPECT_EQ(p["path"], "/v1/completions");
    EXPECT_EQ(p["authorization"], absl::StrCat("Bearer ", kKey));
    const Json& b = p["body"];
    EXPECT_EQ(b["model"], "fake-model");
    ASSERT_TRUE(b["prompt"].is_array());
    EXPECT_EQ(b["prompt"].size(), 5u);
    for (const Json& id : b["prompt"]) {
      EXPECT_GE(id.get<int>(), 3);
      EXPECT_LT(id.get<int>(), 300);  // the vocabulary the server reported
    }
    EXPECT_EQ(b["max_tokens"], 4);
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["stream_options"]["include_usage"], true);
    EXPECT_EQ(b["ignore_eos"], true);
    EXPECT_EQ(b["temperature"], 0.5);
    EXPECT_EQ(b["pace_tokens_per_s"], 20);
    EXPECT_TRUE(b["seed"].is_number_integer());
  }
  // Keep-alive: the models request's connection, then one per stream.
  EXPECT_LE(Connections(), 3);
}

TEST_F(BenchOpenAiCliTest, SplitEventsAndCoalescedTokens) {
  Start({"--split", "--tokens-per-chunk", "2"});
  Json run = BenchRun({"--api-key", kKey, "--requests", "3", "--prompt-tokens",
                       "4", "--max-tokens", "6"});
  EXPECT_EQ(run["all"]["ok"], 3);
  EXPECT_EQ(run["all"]["completion_tokens"], 18);  // from usage
  // Three chunks of two tokens: 2 gaps and 3 zeros per request.
  EXPECT_EQ(run["all"]["delivered_ms"]["itl"]["count"], 3 * 5);
  // No --vocab-size and none reported: the portable range.
  for (const Json& p : Requests("POST")) {
    for (const Json& id : p["body"]["prompt"]) {
      EXPECT_GE(id.get<int>(), 3);
      EXPECT_LE(id.get<int>(), 258);
    }
  }
}

TEST_F(BenchOpenAiCliTest, WithoutUsageTheChunksAreCountedAndSaidSo) {
  Start({"--no-usage", "--tokens-per-chunk", "2"});
  Json run = BenchRun({"--api-key", kKey, "--requests", "2", "--prompt-tokens",
                       "4", "--max-tokens", "6"});
  EXPECT_EQ(run["all"]["ok"], 2);
  EXPECT_EQ(run["all"]["completion_tokens"], 6);  // 3 chunks each
  EXPECT_EQ(run["all"]["completion_tokens_from_chunks"], 2);
  EXPECT_EQ(run["all"]["prompt_tokens"], 8);  // the ids sent
  // The table says so.
  const CommandResult table = RunPaceline(
      {"bench", "--api", "openai", "--url", Url(), "--api-key", kKey,
       "--requests", "1", "--max-tokens", "2", "--no-progress"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(absl::StrContains(table.out,
                                "1 requests came without a usage "
                                "chunk"))
      << table.out;
}

TEST_F(BenchOpenAiCliTest, RateLimitedRequestsFailWithTheirHint) {
  Start({"--reject-every", "3"});
  const CommandResult r =
      Bench({"--api-key", kKey, "--requests", "6", "--max-tokens", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const Json j = ParseJson(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  const Json& all = j["runs"][0]["all"];
  EXPECT_EQ(all["ok"], 4);
  EXPECT_EQ(all["failed"], 2);
  EXPECT_EQ(all["first_error"],
            "HTTP 429 rate_limit_exceeded: slow down (retry after 250 ms)");
  EXPECT_TRUE(absl::StrContains(r.err, "2 requests failed")) << r.err;
  EXPECT_EQ(Requests("POST").size(), 6u);  // counted, not retried
}

TEST_F(BenchOpenAiCliTest, ModelPromptsFileAndNoModelList) {
  Start({});
  const std::string prompts =
      WriteFile("bench_openai_prompts.jsonl",
                "{\"prompt\": \"Once upon a time\", \"max_tokens\": 3}\n");
  Json run = BenchRun({"--api-key", kKey, "--model", "mine", "--prompts",
                       prompts, "--requests", "2"});
  EXPECT_EQ(run["all"]["ok"], 2);
  EXPECT_EQ(run["all"]["completion_tokens"], 6);
  EXPECT_TRUE(Requests("GET").empty());  // --model and no synthetic ids
  for (const Json& p : Requests("POST")) {
    EXPECT_EQ(p["body"]["model"], "mine");
    EXPECT_EQ(p["body"]["prompt"], "Once upon a time");
    EXPECT_EQ(p["body"]["max_tokens"], 3);
    EXPECT_FALSE(p["body"].contains("pace_tokens_per_s"));
    EXPECT_FALSE(p["body"].contains("temperature"));
  }
  std::filesystem::remove(prompts);
}

// --extra-body reaches every request (warm-up included); --outputs has a
// line per request with its text and finish reason.
TEST_F(BenchOpenAiCliTest, ExtraBodyAndOutputs) {
  Start({"--tokens-per-chunk", "2"});
  const std::string extra =
      WriteFile("bench_openai_extra.json",
                R"({"json_schema": {"type": "object"}, "ignore_eos": false})");
  const std::string outputs = TempPath("bench_openai_outputs.jsonl");
  Json run = BenchRun({"--api-key", kKey, "--requests", "3", "--warmup", "1",
                       "--max-tokens", "5", "--extra-body", extra, "--outputs",
                       outputs});
  EXPECT_EQ(run["all"]["ok"], 3);
  const std::vector<Json> posts = Requests("POST");
  ASSERT_EQ(posts.size(), 4u);
  for (const Json& p : posts) {
    EXPECT_EQ(p["body"]["json_schema"], Json({{"type", "object"}}));
    EXPECT_EQ(p["body"]["ignore_eos"], false);
    EXPECT_EQ(p["body"]["max_tokens"], 5);
  }
  std::vector<Json> lines;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(outputs), '\n', absl::SkipEmpty())) {
    lines.push_back(ParseJson(std::string(line)));
  }
  ASSERT_EQ(lines.size(), 4u);
  int warmup = 0;
  std::vector<int> indexes;
  for (const Json& l : lines) {
    SCOPED_TRACE(l.dump());
    EXPECT_EQ(l["ok"], true);
    EXPECT_EQ(l["text"], "xxxxx");  // chunks of 2, 2 and 1
    EXPECT_EQ(l["finish_reason"], "length");
    EXPECT_EQ(l["completion_tokens"], 5);
    if (l["salt"] == 1) {
      ++warmup;
    } else {
      EXPECT_EQ(l["salt"], 2);
      indexes.push_back(l["index"].get<int>());
    }
  }
  EXPECT_EQ(warmup, 1);
  std::sort(indexes.begin(), indexes.end());
  EXPECT_EQ(indexes, std::vector<int>({0, 1, 2}));
  std::filesystem::remove(extra);
  std::filesystem::remove(outputs);
}

TEST_F(BenchOpenAiCliTest, BadKeyStopsAtTheModelList) {
  Start({});
  const CommandResult r = Bench({"--api-key", "wrong", "--requests", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(
      r.err, "GET /v1/models: HTTP 401 invalid_api_key: bad key"))
      << r.err;
}

// https with a CA made by openssl for the test: trusted through --tls-ca,
// refused without it (the system's roots do not hold it).
TEST_F(BenchOpenAiCliTest, HttpsTrustsTheGivenCa) {
  const std::string dir = MakeTempDir("bench_openai_tls_");
  ASSERT_FALSE(dir.empty());
  const std::string quiet = " >/dev/null 2>&1";
  ASSERT_EQ(
      std::system(
          absl::StrCat("cd ", dir,
                       " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
                       "-subj /CN=test-ca -keyout ca.key -out ca.pem",
                       quiet,
                       " && openssl req -newkey rsa:2048 -nodes "
                       "-subj /CN=localhost -keyout server.key -out server.csr",
                       quiet,
                       " && printf 'subjectAltName=DNS:localhost\\n' > san.ext"
                       " && openssl x509 -req -in server.csr -CA ca.pem "
                       "-CAkey ca.key -CAcreateserial -days 2 -extfile san.ext "
                       "-out server.pem",
                       quiet)
              .c_str()),
      0)
      << "openssl failed";
  Start({"--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"});
  const std::string url = absl::StrCat("https://localhost:", server_.port());
  const CommandResult ok = RunPaceline(
      {"bench", "--api", "openai", "--url", url, "--tls-ca", dir + "/ca.pem",
       "--api-key", kKey, "--concurrency", "2", "--requests", "4",
       "--max-tokens", "3", "--json", "--no-progress", "--timeout", "60"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  const Json j = ParseJson(ok.out);
  ASSERT_TRUE(j.is_object()) << ok.out;
  EXPECT_EQ(j["server"], url);
  EXPECT_EQ(j["runs"][0]["all"]["ok"], 4);
  EXPECT_EQ(j["runs"][0]["all"]["completion_tokens"], 12);
  EXPECT_LE(Connections(), 3);  // kept alive over TLS too
  const CommandResult untrusted =
      RunPaceline({"bench", "--api", "openai", "--url", url, "--api-key", kKey,
                   "--requests", "1", "--no-progress"});
  EXPECT_EQ(untrusted.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(untrusted.err, "TLS handshake"))
      << untrusted.err;
  std::filesystem::remove_all(dir);
}

TEST(BenchOpenAiFlagsTest, UsageErrors) {
  const std::string extra = WriteFile("bench_flags_extra.json", "{}");
  const std::string not_object = WriteFile("bench_flags_list.json", "[1, 2]");
  const std::vector<std::vector<std::string>> bad = {
      {"bench", "--api", "openai", "--api-key", "k"},
      {"bench", "--api", "openai", "--url", "ftp://h:1"},
      {"bench", "--api", "openai", "--url", "http://h:1", "--tls-ca", "ca"},
      {"bench", "--api", "openai", "--url", "http://h:1", "--server", "h:2"},
      {"bench", "--server", "h:1", "--api-key", "k", "--url", "http://h:1"},
      {"bench", "--server", "h:1", "--api-key", "k", "--model", "m"},
      {"bench", "--api", "rest", "--url", "http://h:1"},
      {"bench", "--api", "openai", "--url", "http://h:1", "--vocab-size", "2"},
      {"bench", "--server", "h:1", "--api-key", "k", "--outputs", "o.jsonl"},
      {"bench", "--server", "h:1", "--api-key", "k", "--extra-body", extra},
      {"bench", "--api", "openai", "--url", "http://h:1", "--extra-body",
       not_object},
      {"bench", "--api", "openai", "--url", "http://h:1", "--extra-body",
       "/nonexistent/extra.json"},
  };
  for (const auto& args : bad) {
    const CommandResult r = RunPaceline(args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(args, " ") << ": " << r.err;
  }
  std::filesystem::remove(extra);
  std::filesystem::remove(not_object);
}

}  // namespace
}  // namespace paceline::testing
