// `paceline complete`: usage errors, an unreachable server, and the output
// against a scripted in-process Paceline service (the real daemon's tests
// live in tests/server).

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"

namespace paceline::testing {
namespace {

namespace pb = ::paceline::v1;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr char kKey[] = "secret-key";

// Sets (or, with nullopt, unsets) an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value.has_value()) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The text Generate streams and Complete returns.
constexpr const char* kDeltas[] = {"Once", " upon", " a time"};

void SetTime(google::protobuf::Timestamp* ts, int64_t ms) {
  ts->set_seconds(1'700'000'000 + ms / 1000);
  ts->set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
}

pb::Finished ScriptedFinish() {
  pb::Finished fin;
  fin.set_reason(pb::FINISH_REASON_LENGTH);
  fin.mutable_usage()->set_prompt_tokens(5);
  fin.mutable_usage()->set_cached_prompt_tokens(2);
  fin.mutable_usage()->set_completion_tokens(3);
  SetTime(fin.mutable_timings()->mutable_queued(), 900);
  SetTime(fin.mutable_timings()->mutable_generation_done(), 1150);
  SetTime(fin.mutable_timings()->mutable_last_delivered(), 2900);
  return fin;
}

// Answers with scripted output; remembers the last request.
class FakePaceline final : public pb::Paceline::Service {
 public:
  grpc::Status Complete(grpc::ServerContext* ctx,
                        const pb::GenerateRequest* request,
                        pb::CompleteResponse* response) override {
    if (grpc::Status s = Admit(ctx, *request); !s.ok()) return s;
    for (const char* d : kDeltas) response->mutable_text()->append(d);
    *response->mutable_finished() = ScriptedFinish();
    response->mutable_finished()->mutable_timings()->clear_last_delivered();
    return grpc::Status::OK;
  }

  grpc::Status Generate(
      grpc::ServerContext* ctx, const pb::GenerateRequest* request,
      grpc::ServerWriter<pb::GenerateResponse>* writer) override {
    if (grpc::Status s = Admit(ctx, *request); !s.ok()) return s;
    pb::GenerateResponse event;
    event.mutable_accepted()->set_request_id(7);
    event.mutable_accepted()->set_prompt_tokens(5);
    writer->Write(event);
    for (const char* d : kDeltas) {
      event.mutable_delta()->set_text(d);
      writer->Write(event);
    }
    *event.mutable_finished() = ScriptedFinish();
    if (request->text() == "stop") {
      event.mutable_finished()->set_reason(pb::FINISH_REASON_STOP_SEQUENCE);
      event.mutable_finished()->set_stop_sequence("\n\n");
    }
    writer->Write(event);
    return grpc::Status::OK;
  }

  pb::GenerateRequest last_request() {
    absl::MutexLock lock(&mu_);
    return last_request_;
  }

 private:
  grpc::Status Admit(grpc::ServerContext* ctx,
                     const pb::GenerateRequest& request) {
    {
      absl::MutexLock lock(&mu_);
      last_request_ = request;
    }
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end() || std::string(it->second.data(), it->second.size()) !=
                              std::string("Bearer ") + kKey) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown API key");
    }
    if (request.text() == "busy") {
      ctx->AddTrailingMetadata("retry-after-ms", "250");
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "tenant queue is full");
    }
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  pb::GenerateRequest last_request_ ABSL_GUARDED_BY(mu_);
};

class CompleteCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  CommandResult Complete(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"complete", "--server", address_, "--timeout", "30"});
    return RunPaceline(args);
  }

  FakePaceline service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST(CompleteCommandUsageTest, HelpExitsZero) {
  const CommandResult r = RunPaceline({"complete", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("usage: paceline complete"));
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(CompleteCommandUsageTest, MissingServerIsUsageError) {
  const CommandResult r =
      RunPaceline({"complete", "--api-key", kKey, "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--server is required"));
  EXPECT_THAT(r.err, HasSubstr("usage: paceline complete"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(CompleteCommandUsageTest, MissingApiKeyIsUsageError) {
  ScopedEnv env("PACELINE_API_KEY", std::nullopt);
  const CommandResult r =
      RunPaceline({"complete", "--server", "127.0.0.1:1", "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--api-key (or PACELINE_API_KEY) is required"));
}

TEST(CompleteCommandUsageTest, BadFlagValuesAreUsageErrors) {
  const std::vector<std::vector<std::string>> cases = {
      {"--priority", "urgent"}, {"--max-tokens", "-1"}, {"--pace", "fast"},
      {"--timeout", "0"},       {"--burst", "0"},       {"--seed", "-3"},
      {"--frobnicate", "1"},
  };
  for (const auto& extra : cases) {
    SCOPED_TRACE(extra[0]);
    std::vector<std::string> args = {"complete",  "--server", "127.0.0.1:1",
                                     "--api-key", kKey,       "--prompt",
                                     "hi"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = RunPaceline(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("usage: paceline complete"));
  }
}

TEST(CompleteCommandUsageTest, UnreachableServerIsUnavailable) {
  // A bound port nobody listens on: connections are refused, and no other
  // process can take the port while the socket stays open.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string server =
      "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "unary");
    std::vector<std::string> args = {"complete",  "--server",  server,
                                     "--api-key", kKey,        "--prompt",
                                     "hi",        "--timeout", "5"};
    if (stream) args.push_back("--stream");
    const CommandResult r = RunPaceline(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, StartsWith("paceline complete: error: UNAVAILABLE: "));
    EXPECT_THAT(r.out, IsEmpty());
  }
  close(fd);
}

TEST_F(CompleteCommandTest, UnaryPrintsTextAndFinishLine) {
  const CommandResult r = Complete({"--api-key", kKey, "--prompt", "Once"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time\n");
  EXPECT_EQ(r.err,
            "finish: length; prompt 5 tokens (2 cached), generated 3 tokens; "
            "generation 0.25 s, delivery -\n");
}

TEST_F(CompleteCommandTest, StreamPrintsDeltasAndFinishLine) {
  const CommandResult r =
      Complete({"--api-key", kKey, "--prompt", "Once", "--stream"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time\n");
  EXPECT_EQ(r.err,
            "finish: length; prompt 5 tokens (2 cached), generated 3 tokens; "
            "generation 0.25 s, delivery 2.00 s\n");
}

TEST_F(CompleteCommandTest, StopSequenceIsNamed) {
  const CommandResult r =
      Complete({"--api-key", kKey, "--prompt", "stop", "--stream"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, StartsWith("finish: stop \"\\n\\n\"; prompt 5 tokens"));
}

TEST_F(CompleteCommandTest, FlagsFillTheRequest) {
  const CommandResult r = Complete({"--api-key",     kKey,
                                    "--prompt",      "Hello",
                                    "--max-tokens",  "40",
                                    "--temperature", "0.5",
                                    "--top-k",       "20",
                                    "--top-p",       "0.9",
                                    "--seed",        "18446744073709551615",
                                    "--pace",        "12.5",
                                    "--burst",       "4",
                                    "--priority",    "batch",
                                    "--stop",        "END",
                                    "--stop",        "\n\n",
                                    "--stream"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const pb::GenerateRequest req = service_.last_request();
  EXPECT_EQ(req.text(), "Hello");
  EXPECT_EQ(req.stopping().max_tokens(), 40);
  EXPECT_THAT(req.stopping().stop(), ::testing::ElementsAre("END", "\n\n"));
  EXPECT_FLOAT_EQ(req.sampling().temperature(), 0.5f);
  EXPECT_EQ(req.sampling().top_k(), 20);
  EXPECT_FLOAT_EQ(req.sampling().top_p(), 0.9f);
  EXPECT_EQ(req.sampling().seed(), 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(req.delivery().pace_tokens_per_s(), 12.5);
  EXPECT_EQ(req.delivery().burst_tokens(), 4);
  EXPECT_EQ(req.priority(), pb::PRIORITY_BATCH);
}

TEST_F(CompleteCommandTest, UnsetFlagsStayUnset) {
  const CommandResult r = Complete({"--api-key", kKey, "--prompt", "Hello"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const pb::GenerateRequest req = service_.last_request();
  EXPECT_FALSE(req.has_sampling());
  EXPECT_FALSE(req.has_stopping());
  EXPECT_FALSE(req.has_delivery());
  EXPECT_EQ(req.priority(), pb::PRIORITY_UNSPECIFIED);
}

TEST_F(CompleteCommandTest, ConstraintFlagsFillTheRequest) {
  const std::string schema = WriteFile("schema.json", R"({"type": "object"})");
  CommandResult r =
      Complete({"--api-key", kKey, "--prompt", "Hello", "--json-schema", schema,
                "--flexible-whitespace"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  pb::Constraint c = service_.last_request().sampling().constraint();
  EXPECT_EQ(c.json_schema(), R"({"type": "object"})");
  EXPECT_TRUE(c.flexible_whitespace());
  EXPECT_FALSE(service_.last_request().sampling().has_temperature());

  r = Complete({"--api-key", kKey, "--prompt", "Hello", "--choice",
                "a\\,b,c\\\\", "--choice", "d"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  c = service_.last_request().sampling().constraint();
  EXPECT_THAT(c.choice().values(), ::testing::ElementsAre("a,b", "c\\", "d"));
  EXPECT_FALSE(c.flexible_whitespace());

  r = Complete({"--api-key", kKey, "--prompt", "Hello", "--grammar",
                WriteFile("g.gbnf", "root ::= \"x\"\n")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(service_.last_request().sampling().constraint().grammar(),
            "root ::= \"x\"\n");

  r = Complete({"--api-key", kKey, "--prompt", "Hello", "--regex", "[0-9]+"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(service_.last_request().sampling().constraint().regex(), "[0-9]+");
}

TEST(CompleteCommandUsageTest, TwoConstraintsAreAUsageError) {
  const CommandResult r = RunPaceline(
      {"complete", "--server", "127.0.0.1:1", "--api-key", kKey, "--prompt",
       "hi", "--choice", "a", "--json-schema", "x.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("paceline complete: --json-schema and "
                                "--choice cannot be combined"));
  EXPECT_THAT(r.err, HasSubstr("usage: paceline complete"));
}

TEST_F(CompleteCommandTest, WrongKeyIsUnauthenticated) {
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "unary");
    std::vector<std::string> args = {"--api-key", "wrong", "--prompt", "hi"};
    if (stream) args.push_back("--stream");
    const CommandResult r = Complete(args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err,
              "paceline complete: error: UNAUTHENTICATED: unknown API key\n");
    EXPECT_THAT(r.out, IsEmpty());
  }
}

TEST_F(CompleteCommandTest, ApiKeyComesFromTheEnvironment) {
  ScopedEnv env("PACELINE_API_KEY", kKey);
  const CommandResult r = Complete({"--prompt", "Once"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time\n");
}

TEST_F(CompleteCommandTest, RetryHintIsShown) {
  const CommandResult r = Complete({"--api-key", kKey, "--prompt", "busy"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "paceline complete: error: RESOURCE_EXHAUSTED: tenant queue is "
            "full (retry after 250 ms)\n");
}

}  // namespace
}  // namespace paceline::testing
