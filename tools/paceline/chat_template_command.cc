// `paceline chat-template (--model MODEL | --template FILE) --messages FILE`:
// renders a conversation with a chat template, as the server would, for
// debugging templates.

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chat/chat_template.h"
#include "chat/prompt.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/json_parse.h"

namespace paceline::tools {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kUsage[] =
    "usage: paceline chat-template (--model MODEL.gguf | --template FILE)\n"
    "         --messages FILE.json [--tools FILE.json]\n"
    "         [--no-generation-prompt] [--var NAME=VALUE...] [--tokens]\n"
    "         [--now TIME]\n"
    "\n"
    "Renders a conversation with a chat template and prints the prompt\n"
    "exactly as rendered (no newline added). The template is --template's\n"
    "file, else the model's tokenizer.chat_template (its .tool_use variant\n"
    "when tools are given and the file has one). bos_token and eos_token\n"
    "are the model's tokens (empty without --model).\n"
    "\n"
    "  --model FILE         the GGUF model: its template and its tokenizer\n"
    "  --template FILE      a Jinja chat template file (overrides the "
    "model's)\n"
    "  --messages FILE      a JSON array of messages, or a JSON object whose\n"
    "                       keys are the template's variables (`messages`\n"
    "                       required; e.g. tools, enable_thinking), as the\n"
    "                       entries of chat_templates/conversations.json\n"
    "  --tools FILE         a JSON array of tools (replaces the file's)\n"
    "  --no-generation-prompt\n"
    "                       add_generation_prompt = false (default true)\n"
    "  --var NAME=VALUE     one more template variable (repeatable; wins over\n"
    "                       the files). VALUE is JSON; a VALUE that is not\n"
    "                       JSON and does not start with { [ or \" is taken\n"
    "                       as a string: --var bos_token='<s>'\n"
    "  --tokens             print the token ids instead (one line, as\n"
    "                       `paceline tokenize`), control tokens recognised;\n"
    "                       needs --model\n"
    "  --now TIME           what strftime_now formats, RFC 3339 (default:\n"
    "                       the current time), e.g. 2026-01-15T12:00:00Z\n";

constexpr FlagDef kFlags[] = {
    {"model", true},
    {"template", true},
    {"messages", true},
    {"tools", true},
    {"no-generation-prompt", false},
    {"var", true},
    {"tokens", false},
    {"now", true},
};

struct Flags {
  std::optional<std::string> model;
  std::optional<std::string> template_file;
  std::string messages_file;
  std::optional<std::string> tools_file;
  bool generation_prompt = true;
  std::vector<std::string> vars;  // NAME=VALUE
  bool tokens = false;
  absl::Time now = absl::Now();
};

absl::StatusOr<Flags> ReadFlags(const ParsedArgs& args) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  Flags f;
  f.model = args.Get("model");
  f.template_file = args.Get("template");
  if (!f.model && !f.template_file) {
    return absl::InvalidArgumentError("--model or --template is required");
  }
  if (!args.Has("messages")) {
    return absl::InvalidArgumentError("--messages is required");
  }
  f.messages_file = *args.Get("messages");
  f.tools_file = args.Get("tools");
  f.generation_prompt = !args.Has("no-generation-prompt");
  f.vars = args.GetAll("var");
  f.tokens = args.Has("tokens");
  if (f.tokens && !f.model) {
    return absl::InvalidArgumentError("--tokens needs --model (its tokenizer)");
  }
  if (auto v = args.Get("now")) {
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, *v, &f.now, &err)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--now wants an RFC 3339 time, got '", *v, "'"));
    }
  }
  return f;
}

// The --messages file as template variables: an array is `messages`; an
// object is taken whole and must have an array `messages`.
absl::StatusOr<Json> ReadMessages(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  ASSIGN_OR_RETURN(Json value, ParseJson(text, path));
  if (value.is_array()) return Json{{"messages", std::move(value)}};
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": want a JSON array of messages or an object"));
  }
  if (!value.contains("messages") || !value["messages"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the object has no array \"messages\""));
  }
  return value;
}

// One --var NAME=VALUE into `context`.
absl::Status AddVar(const std::string& var, Json& context) {
  const size_t eq = var.find('=');
  if (eq == 0 || eq == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--var wants NAME=VALUE, got '", var, "'"));
  }
  const std::string name = var.substr(0, eq);
  const std::string value = var.substr(eq + 1);
  Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    const bool looks_like_json =
        !value.empty() &&
        (value[0] == '{' || value[0] == '[' || value[0] == '"');
    if (looks_like_json) {
      RETURN_IF_ERROR(ParseJson(value, absl::StrCat("--var ", name)).status());
    }
    parsed = value;
  }
  context[name] = std::move(parsed);
  return absl::OkStatus();
}

// What the command works from: the model file and its tokenizer (when
// --model), and the template source.
struct Inputs {
  std::unique_ptr<engine::GgufFile> gguf;
  std::unique_ptr<engine::Tokenizer> tokenizer;
  std::string template_name;  // the file, or "MODEL tokenizer.chat_template"
  std::string template_source;
};

constexpr char kTemplateKey[] = "tokenizer.chat_template";
constexpr char kToolUseKey[] = "tokenizer.chat_template.tool_use";

// The model's template: the tool-use variant when tools are given and the
// file has one, as the server picks it.
absl::Status LoadModelTemplate(const std::string& model, bool tools,
                               Inputs& in) {
  const char* key =
      tools && in.gguf->Has(kToolUseKey) ? kToolUseKey : kTemplateKey;
  if (!in.gguf->Has(key)) {
    return absl::NotFoundError(absl::StrCat(model, " has no ", kTemplateKey,
                                            "; give one with --template FILE"));
  }
  ASSIGN_OR_RETURN(const absl::string_view source, in.gguf->GetString(key));
  in.template_name = absl::StrCat(model, " ", key);
  in.template_source = std::string(source);
  return absl::OkStatus();
}

absl::StatusOr<Inputs> LoadInputs(const Flags& f, bool tools) {
  Inputs in;
  if (f.model) {
    ASSIGN_OR_RETURN(in.gguf, engine::GgufFile::Open(*f.model));
    ASSIGN_OR_RETURN(in.tokenizer, engine::Tokenizer::FromGguf(*in.gguf));
  }
  if (f.template_file) {
    in.template_name = *f.template_file;
    ASSIGN_OR_RETURN(in.template_source, ReadWholeFile(*f.template_file));
    return in;
  }
  RETURN_IF_ERROR(LoadModelTemplate(*f.model, tools, in));
  return in;
}

// The vocabulary text of `id` ("<s>", "<|begin_of_text|>"), or "" for none.
std::string SpecialText(const engine::Tokenizer& tokenizer, int32_t id) {
  return id >= 0 && id < tokenizer.vocab_size() ? tokenizer.TokenText(id) : "";
}

// The template's variables, lowest precedence first: the model's
// bos_token/eos_token, the --messages file, --tools, the flags, --var.
absl::StatusOr<Json> BuildContext(const Flags& f,
                                  const engine::Tokenizer* tokenizer,
                                  Json messages, std::optional<Json> tools) {
  Json context = Json::object();
  context["bos_token"] =
      tokenizer ? SpecialText(*tokenizer, tokenizer->bos_id()) : "";
  context["eos_token"] =
      tokenizer ? SpecialText(*tokenizer, tokenizer->eos_id()) : "";
  for (auto& [key, value] : messages.items()) context[key] = std::move(value);
  if (tools) context["tools"] = std::move(*tools);
  if (!f.generation_prompt || !context.contains("add_generation_prompt")) {
    context["add_generation_prompt"] = f.generation_prompt;
  }
  for (const std::string& var : f.vars) RETURN_IF_ERROR(AddVar(var, context));
  return context;
}

// `status` with "WHERE: " in front of its message, the code kept.
absl::Status Prefixed(absl::string_view where, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(where, ": ", status.message()));
}

// The --tools file: a JSON array.
absl::StatusOr<std::optional<Json>> ReadTools(
    const std::optional<std::string>& path) {
  if (!path) return std::nullopt;
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(*path));
  ASSIGN_OR_RETURN(Json tools, ParseJson(text, *path));
  if (!tools.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(*path, ": want a JSON array of tools"));
  }
  return tools;
}

bool NonEmptyArray(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_array() && !it->empty();
}

absl::Status Render(const Flags& f) {
  ASSIGN_OR_RETURN(Json messages, ReadMessages(f.messages_file));
  ASSIGN_OR_RETURN(std::optional<Json> tools, ReadTools(f.tools_file));
  const bool has_tools =
      tools ? !tools->empty() : NonEmptyArray(messages, "tools");
  ASSIGN_OR_RETURN(const Inputs in, LoadInputs(f, has_tools));
  ASSIGN_OR_RETURN(const Json context,
                   BuildContext(f, in.tokenizer.get(), std::move(messages),
                                std::move(tools)));
  auto tmpl = chat::ChatTemplate::Parse(in.template_source);
  if (!tmpl.ok()) return Prefixed(in.template_name, tmpl.status());
  chat::ChatRenderOptions options;
  options.now = f.now;
  if (!f.tokens) {
    absl::StatusOr<std::string> prompt = tmpl->Render(context, options);
    if (!prompt.ok()) return Prefixed(in.template_name, prompt.status());
    std::cout << *prompt;
  } else {
    // As the server tokenizes: control tokens only where the template put
    // them, BOS once (chat/prompt.h).
    const chat::ChatPromptEncoder encoder(in.tokenizer.get());
    absl::StatusOr<chat::ChatPrompt> prompt =
        encoder.Render(*tmpl, context, options);
    if (!prompt.ok()) return Prefixed(in.template_name, prompt.status());
    std::cout << absl::StrJoin(prompt->tokens, " ") << "\n";
  }
  std::cout << std::flush;
  return absl::OkStatus();
}

}  // namespace

int RunChatTemplate(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("chat-template", kUsage, parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  auto flags = ReadFlags(*parsed);
  if (!flags.ok()) {
    return UsageError("chat-template", kUsage, flags.status().message());
  }
  if (absl::Status s = Render(*flags); !s.ok()) {
    return Failure("chat-template", s);
  }
  return kExitOk;
}

}  // namespace paceline::tools
