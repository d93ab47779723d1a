#include "engine/sampling/grammar/tool_call_grammar.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/tool_call_markup.h"
#include "nlohmann/json.hpp"

namespace paceline::engine::grammar {
namespace {

using J = nlohmann::ordered_json;

constexpr const char* kModeNames[] = {"required", "named", "auto"};

absl::Status ToolError(const ToolSchema& tool, absl::StatusCode code,
                       absl::string_view what) {
  return absl::Status(
      code, absl::StrCat("tool '", tool.name, "' parameters: ", what));
}

}  // namespace

namespace internal {

// The arguments' schema, held to an object.
absl::StatusOr<J> ToolObjectSchema(const ToolSchema& tool,
                                   const JsonSchemaOptions& json) {
  const auto invalid = absl::StatusCode::kInvalidArgument;
  if (tool.parameters.empty()) return J{{"type", "object"}};
  if (static_cast<int64_t>(tool.parameters.size()) > json.max_schema_bytes) {
    return ToolError(
        tool, invalid,
        absl::StrCat("the schema has ", tool.parameters.size(),
                     " bytes, more than the limit of ", json.max_schema_bytes));
  }
  J schema = J::parse(tool.parameters, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) {
    return ToolError(tool, invalid, "not valid JSON");
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) {
      return ToolError(tool, invalid, "the schema false admits no arguments");
    }
    return J{{"type", "object"}};
  }
  if (!schema.is_object()) {
    return ToolError(tool, invalid, "must be a JSON Schema object");
  }
  auto type = schema.find("type");
  if (type == schema.end()) {
    schema["type"] = "object";
  } else if (type->is_array() && std::find(type->begin(), type->end(),
                                           J("object")) != type->end()) {
    *type = "object";
  } else if (*type != J("object")) {
    return ToolError(tool, invalid,
                     "must describe an object (its 'type' has no "
                     "\"object\")");
  }
  return schema;
}

}  // namespace internal

namespace {

// Builds one spec's language into a grammar.
class Builder {
 public:
  Builder(const ToolCallSpec& spec, const JsonSchemaOptions& json)
      : spec_(spec), json_(json) {}

  absl::StatusOr<Grammar> Build() &&;

 private:
  absl::StatusOr<ExprId> Arguments(const ToolSchema& tool);
  // Any tool: `head(tool)` then the tool's arguments.
  template <typename Head>
  ExprId EachTool(Head head);
  ExprId Required();
  ExprId Named();
  ExprId Opening();  // auto: the call's opening, each trigger's text first
  ExprId Id();       // 9 letters and digits
  ExprId JsonId();   // Mistral's optional `, "id": "ID"`
  // One `call`, then more after `separator` when parallel.
  ExprId Calls(ExprId call, absl::string_view separator);

  const ToolCallSpec& spec_;
  const JsonSchemaOptions json_;
  Grammar g_;
  std::vector<ExprId> args_;  // [tool]
};

absl::StatusOr<ExprId> Builder::Arguments(const ToolSchema& tool) {
  ASSIGN_OR_RETURN(J schema, internal::ToolObjectSchema(tool, json_));
  if (!tool.strict && !JsonSchemaToGrammar(schema, json_).ok()) {
    schema = J{{"type", "object"}};  // compiled alone first: g_ stays whole
  }
  absl::StatusOr<ExprId> e = AddJsonSchema(&g_, schema, json_);
  if (!e.ok()) return ToolError(tool, e.status().code(), e.status().message());
  return e;
}

template <typename Head>
ExprId Builder::EachTool(Head head) {
  std::vector<ExprId> alts;
  for (size_t i = 0; i < spec_.tools.size(); ++i) {
    alts.push_back(g_.Seq({head(spec_.tools[i]), args_[i]}));
  }
  return g_.Alt(std::move(alts));
}

ExprId Builder::Id() {
  return g_.Repeat(g_.Bytes({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}), 9, 9);
}

ExprId Builder::JsonId() {
  return g_.Optional(
      g_.Seq({g_.Literal(", \"id\": \""), Id(), g_.Literal("\"")}));
}

ExprId Builder::Calls(ExprId call, absl::string_view separator) {
  if (!spec_.parallel) return call;
  const RuleId rule = g_.AddRule("call");
  g_.SetRule(rule, call);
  return g_.Seq(
      {g_.Ref(rule), g_.Star(g_.Seq({g_.Literal(separator), g_.Ref(rule)}))});
}

// JSON text that never throws (invalid UTF-8 replaced).
std::string Dump(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

// The name as a JSON string, quotes included.
std::string Quoted(const ToolSchema& tool) { return Dump(J(tool.name)); }

ExprId Builder::Required() {
  switch (spec_.syntax) {
    case ToolCallSyntax::kHermes: {
      ExprId call = g_.Seq(
          {g_.Literal("{\"name\": "), EachTool([&](const ToolSchema& t) {
             return g_.Literal(absl::StrCat(Quoted(t), ", \"arguments\": "));
           }),
           g_.Literal("}\n</tool_call>")});
      return Calls(call, "\n<tool_call>\n");
    }
    case ToolCallSyntax::kLlama3:  // after `{"name": "`
      return g_.Seq({EachTool([&](const ToolSchema& t) {
                       return g_.Literal(absl::StrCat(Quoted(t).substr(1),
                                                      ", \"parameters\": "));
                     }),
                     g_.Literal("}")});
    case ToolCallSyntax::kMistral: {
      ExprId call = g_.Seq(
          {g_.Literal("{\"name\": "), EachTool([&](const ToolSchema& t) {
             return g_.Literal(absl::StrCat(Quoted(t), ", \"arguments\": "));
           }),
           JsonId(), g_.Literal("}")});
      return g_.Seq({g_.Literal("["), Calls(call, ", "), g_.Literal("]")});
    }
    case ToolCallSyntax::kMarkup:
      break;  // Build
    case ToolCallSyntax::kMistralArgs: {
      ExprId call = EachTool([&](const ToolSchema& t) {
        return g_.Seq({g_.Literal(t.name),
                       g_.Optional(g_.Seq({g_.Literal("[CALL_ID]"), Id()})),
                       g_.Literal("[ARGS]")});
      });
      return Calls(call, "[TOOL_CALLS]");
    }
  }
  return g_.Nothing();
}

ExprId Builder::Named() {
  const ExprId args = args_[0];
  switch (spec_.syntax) {
    case ToolCallSyntax::kHermes:
      return g_.Seq({args, g_.Literal("}\n</tool_call>")});
    case ToolCallSyntax::kLlama3:
      return g_.Seq({args, g_.Literal("}")});
    case ToolCallSyntax::kMistral:
      return g_.Seq({args, JsonId(), g_.Literal("}]")});
    case ToolCallSyntax::kMistralArgs:
      return args;
    case ToolCallSyntax::kMarkup:
      break;  // Build
  }
  return g_.Nothing();
}

ExprId Builder::Opening() {
  switch (spec_.syntax) {
    case ToolCallSyntax::kHermes:
      return g_.Literal("<tool_call>\n");
    case ToolCallSyntax::kLlama3:
      return g_.Seq({g_.Optional(g_.Literal("<|python_tag|>")),
                     g_.Literal("{\"name\": \"")});
    case ToolCallSyntax::kMistral:
    case ToolCallSyntax::kMistralArgs:
      return g_.Literal("[TOOL_CALLS]");
    case ToolCallSyntax::kMarkup:
      break;  // Build
  }
  return g_.Nothing();
}

absl::StatusOr<Grammar> Builder::Build() && {
  const bool markup = spec_.syntax == ToolCallSyntax::kMarkup;
  if (!markup || !spec_.markup.xml) {
    for (const ToolSchema& tool : spec_.tools) {
      ASSIGN_OR_RETURN(ExprId args, Arguments(tool));
      args_.push_back(args);
    }
  }
  ExprId body;
  if (markup) {
    ASSIGN_OR_RETURN(body, internal::MarkupLanguage(&g_, spec_, args_, json_));
  } else {
    body = spec_.mode == ToolCallMode::kNamed ? Named() : Required();
    if (spec_.mode == ToolCallMode::kAuto) body = g_.Seq({Opening(), body});
  }
  const RuleId root = g_.AddRule("root");
  g_.SetRule(root, body);
  g_.set_root(root);
  if (g_.num_exprs() > json_.max_grammar_exprs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tools' grammar has ", g_.num_exprs(),
        " expressions, more than the limit of ", json_.max_grammar_exprs));
  }
  return std::move(g_);
}

bool IsNameByte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.';
}

absl::Status CheckSpec(const ToolCallSpec& spec) {
  if (spec.tools.empty()) {
    return absl::InvalidArgumentError("tool calls need at least one tool");
  }
  if (spec.mode == ToolCallMode::kNamed && spec.tools.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a named tool call takes exactly one tool, got ", spec.tools.size()));
  }
  for (const ToolSchema& tool : spec.tools) {
    if (tool.name.empty()) {
      return absl::InvalidArgumentError("a tool's name is empty");
    }
    if ((spec.syntax == ToolCallSyntax::kMistralArgs ||
         spec.syntax == ToolCallSyntax::kMarkup) &&
        !std::all_of(tool.name.begin(), tool.name.end(), IsNameByte)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tool '", tool.name, "': the ", ToolCallSyntaxName(spec.syntax),
          " call syntax writes names of letters, digits, '_', '-' and '.' "
          "only"));
    }
  }
  if (spec.syntax == ToolCallSyntax::kMarkup) {
    return internal::CheckMarkup(spec);
  }
  return absl::OkStatus();
}

// obj[key] when it has type `is`, null when absent; false when present
// with another type.
template <typename Is>
bool Member(const nlohmann::json& obj, const char* key, Is is,
            const nlohmann::json** out) {
  auto it = obj.find(key);
  *out = it == obj.end() ? nullptr : &*it;
  return *out == nullptr || ((**out).*is)();
}

absl::StatusOr<ToolCallSpec> ParseSpec(absl::string_view text) {
  using nlohmann::json;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [] {
    return absl::InvalidArgumentError("malformed tool-call spec");
  };
  const json *syntax, *mode, *parallel, *tools;
  if (!j.is_object() || !Member(j, "syntax", &json::is_string, &syntax) ||
      !Member(j, "mode", &json::is_string, &mode) ||
      !Member(j, "parallel", &json::is_boolean, &parallel) ||
      !Member(j, "tools", &json::is_array, &tools) || syntax == nullptr ||
      mode == nullptr || tools == nullptr) {
    return bad();
  }
  ToolCallSpec spec;
  if (syntax->get<std::string>() ==
      ToolCallSyntaxName(ToolCallSyntax::kMarkup)) {
    spec.syntax = ToolCallSyntax::kMarkup;
    auto markup = j.find("markup");
    if (markup == j.end() || !internal::MarkupFromJson(*markup, &spec.markup)) {
      return bad();
    }
  } else {
    ASSIGN_OR_RETURN(spec.syntax,
                     ParseToolCallSyntax(syntax->get<std::string>()));
  }
  const auto m = std::find(std::begin(kModeNames), std::end(kModeNames),
                           mode->get<std::string>());
  if (m == std::end(kModeNames)) return bad();
  spec.mode = static_cast<ToolCallMode>(m - std::begin(kModeNames));
  spec.parallel = parallel != nullptr && parallel->get<bool>();
  for (const json& t : *tools) {
    const json *name, *parameters, *strict;
    if (!t.is_object() || !Member(t, "name", &json::is_string, &name) ||
        !Member(t, "parameters", &json::is_string, &parameters) ||
        !Member(t, "strict", &json::is_boolean, &strict) || name == nullptr) {
      return bad();
    }
    spec.tools.push_back(
        {name->get<std::string>(),
         parameters == nullptr ? "" : parameters->get<std::string>(),
         strict != nullptr && strict->get<bool>()});
  }
  RETURN_IF_ERROR(CheckSpec(spec));
  return spec;
}

}  // namespace

absl::StatusOr<ToolCallSyntax> ParseToolCallSyntax(absl::string_view name) {
  for (ToolCallSyntax s :
       {ToolCallSyntax::kHermes, ToolCallSyntax::kLlama3,
        ToolCallSyntax::kMistral, ToolCallSyntax::kMistralArgs}) {
    if (name == ToolCallSyntaxName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tool-call syntax '", name,
                   "' (hermes, llama3, mistral, mistral_args)"));
}

const char* ToolCallSyntaxName(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return "hermes";
    case ToolCallSyntax::kLlama3:
      return "llama3";
    case ToolCallSyntax::kMistral:
      return "mistral";
    case ToolCallSyntax::kMistralArgs:
      return "mistral_args";
    case ToolCallSyntax::kMarkup:
      return "markup";
  }
  return "unknown";
}

std::string ToolCallSpecText(const ToolCallSpec& spec) {
  J tools = J::array();
  for (const ToolSchema& t : spec.tools) {
    tools.push_back(
        {{"name", t.name}, {"parameters", t.parameters}, {"strict", t.strict}});
  }
  J j = {{"syntax", ToolCallSyntaxName(spec.syntax)},
         {"mode", kModeNames[static_cast<int>(spec.mode)]},
         {"parallel", spec.parallel},
         {"tools", std::move(tools)}};
  if (spec.syntax == ToolCallSyntax::kMarkup) {
    j["markup"] = internal::MarkupToJson(spec.markup);
  }
  return Dump(j);
}

absl::StatusOr<Grammar> ToolCallGrammar(absl::string_view spec_text,
                                        const JsonSchemaOptions& json) {
  ASSIGN_OR_RETURN(const ToolCallSpec spec, ParseSpec(spec_text));
  return Builder(spec, json).Build();
}

std::vector<std::string> ToolCallMarkers(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return {"<tool_call>", "</tool_call>"};
    case ToolCallSyntax::kLlama3:
      return {"<|python_tag|>"};
    case ToolCallSyntax::kMistral:
      return {"[TOOL_CALLS]"};
    case ToolCallSyntax::kMistralArgs:
      return {"[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"};
    case ToolCallSyntax::kMarkup:
      break;  // the spec's
  }
  return {};
}

std::vector<std::string> ToolCallMarkers(const ToolCallSpec& spec) {
  if (spec.syntax == ToolCallSyntax::kMarkup) return spec.markup.markers;
  return ToolCallMarkers(spec.syntax);
}

std::vector<CallTrigger> ToolCallTriggers(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return {{"<tool_call>", false}};
    case ToolCallSyntax::kLlama3:
      return {{"<|python_tag|>", false}, {"{", true}};
    case ToolCallSyntax::kMistral:
    case ToolCallSyntax::kMistralArgs:
      return {{"[TOOL_CALLS]", false}};
    case ToolCallSyntax::kMarkup:
      break;  // the spec's
  }
  return {};
}

std::vector<CallTrigger> ToolCallTriggers(const ToolCallSpec& spec) {
  if (spec.syntax == ToolCallSyntax::kMarkup) {
    return {{spec.markup.section_open, false}};
  }
  return ToolCallTriggers(spec.syntax);
}

}  // namespace paceline::engine::grammar
