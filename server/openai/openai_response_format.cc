#include "server/openai/openai_response_format.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {
namespace {

// A schema given as an object (or, for vLLM, as JSON text).
absl::StatusOr<std::string> SchemaText(const Json& v, absl::string_view param) {
  if (v.is_string()) {
    const Json parsed = Json::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) {
      return InvalidParam(param,
                          absl::StrCat("'", param, "' is not valid JSON"));
    }
    return Dump(parsed);
  }
  if (!v.is_object() && !v.is_boolean()) {
    return InvalidParam(
        param,
        absl::StrCat("'", param, "' must be an object, got ", TypeName(v)));
  }
  return Dump(v);
}

absl::Status Choices(const Json& v, absl::string_view param,
                     v1::Constraint* c) {
  RETURN_IF_ERROR(ExpectArray(v, param));
  if (v.empty()) {
    return InvalidParam(param, absl::StrCat("'", param, "' is empty"));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    ASSIGN_OR_RETURN(std::string s, AsString(v[i], Index(param, i)));
    c->mutable_choice()->add_values(std::move(s));
  }
  return absl::OkStatus();
}

// A json_schema format's {name, schema, strict, description}, at `param`.
absl::Status JsonSchemaFormat(const Json& js, absl::string_view param,
                              v1::Constraint* c) {
  RETURN_IF_ERROR(ExpectObject(js, param));
  const std::string name = Member(param, "name");
  const Json* n = Find(js, "name");
  if (n == nullptr) {
    return InvalidParam(name, absl::StrCat("'", name, "' is required"));
  }
  RETURN_IF_ERROR(AsString(*n, name).status());
  if (const Json* strict = Find(js, "strict")) {
    RETURN_IF_ERROR(AsBool(*strict, Member(param, "strict")).status());
  }
  const Json* schema = Find(js, "schema");
  std::string text = "{}";  // no schema: any JSON value
  if (schema != nullptr) {
    ASSIGN_OR_RETURN(text, SchemaText(*schema, Member(param, "schema")));
  }
  c->set_json_schema(text);
  return absl::OkStatus();
}

// OpenAI's format object at `param`: chat's response_format (the schema
// nested in `json_schema`) or the Responses API's text.format (flattened).
absl::Status OpenAiFormat(const Json& v, absl::string_view param,
                          FormatField field, v1::Constraint* c, bool* set) {
  RETURN_IF_ERROR(ExpectObject(v, param));
  const std::string type_param = Member(param, "type");
  const Json* type = Find(v, "type");
  if (type == nullptr) {
    return InvalidParam(type_param,
                        absl::StrCat("'", type_param, "' is required"));
  }
  ASSIGN_OR_RETURN(const std::string t, AsString(*type, type_param));
  if (t == "text") return absl::OkStatus();
  if (t == "json_object") {
    c->set_json_object(true);
    *set = true;
    return absl::OkStatus();
  }
  if (t != "json_schema") {
    return InvalidParam(type_param,
                        absl::StrCat("'", type_param,
                                     "' must be \"text\", \"json_object\" or "
                                     "\"json_schema\", got \"",
                                     t, "\""));
  }
  if (field == FormatField::kTextFormat) {
    RETURN_IF_ERROR(JsonSchemaFormat(v, param, c));
  } else {
    const std::string js_param = Member(param, "json_schema");
    const Json* js = Find(v, "json_schema");
    if (js == nullptr) {
      return InvalidParam(js_param,
                          absl::StrCat("'", js_param, "' is required"));
    }
    RETURN_IF_ERROR(JsonSchemaFormat(*js, js_param, c));
  }
  *set = true;
  return absl::OkStatus();
}

// Anthropic's format object at `param` (null: none).
absl::Status AnthropicFormat(const Json& v, absl::string_view param,
                             v1::Constraint* c, bool* set) {
  if (v.is_null()) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectObject(v, param));
  const std::string type_param = Member(param, "type");
  const Json* type = Find(v, "type");
  if (type == nullptr) {
    return InvalidParam(type_param,
                        absl::StrCat("'", type_param, "' is required"));
  }
  ASSIGN_OR_RETURN(const std::string t, AsString(*type, type_param));
  if (t != "json_schema") {
    return InvalidParam(type_param,
                        absl::StrCat("'", type_param,
                                     "' must be \"json_schema\", got \"", t,
                                     "\""));
  }
  const std::string schema_param = Member(param, "schema");
  const Json* schema = Find(v, "schema");
  if (schema == nullptr) {
    return InvalidParam(schema_param,
                        absl::StrCat("'", schema_param, "' is required"));
  }
  ASSIGN_OR_RETURN(std::string text, SchemaText(*schema, schema_param));
  c->set_json_schema(std::move(text));
  *set = true;
  return absl::OkStatus();
}

// vLLM's structured_outputs (one field of it).
absl::Status VllmFormat(const Json& v, v1::Constraint* c) {
  RETURN_IF_ERROR(ExpectObject(v, "structured_outputs"));
  int given = 0;
  if (const Json* j = Find(v, "json")) {
    ASSIGN_OR_RETURN(std::string text,
                     SchemaText(*j, "structured_outputs.json"));
    c->set_json_schema(text);
    ++given;
  }
  if (const Json* r = Find(v, "regex")) {
    ASSIGN_OR_RETURN(std::string text,
                     AsString(*r, "structured_outputs.regex"));
    c->set_regex(text);
    ++given;
  }
  if (const Json* ch = Find(v, "choice")) {
    RETURN_IF_ERROR(Choices(*ch, "structured_outputs.choice", c));
    ++given;
  }
  if (const Json* g = Find(v, "grammar")) {
    ASSIGN_OR_RETURN(std::string text,
                     AsString(*g, "structured_outputs.grammar"));
    c->set_grammar(text);
    ++given;
  }
  if (const Json* o = Find(v, "json_object")) {
    ASSIGN_OR_RETURN(bool on, AsBool(*o, "structured_outputs.json_object"));
    if (on) {
      c->set_json_object(true);
      ++given;
    }
  }
  if (given != 1) {
    return InvalidParam("structured_outputs",
                        "'structured_outputs' must set exactly one of json, "
                        "regex, choice, grammar, json_object");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseResponseFormat(const Json& body,
                                 v1::SamplingOptions* sampling,
                                 FormatField field) {
  std::vector<const char*> sources;
  v1::Constraint c;
  if (field == FormatField::kResponseFormat) {
    if (const Json* v = Find(body, "response_format")) {
      bool set = false;
      RETURN_IF_ERROR(OpenAiFormat(*v, "response_format", field, &c, &set));
      if (set) sources.push_back("response_format");
    }
  } else if (field == FormatField::kOutputConfig) {
    if (const Json* config = Find(body, "output_config")) {
      RETURN_IF_ERROR(ExpectObject(*config, "output_config"));
      if (const Json* v = Find(*config, "format")) {
        bool set = false;
        RETURN_IF_ERROR(AnthropicFormat(*v, "output_config.format", &c, &set));
        if (set) sources.push_back("output_config.format");
      }
    }
    if (const Json* v = Find(body, "output_format")) {
      bool set = false;
      RETURN_IF_ERROR(AnthropicFormat(*v, "output_format", &c, &set));
      if (set) sources.push_back("output_format");
    }
  } else if (const Json* text = Find(body, "text")) {
    RETURN_IF_ERROR(ExpectObject(*text, "text"));
    if (const Json* v = Find(*text, "format")) {
      bool set = false;
      RETURN_IF_ERROR(OpenAiFormat(*v, "text.format", field, &c, &set));
      if (set) sources.push_back("text.format");
    }
  }
  if (const Json* v = Find(body, "structured_outputs")) {
    RETURN_IF_ERROR(VllmFormat(*v, &c));
    sources.push_back("structured_outputs");
  }
  if (const Json* v = Find(body, "guided_json")) {
    ASSIGN_OR_RETURN(std::string text, SchemaText(*v, "guided_json"));
    c.set_json_schema(text);
    sources.push_back("guided_json");
  }
  if (const Json* v = Find(body, "guided_regex")) {
    ASSIGN_OR_RETURN(std::string text, AsString(*v, "guided_regex"));
    c.set_regex(text);
    sources.push_back("guided_regex");
  }
  if (const Json* v = Find(body, "guided_choice")) {
    RETURN_IF_ERROR(Choices(*v, "guided_choice", &c));
    sources.push_back("guided_choice");
  }
  if (const Json* v = Find(body, "guided_grammar")) {
    ASSIGN_OR_RETURN(std::string text, AsString(*v, "guided_grammar"));
    c.set_grammar(text);
    sources.push_back("guided_grammar");
  }
  if (const Json* v = Find(body, "json_schema")) {  // llama.cpp
    ASSIGN_OR_RETURN(std::string text, SchemaText(*v, "json_schema"));
    c.set_json_schema(text);
    sources.push_back("json_schema");
  }
  if (const Json* v = Find(body, "grammar")) {  // llama.cpp
    ASSIGN_OR_RETURN(std::string text, AsString(*v, "grammar"));
    c.set_grammar(text);
    sources.push_back("grammar");
  }
  if (sources.size() > 1) {
    return InvalidParam(sources[1],
                        absl::StrCat("'", sources[0], "' and '", sources[1],
                                     "' both constrain the output; send one"));
  }
  if (!sources.empty()) *sampling->mutable_constraint() = std::move(c);
  return absl::OkStatus();
}

}  // namespace paceline::server::openai
