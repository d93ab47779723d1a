#ifndef PACELINE_SERVER_OPENAI_OPENAI_CHAT_FIELDS_H_
#define PACELINE_SERVER_OPENAI_OPENAI_CHAT_FIELDS_H_

// The chat fields Chat Completions and the Responses API read alike:
// tool_choice's string modes, parallel_tool_calls, and the template options
// (vLLM's `chat_template_kwargs`, `add_generation_prompt`). Internal to
// server/openai; the facts are in openai_request.h.

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "paceline/v1/paceline.pb.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

// InvalidParam(param, "'param': WHAT is not supported").
absl::Status NotSupported(absl::string_view param, absl::string_view what);

// `tool_choice` given as a string: "auto", "none" (clears chat's tools: the
// template renders as if none were sent) or "required" (needs tools).
absl::Status ToolChoiceMode(const Json& choice, v1::Chat* chat,
                            OpenAiRequest* out);

// `parallel_tool_calls`, true when absent (OpenAI's default).
absl::StatusOr<bool> ParallelToolCalls(const Json& body);

// One API's reader of one tool (`param` names it, "tools[2]"): fills
// `out` and says whether the tool is strict.
using ToolReader = absl::Status (*)(const Json& tool, absl::string_view param,
                                    v1::Tool* out, bool* strict);

// `tools` (absent: none), each read by `read` into chat's tools; `strict`
// gets one entry per tool.
absl::Status ReadTools(const Json& body, ToolReader read, v1::Chat* chat,
                       std::vector<bool>* strict);

// tool_choice naming `name` (the field `param`): kNamed when it is one of
// chat's tools, else InvalidParam.
absl::Status ChooseNamedTool(const v1::Chat& chat, std::string name,
                             absl::string_view param, OpenAiRequest* out);

// A tool's `strict` (false when absent).
absl::StatusOr<bool> StrictFlag(const Json& tool, absl::string_view param);

// `chat_template_kwargs` (each value kept as JSON text) and
// `add_generation_prompt`.
absl::Status TemplateOptions(const Json& body, v1::Chat* chat);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_CHAT_FIELDS_H_
