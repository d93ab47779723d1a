// libFuzzer target for the chat template interpreter (ChatTemplate::Parse
// and Render): templates come from model files, so any bytes must either be
// refused with a Status or render within the limits, without a crash, a
// hang or an unbounded allocation.
//
// Input framing: the bytes before the first NUL are the template; the
// bytes after it, when they parse as a JSON object, are the render context.
// Without a NUL, or when the rest is not a JSON object, a fixed context
// (a short conversation with a tool call, tools, bos/eos) is used, so that
// mutations of the template alone still render against realistic data.
//
// Checks beyond the sanitizers': a successful render stays within
// max_output_bytes, rendering twice gives the same text (Render is const
// and deterministic), and errors carry the codes chat_template.h promises.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chat/chat_template.h"
#include "nlohmann/json.hpp"

namespace {

using ::paceline::chat::ChatRenderOptions;
using ::paceline::chat::ChatTemplate;
using ::paceline::chat::ChatTemplateLimits;
using Json = nlohmann::ordered_json;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "chat_template_fuzzer invariant violated: %s\n", what);
    std::abort();
  }
}

// Small limits keep each input fast (libFuzzer runs with -timeout=10 and
// -malloc_limit_mb; tools/fuzz.sh).
ChatTemplateLimits FuzzLimits() {
  ChatTemplateLimits limits;
  limits.max_source_bytes = 64 << 10;
  limits.max_loop_iterations = 20'000;
  limits.max_depth = 40;
  limits.max_output_bytes = 256 << 10;
  return limits;
}

const Json& DefaultContext() {
  static const Json* context = new Json(Json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? \u00e9\u4e2d"},
      {"role": "assistant", "content": null, "reasoning_content": "think",
       "tool_calls": [{"id": "c1", "type": "function", "function":
         {"name": "get_weather", "arguments": {"city": "Paris", "n": [1, 2.5]}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18C"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Current weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })",
                                                    nullptr, false));
  return *context;
}

// Parse: a syntax error (InvalidArgument) or the source limit; Render: a
// template error (InvalidArgument) or a limit (ResourceExhausted).
bool ErrorCodeOk(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kResourceExhausted;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const absl::string_view source = input.substr(0, nul);
  Json parsed;
  if (nul != absl::string_view::npos) {
    parsed = Json::parse(input.substr(nul + 1), nullptr,
                         /*allow_exceptions=*/false);
  }
  const Json& context = parsed.is_object() ? parsed : DefaultContext();

  const ChatTemplateLimits limits = FuzzLimits();
  auto tmpl = ChatTemplate::Parse(source, limits);
  if (!tmpl.ok()) {
    Check(!tmpl.status().message().empty(), "a parse error without a message");
    Check(ErrorCodeOk(tmpl.status().code()),
          "a parse error of a code chat_template.h does not name");
    return 0;
  }
  ChatRenderOptions options;
  options.now = absl::FromUnixSeconds(1'768'478'400);  // 2026-01-15 12:00 UTC
  options.limits = limits;
  auto first = tmpl->Render(context, options);
  auto second = tmpl->Render(context, options);
  Check(first.ok() == second.ok(), "rendering twice: ok once only");
  if (!first.ok()) {
    Check(ErrorCodeOk(first.status().code()),
          "a render error of a code chat_template.h does not name");
    Check(first.status() == second.status(), "rendering twice: two errors");
    return 0;
  }
  Check(first->size() <= limits.max_output_bytes, "output over the limit");
  Check(*first == *second, "rendering twice: two texts");
  return 0;
}
