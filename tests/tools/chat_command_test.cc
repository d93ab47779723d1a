// `paceline chat`, driven through a pipe: usage errors; the requests, the
// history and the output against a scripted in-process Paceline service
// (reasoning, tool calls, Ctrl-C cancelling a turn); and two turns against
// the real daemon once it serves chat requests.

#include <signal.h>
#include <sys/types.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chat/chat_template.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/run_command.h"
#include "tests/testing/stories260k_oracle.h"
#include "tests/testing/wait_for.h"

namespace paceline::testing {
namespace {

namespace pb = ::paceline::v1;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kKey[] = "chat-key";

// `paceline chat ARGS...` with stdin read from a file holding `input`.
// The chat process's pid is written to `pid_file` first (the shell execs
// it, so the pid stays), for tests that signal it; with `out_file` its
// stdout goes there instead of into the result.
CommandResult RunChat(const std::vector<std::string>& args,
                      const std::string& input,
                      const std::string& pid_file = "/dev/null",
                      const std::string& out_file = "") {
  const std::string input_file = WriteFile("chat_input.txt", input);
  std::vector<std::string> argv = {
      "/bin/sh",
      "-c",
      "echo $$ > \"$1\"; in=\"$2\"; out=\"$3\"; shift 3;"
      " if [ -n \"$out\" ]; then exec \"$0\" \"$@\" < \"$in\" > \"$out\";"
      " else exec \"$0\" \"$@\" < \"$in\"; fi",
      PacelineCliPath(),
      pid_file,
      input_file,
      out_file,
      "chat"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

TEST(ChatCommandUsageTest, HelpAndUsageErrors) {
  const CommandResult help = RunPaceline({"chat", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, StartsWith("usage: paceline chat"));
  const std::vector<std::vector<std::string>> cases = {
      {"chat", "--api-key", kKey},
      {"chat", "--server", "127.0.0.1:1", "--api-key", kKey, "--pace", "-1"},
      {"chat", "--server", "127.0.0.1:1", "--api-key", kKey, "--max-tokens",
       "0"},
      {"chat", "--server", "127.0.0.1:1", "--api-key", kKey, "--var", "x"},
      {"chat", "--server", "127.0.0.1:1", "--api-key", kKey, "extra"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args.back());
    const CommandResult r = RunPaceline(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("usage: paceline chat"));
  }
}

// Answers every turn with a script chosen by the last user message:
//   "tool"  -> reasoning, then a tool call streamed in three deltas
//   "slow"  -> the delta "Part", then waits for the client to cancel
//   other   -> reasoning "Hm." then the text "Hi there."
class FakeChatService final : public pb::Paceline::Service {
 public:
  explicit FakeChatService(std::string template_source)
      : template_source_(std::move(template_source)) {}

  grpc::Status GetModelInfo(grpc::ServerContext* ctx,
                            const pb::GetModelInfoRequest*,
                            pb::GetModelInfoResponse* response) override {
    if (!Authorized(*ctx)) return Unauthenticated();
    response->mutable_model()->set_id("fake-model");
    response->mutable_chat()->set_template_source(template_source_);
    return grpc::Status::OK;
  }

  grpc::Status Generate(
      grpc::ServerContext* ctx, const pb::GenerateRequest* request,
      grpc::ServerWriter<pb::GenerateResponse>* writer) override {
    if (!Authorized(*ctx)) return Unauthenticated();
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(*request);
    }
    const auto& messages = request->chat().messages();
    const std::string last =
        messages.empty() ? "" : messages.rbegin()->content();
    if (last == "slow") return Slow(*ctx, *writer);
    if (last == "tool") {
      Reasoning(*writer, "Need the time.");
      ToolCall(*writer, "call_1", "get_time", "{\"tz\":");
      ToolCall(*writer, "", "", " \"UTC\"}");
      Finish(*writer, pb::FINISH_REASON_TOOL_CALLS, messages.size());
      return grpc::Status::OK;
    }
    Reasoning(*writer, "Hm.");
    Text(*writer, "Hi");
    Text(*writer, " there.");
    Finish(*writer, pb::FINISH_REASON_EOS, messages.size());
    return grpc::Status::OK;
  }

  std::vector<pb::GenerateRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  bool saw_cancel() {
    absl::MutexLock lock(&mu_);
    return saw_cancel_;
  }

 private:
  static bool Authorized(const grpc::ServerContext& ctx) {
    const auto& md = ctx.client_metadata();
    auto it = md.find("authorization");
    return it != md.end() &&
           std::string(it->second.data(), it->second.size()) ==
               std::string("Bearer ") + kKey;
  }
  static grpc::Status Unauthenticated() {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown API key");
  }
  static void Reasoning(grpc::ServerWriter<pb::GenerateResponse>& w,
                        const std::string& text) {
    pb::GenerateResponse event;
    event.mutable_delta()->set_reasoning(text);
    w.Write(event);
  }
  static void Text(grpc::ServerWriter<pb::GenerateResponse>& w,
                   const std::string& text) {
    pb::GenerateResponse event;
    event.mutable_delta()->set_text(text);
    w.Write(event);
  }
  static void ToolCall(grpc::ServerWriter<pb::GenerateResponse>& w,
                       const std::string& id, const std::string& name,
                       const std::string& arguments) {
    pb::GenerateResponse event;
    pb::ToolCallDelta* call = event.mutable_delta()->add_tool_calls();
    call->set_index(0);
    call->set_id(id);
    call->set_name(name);
    call->set_arguments(arguments);
    w.Write(event);
  }
  // Usage says how many messages came, as prompt tokens (x10).
  static void Finish(grpc::ServerWriter<pb::GenerateResponse>& w,
                     pb::FinishReason reason, int messages) {
    pb::GenerateResponse event;
    event.mutable_finished()->set_reason(reason);
    event.mutable_finished()->mutable_usage()->set_prompt_tokens(10 * messages);
    event.mutable_finished()->mutable_usage()->set_completion_tokens(3);
    w.Write(event);
  }

  // Writes a partial answer and waits until the client cancels the call.
  grpc::Status Slow(grpc::ServerContext& ctx,
                    grpc::ServerWriter<pb::GenerateResponse>& writer) {
    Text(writer, "Part");
    const bool cancelled =
        WaitFor([&] { return ctx.IsCancelled(); }, absl::Seconds(30),
                "the client to cancel the call");
    absl::MutexLock lock(&mu_);
    saw_cancel_ = cancelled;
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }

  const std::string template_source_;
  absl::Mutex mu_;
  std::vector<pb::GenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
  bool saw_cancel_ ABSL_GUARDED_BY(mu_) = false;
};

class ChatCommandTest : public ::testing::Test {
 protected:
  void Serve(const std::string& template_source = "model") {
    service_ = std::make_unique<FakeChatService>(template_source);
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  std::vector<std::string> Flags(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--server", address_,    "--api-key",
                                     kKey,       "--timeout", "30"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::unique_ptr<FakeChatService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(ChatCommandTest, TwoTurnsCarryTheHistory) {
  Serve();
  const CommandResult r =
      RunChat(Flags({"--system", "Be brief.", "--pace", "50", "--max-tokens",
                     "16", "--temperature", "0", "--var",
                     "enable_thinking=false", "--stats"}),
              "Hello\n\nHow are you?\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Not a terminal: no ANSI escapes, reasoning printed before the text.
  EXPECT_EQ(r.out, "Hm.Hi there.\nHm.Hi there.\n");
  EXPECT_EQ(r.err,
            "turn 1: eos; prompt 20 tokens (0 cached), generated 3 tokens\n"
            "turn 2: eos; prompt 40 tokens (0 cached), generated 3 tokens\n");

  const std::vector<pb::GenerateRequest> requests = service_->requests();
  ASSERT_EQ(requests.size(), 2u);  // the empty line is no turn
  for (const pb::GenerateRequest& req : requests) {
    EXPECT_TRUE(req.has_chat());
    EXPECT_DOUBLE_EQ(req.delivery().pace_tokens_per_s(), 50);
    EXPECT_EQ(req.stopping().max_tokens(), 16);
    EXPECT_FLOAT_EQ(req.sampling().temperature(), 0);
    EXPECT_EQ(req.chat().template_kwargs().at("enable_thinking"), "false");
  }
  const auto& second = requests[1].chat().messages();
  ASSERT_EQ(second.size(), 4);
  EXPECT_EQ(second[0].role(), "system");
  EXPECT_EQ(second[0].content(), "Be brief.");
  EXPECT_EQ(second[1].role(), "user");
  EXPECT_EQ(second[1].content(), "Hello");
  EXPECT_EQ(second[2].role(), "assistant");
  EXPECT_EQ(second[2].content(), "Hi there.");
  EXPECT_EQ(second[2].reasoning_content(), "Hm.");
  EXPECT_EQ(second[3].role(), "user");
  EXPECT_EQ(second[3].content(), "How are you?");
}

TEST_F(ChatCommandTest, ToolCallsArePrintedAndKept) {
  Serve();
  const CommandResult r = RunChat(Flags(), "tool\nthanks\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Need the time.\n[tool call get_time({\"tz\": \"UTC\"})]\n"
            "Hm.Hi there.\n");
  const std::vector<pb::GenerateRequest> requests = service_->requests();
  ASSERT_EQ(requests.size(), 2u);
  const auto& messages = requests[1].chat().messages();
  ASSERT_EQ(messages.size(), 3);
  const pb::ChatMessage& call_turn = messages[1];
  EXPECT_EQ(call_turn.role(), "assistant");
  EXPECT_EQ(call_turn.content(), "");
  EXPECT_EQ(call_turn.reasoning_content(), "Need the time.");
  ASSERT_EQ(call_turn.tool_calls_size(), 1);
  EXPECT_EQ(call_turn.tool_calls(0).id(), "call_1");
  EXPECT_EQ(call_turn.tool_calls(0).type(), "function");
  EXPECT_EQ(call_turn.tool_calls(0).function().name(), "get_time");
  EXPECT_EQ(call_turn.tool_calls(0).function().arguments(),
            "{\"tz\": \"UTC\"}");
}

TEST_F(ChatCommandTest, ResetAndQuit) {
  Serve();
  const CommandResult r =
      RunChat(Flags(), "one\n/reset\ntwo\n/quit\nnever sent\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("[history cleared]"));
  const std::vector<pb::GenerateRequest> requests = service_->requests();
  ASSERT_EQ(requests.size(), 2u);
  ASSERT_EQ(requests[1].chat().messages_size(), 1);
  EXPECT_EQ(requests[1].chat().messages(0).content(), "two");
}

// Ctrl-C (SIGINT) once the partial answer is on stdout: the call is
// cancelled, and what was shown stays in the history.
TEST_F(ChatCommandTest, InterruptCancelsTheTurnAndKeepsWhatWasShown) {
  Serve();
  const std::string pid_file = TempPath("chat.pid");
  const std::string out_file = TempPath("chat.out");
  CommandResult r;
  std::thread chat(
      [&] { r = RunChat(Flags(), "slow\nnext\n", pid_file, out_file); });
  EXPECT_TRUE(WaitFor([&] { return ReadFile(out_file) == "Part"; },
                      absl::Seconds(30), "the partial answer on stdout"));
  int64_t pid = 0;
  EXPECT_TRUE(
      absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pid_file)), &pid));
  if (pid > 1) kill(static_cast<pid_t>(pid), SIGINT);
  chat.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(service_->saw_cancel());
  EXPECT_THAT(r.err, HasSubstr("[cancelled]"));
  EXPECT_EQ(ReadFile(out_file), "Part\nHm.Hi there.\n");
  const std::vector<pb::GenerateRequest> requests = service_->requests();
  ASSERT_EQ(requests.size(), 2u);
  const auto& messages = requests[1].chat().messages();
  ASSERT_EQ(messages.size(), 3);
  EXPECT_EQ(messages[0].content(), "slow");
  EXPECT_EQ(messages[1].role(), "assistant");
  EXPECT_EQ(messages[1].content(), "Part");
  EXPECT_EQ(messages[2].content(), "next");
}

TEST_F(ChatCommandTest, ModelWithoutTemplateFailsUpFront) {
  Serve(/*template_source=*/"");
  const CommandResult r = RunChat(Flags(), "Hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("fake-model) has no chat template"));
  EXPECT_TRUE(service_->requests().empty());
}

TEST_F(ChatCommandTest, WrongKeyFailsUpFront) {
  Serve();
  std::vector<std::string> args = {"--server", address_, "--api-key", "nope"};
  const CommandResult r = RunChat(args, "Hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "paceline chat: error: UNAUTHENTICATED: unknown API key\n");
  EXPECT_THAT(r.out, IsEmpty());
}

// The real daemon on stories260K with a chat template file of our own.
// GetModelInfo must name the configured template.
TEST(ChatCommandDaemonTest, TwoTurnsAnsweredWithTheHistory) {
  if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  const std::string tmpl = WriteFile(
      "chat.jinja",
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
      "{% if add_generation_prompt %}assistant:{% endif %}");
  const std::string config =
      WriteFile("pacelined.textproto",
                absl::StrCat("listen: \"127.0.0.1:0\"\nmodel { path: \"",
                             kStories260KPath, "\" chat_template_file: \"",
                             tmpl, "\" }\n"));
  DaemonProcess daemon;
  ASSERT_TRUE(daemon
                  .Start({"--config", config, "--tenant",
                          absl::StrCat("a:", kKey), "--allow-root"})
                  .ok())
      << daemon.stderr_text();
  {
    auto stub = pb::Paceline::NewStub(daemon.Channel());
    auto ctx = MakeClientContext(kKey);
    pb::GetModelInfoResponse info;
    ASSERT_TRUE(stub->GetModelInfo(ctx.get(), {}, &info).ok());
    ASSERT_EQ(info.chat().template_source(), "config");
  }
  // The same line twice: without the history both prompts would be equal.
  const CommandResult r =
      RunChat({"--server", daemon.address(), "--api-key", kKey, "--timeout",
               "60", "--max-tokens", "8", "--temperature", "0", "--stats"},
              "Once upon a time\nOnce upon a time\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(IsEmpty()));
  std::vector<int> prompt_tokens;
  for (absl::string_view line : absl::StrSplit(r.err, '\n')) {
    if (!absl::ConsumePrefix(&line, "turn ")) continue;
    const size_t at = line.find("prompt ");
    ASSERT_NE(at, absl::string_view::npos) << line;
    int n = 0;
    const absl::string_view rest = line.substr(at + 7);
    ASSERT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &n)) << line;
    prompt_tokens.push_back(n);
  }
  ASSERT_EQ(prompt_tokens.size(), 2u) << r.err;
  EXPECT_GT(prompt_tokens[0], 0);
  EXPECT_GT(prompt_tokens[1], prompt_tokens[0]) << r.err;
  EXPECT_EQ(daemon.Drain().value_or(-1), 0);
}

}  // namespace
}  // namespace paceline::testing
