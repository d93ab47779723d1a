// `paceline chat --server ADDR`: an interactive chat in the terminal against
// a running pacelined. Each line typed is a user turn; the conversation so
// far goes with it as a chat request (Generate with input.chat), and the
// answer streams back at the requested pace.
//
// Signals: SIGINT is blocked in every thread and taken by one thread with
// sigwait, so the reaction to Ctrl-C is ordinary code: during a turn it
// cancels that turn's call (ClientContext::TryCancel is thread-safe); at the
// prompt it ends the program.

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/grpc_client.h"

namespace paceline::tools {
namespace {

namespace pb = ::paceline::v1;

constexpr char kUsage[] =
    "usage: paceline chat --server ADDR [--api-key KEY] [--system TEXT]\n"
    "         [--pace TPS] [--max-tokens N] [--temperature T]\n"
    "         [--var NAME=JSON...] [--stats] [--timeout SECONDS]\n"
    "         [--tls-ca FILE]\n"
    "\n"
    "Chats with the model served at ADDR: each line read from stdin is a\n"
    "user message, sent with the conversation so far and rendered by the\n"
    "model's chat template on the server. The answer streams to stdout at\n"
    "the requested pace; the model's reasoning is shown dimmed (on a\n"
    "terminal) and tool calls as [tool call NAME(ARGUMENTS)]. The history\n"
    "keeps each user message and the answer (its reasoning as\n"
    "reasoning_content, its tool calls).\n"
    "\n"
    "  /reset      clears the history (the --system message stays)\n"
    "  /quit       exits, as do Ctrl-D and Ctrl-C at the prompt\n"
    "  Ctrl-C      during an answer cancels it; the part already shown stays\n"
    "              in the history, so the model sees what you saw\n"
    "\n"
    "A turn that fails is reported on stderr and left out of the history;\n"
    "the exit code is then 1 at the end.\n"
    "\n"
    "  --server ADDR      host:port of pacelined\n"
    "  --api-key KEY      the tenant's API key (default: $PACELINE_API_KEY)\n"
    "  --system TEXT      a system message that starts the conversation\n"
    "  --pace TPS         delivery pace in tokens/s (0: as generated;\n"
    "                     default: the tenant's)\n"
    "  --max-tokens N     most tokens per answer\n"
    "  --temperature T    0 = greedy\n"
    "  --var NAME=JSON    a template keyword argument (repeatable), e.g.\n"
    "                     --var enable_thinking=false\n"
    "  --stats            after each answer, a line on stderr:\n"
    "                     turn N: REASON; prompt P tokens (C cached),\n"
    "                     generated M tokens\n"
    "  --timeout SECONDS  deadline for each answer (default: none)\n"
    "  --tls-ca FILE      use TLS, trusting the PEM certificates in FILE\n";

constexpr FlagDef kFlags[] = {
    {"server", true}, {"api-key", true},    {"system", true},
    {"pace", true},   {"max-tokens", true}, {"temperature", true},
    {"var", true},    {"stats", false},     {"timeout", true},
    {"tls-ca", true},
};

struct ChatFlags {
  std::string server;
  std::string api_key;
  std::string tls_ca;
  std::optional<std::string> system;
  bool stats = false;
  std::optional<double> timeout_s;
  // Sampling, stopping, delivery and template kwargs of every turn.
  pb::GenerateRequest base;
};

absl::Status ReadVars(const ParsedArgs& args, pb::Chat& chat) {
  for (const std::string& var : args.GetAll("var")) {
    const size_t eq = var.find('=');
    if (eq == 0 || eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--var wants NAME=JSON, got '", var, "'"));
    }
    (*chat.mutable_template_kwargs())[var.substr(0, eq)] = var.substr(eq + 1);
  }
  return absl::OkStatus();
}

absl::Status ReadRequestFlags(const ParsedArgs& args, pb::GenerateRequest& r) {
  ASSIGN_OR_RETURN(const std::optional<int32_t> max_tokens,
                   GetInt32Flag(args, "max-tokens", {.min = 1}));
  if (max_tokens) r.mutable_stopping()->set_max_tokens(*max_tokens);
  ASSIGN_OR_RETURN(const std::optional<double> temperature,
                   GetNumberFlag(args, "temperature", kNonNegative));
  if (temperature) {
    r.mutable_sampling()->set_temperature(static_cast<float>(*temperature));
  }
  ASSIGN_OR_RETURN(const std::optional<double> pace,
                   GetNumberFlag(args, "pace", kNonNegative));
  if (pace) r.mutable_delivery()->set_pace_tokens_per_s(*pace);
  return ReadVars(args, *r.mutable_chat());
}

absl::StatusOr<ChatFlags> ReadFlags(const ParsedArgs& args) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  if (!args.Has("server")) {
    return absl::InvalidArgumentError("--server is required");
  }
  ChatFlags f;
  f.server = *args.Get("server");
  if (auto v = args.Get("api-key")) {
    f.api_key = *v;
  } else if (const char* env = std::getenv("PACELINE_API_KEY")) {
    f.api_key = env;
  }
  if (f.api_key.empty()) {
    return absl::InvalidArgumentError(
        "--api-key (or PACELINE_API_KEY) is required");
  }
  f.tls_ca = args.Get("tls-ca").value_or("");
  f.system = args.Get("system");
  f.stats = args.Has("stats");
  ASSIGN_OR_RETURN(f.timeout_s, GetNumberFlag(args, "timeout", kPositive));
  RETURN_IF_ERROR(ReadRequestFlags(args, f.base));
  return f;
}

// Takes SIGINT (blocked everywhere, see the top of the file) and either
// cancels the call of the turn in progress or, at the prompt, exits.
class InterruptHandler {
 public:
  // Blocks SIGINT in the calling thread (and so in every thread it starts
  // later) and starts the thread that waits for it. Call first in main.
  InterruptHandler() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::thread([this] { Wait(); }).detach();
  }

  // Ctrl-C now cancels `ctx` (until Disarm).
  void Arm(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&mu_);
    ctx_ = ctx;
    cancelled_ = false;
  }
  // Back at the prompt; whether Ctrl-C cancelled the call meanwhile.
  bool Disarm() {
    absl::MutexLock lock(&mu_);
    ctx_ = nullptr;
    return cancelled_;
  }

 private:
  // Runs for the life of the process (the object is never destroyed).
  void Wait() {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      absl::MutexLock lock(&mu_);
      if (ctx_ != nullptr) {
        cancelled_ = true;
        ctx_->TryCancel();
        continue;
      }
      // At the prompt: everything printed so far was flushed before
      // reading.
      (void)!write(STDOUT_FILENO, "\n", 1);
      _exit(kExitOk);
    }
  }

  sigset_t set_;
  absl::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Writes one answer to stdout as its deltas arrive: content as is,
// reasoning dimmed on a terminal, tool calls as [tool call NAME(ARGS)].
// Keeps what it printed, for the history.
class AnswerPrinter {
 public:
  explicit AnswerPrinter(bool ansi) : ansi_(ansi) {}

  void Add(const pb::Delta& delta) {
    if (!delta.reasoning().empty()) {
      Switch(Part::kReasoning);
      Print(delta.reasoning());
      message_.set_reasoning_content(message_.reasoning_content() +
                                     delta.reasoning());
    }
    if (!delta.text().empty()) {
      Switch(Part::kText);
      Print(delta.text());
      message_.set_content(message_.content() + delta.text());
    }
    for (const pb::ToolCallDelta& call : delta.tool_calls()) AddToolCall(call);
    std::cout << std::flush;
  }

  // Ends the answer's output with a newline; the assistant message.
  pb::ChatMessage Finish() {
    Switch(Part::kNone);
    if (line_open_) Print("\n");
    std::cout << std::flush;
    pb::ChatMessage message = message_;
    message.set_role("assistant");
    if (!message.has_content()) message.set_content("");
    for (auto& [index, call] : calls_) *message.add_tool_calls() = call;
    return message;
  }

 private:
  enum class Part { kNone, kText, kReasoning, kToolCall };

  void AddToolCall(const pb::ToolCallDelta& d) {
    pb::ToolCall& call = calls_[d.index()];
    call.set_type("function");
    if (!d.id().empty()) call.set_id(d.id());
    if (!d.name().empty()) call.mutable_function()->set_name(d.name());
    call.mutable_function()->mutable_arguments()->append(d.arguments());
    if (part_ != Part::kToolCall || d.index() != open_call_) {
      Switch(Part::kNone);
      if (line_open_) Print("\n");
      Print(absl::StrCat("[tool call ", call.function().name(), "("));
      part_ = Part::kToolCall;
      open_call_ = d.index();
    }
    Print(d.arguments());
  }

  void Print(absl::string_view text) {
    if (text.empty()) return;
    std::cout << text;
    line_open_ = text.back() != '\n';
  }

  // Closes the part in progress (dim, a tool call) and opens `next`.
  void Switch(Part next) {
    if (next == part_) return;
    if (part_ == Part::kReasoning && ansi_) std::cout << "\x1b[0m";
    if (part_ == Part::kToolCall) Print(")]\n");
    if (next == Part::kReasoning && ansi_) std::cout << "\x1b[2m";
    part_ = next;
  }

  const bool ansi_;
  Part part_ = Part::kNone;
  int32_t open_call_ = -1;
  bool line_open_ = false;  // the last character printed was not '\n'
  pb::ChatMessage message_;
  std::map<int32_t, pb::ToolCall> calls_;  // by the delta's index
};

// "eos", "length", "tool_calls", ...
std::string ReasonName(pb::FinishReason reason) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(pb::FinishReason_Name(reason), "FINISH_REASON_"));
}

// One conversation: its history and the calls that extend it.
class ChatSession {
 public:
  ChatSession(const ChatFlags& flags, pb::Paceline::Stub& stub,
              InterruptHandler& interrupts)
      : flags_(flags), stub_(stub), interrupts_(interrupts) {}

  // Fails when the server cannot be reached, refuses the key, or serves a
  // model without a chat template (every turn would fail).
  absl::Status CheckServer();

  // Reads lines until EOF or /quit. False when some turn failed.
  bool Run();

 private:
  // Sends the history plus `user`; streams the answer. On success (or a
  // cancel by the user) the user message and the answer join the history.
  absl::Status Turn(const std::string& user);
  void Prepare(grpc::ClientContext& ctx) const;
  pb::GenerateRequest Request(const pb::ChatMessage& user) const;
  void PrintStats(const pb::Finished& finished) const;

  const ChatFlags& flags_;
  pb::Paceline::Stub& stub_;
  InterruptHandler& interrupts_;
  std::vector<pb::ChatMessage> history_;  // without the system message
  int turns_ = 0;
};

void ChatSession::Prepare(grpc::ClientContext& ctx) const {
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", flags_.api_key));
  if (flags_.timeout_s.has_value()) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::duration<double>(*flags_.timeout_s)));
  }
}

absl::Status ChatSession::CheckServer() {
  grpc::ClientContext ctx;
  Prepare(ctx);
  if (!flags_.timeout_s.has_value()) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
  }
  pb::GetModelInfoResponse info;
  const grpc::Status s = stub_.GetModelInfo(&ctx, {}, &info);
  if (!s.ok()) return FromGrpc(s, ctx);
  if (info.chat().template_source().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the served model (", info.model().id(),
                     ") has no chat template: give the daemon one with model { "
                     "chat_template_file } in its config"));
  }
  return absl::OkStatus();
}

pb::GenerateRequest ChatSession::Request(const pb::ChatMessage& user) const {
  pb::GenerateRequest request = flags_.base;
  pb::Chat& chat = *request.mutable_chat();
  if (flags_.system.has_value()) {
    pb::ChatMessage& system = *chat.add_messages();
    system.set_role("system");
    system.set_content(*flags_.system);
  }
  for (const pb::ChatMessage& m : history_) *chat.add_messages() = m;
  *chat.add_messages() = user;
  return request;
}

void ChatSession::PrintStats(const pb::Finished& fin) const {
  if (!flags_.stats) return;
  const pb::Usage& u = fin.usage();
  std::cerr << absl::StrFormat(
      "turn %d: %s; prompt %d tokens (%d cached), generated %d tokens\n",
      turns_, ReasonName(fin.reason()), u.prompt_tokens(),
      u.cached_prompt_tokens(), u.completion_tokens());
}

absl::Status ChatSession::Turn(const std::string& text) {
  pb::ChatMessage user;
  user.set_role("user");
  user.set_content(text);
  grpc::ClientContext ctx;
  Prepare(ctx);
  interrupts_.Arm(&ctx);
  auto reader = stub_.Generate(&ctx, Request(user));
  AnswerPrinter printer(isatty(STDOUT_FILENO) == 1);
  std::optional<pb::Finished> finished;
  for (pb::GenerateResponse event; reader->Read(&event);) {
    if (event.has_delta()) printer.Add(event.delta());
    if (event.has_finished()) finished = event.finished();
  }
  const grpc::Status s = reader->Finish();
  const bool cancelled = interrupts_.Disarm();
  pb::ChatMessage answer = printer.Finish();
  ++turns_;
  if (cancelled) {
    std::cerr << "[cancelled]\n";
  } else if (!s.ok()) {
    return FromGrpc(s, ctx);
  } else if (!finished.has_value()) {
    return absl::InternalError("the stream ended without a Finished message");
  } else if (finished->reason() == pb::FINISH_REASON_ERROR) {
    return absl::InternalError(
        absl::StrCat("generation failed: ", finished->message()));
  }
  if (finished.has_value()) PrintStats(*finished);
  history_.push_back(std::move(user));
  history_.push_back(std::move(answer));
  return absl::OkStatus();
}

bool ChatSession::Run() {
  const bool interactive = isatty(STDIN_FILENO) == 1;
  bool all_ok = true;
  for (std::string line;;) {
    if (interactive) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty()) continue;
    if (text == "/quit") break;
    if (text == "/reset") {
      history_.clear();
      std::cerr << "[history cleared]\n";
      continue;
    }
    if (absl::Status s = Turn(std::string(text)); !s.ok()) {
      std::cerr << "paceline chat: error: " << s.message() << "\n";
      all_ok = false;
    }
  }
  if (interactive) std::cout << "\n" << std::flush;
  return all_ok;
}

}  // namespace

int RunChat(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("chat", kUsage, parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  auto flags = ReadFlags(*parsed);
  if (!flags.ok()) return UsageError("chat", kUsage, flags.status().message());
  // Before gRPC starts any thread, so that they all inherit the mask.
  static InterruptHandler* interrupts = new InterruptHandler();
  auto channel = Connect(flags->server, flags->tls_ca);
  if (!channel.ok()) return Failure("chat", channel.status());
  std::unique_ptr<pb::Paceline::Stub> stub = pb::Paceline::NewStub(*channel);
  ChatSession session(*flags, *stub, *interrupts);
  if (absl::Status s = session.CheckServer(); !s.ok()) {
    return Failure("chat", s);
  }
  return session.Run() ? kExitOk : kExitFailure;
}

}  // namespace paceline::tools
