#include "engine/sampling/grammar/tool_call_markup.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/json_schema_compiler.h"
#include "engine/sampling/grammar/regex.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::engine::grammar::internal {
namespace {

using J = nlohmann::ordered_json;

absl::Status ToolError(const ToolSchema& tool, absl::StatusCode code,
                       absl::string_view what) {
  return absl::Status(
      code, absl::StrCat("tool '", tool.name, "' parameters: ", what));
}

// The property's schema standing alone: the root's definitions carried
// over, so that "#/$defs/..." references still resolve.
J Standalone(const J& property, const J& root) {
  if (!property.is_object()) return property;
  J out = property;
  for (const char* key : {"$defs", "definitions"}) {
    auto it = root.find(key);
    if (it != root.end() && !out.contains(key)) out[key] = *it;
  }
  return out;
}

bool IsStringSchema(const J& property) {
  if (!property.is_object()) return false;
  auto type = property.find("type");
  return type != property.end() && *type == J("string");
}

// No "type" string (the parser then types a value by its text: JSON that
// is not a string, else the raw text) and a const or an enum.
bool IsUntypedListing(const J& property) {
  if (!property.is_object()) return false;
  auto type = property.find("type");
  if (type != property.end() && type->is_string()) return false;
  return property.contains("const") || property.contains("enum");
}

// A string the parser reads back as itself when written raw: not JSON
// other than a string, no line break at either end (dropped), no `close`.
bool RawStringReadsBack(const std::string& s, absl::string_view close) {
  if (!s.empty() && (s.front() == '\n' || s.back() == '\n')) return false;
  if (absl::StrContains(s, close)) return false;
  const J parsed = J::parse(s, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() || parsed.is_string();
}

class MarkupBuilder {
 public:
  MarkupBuilder(Grammar* g, const ToolCallSpec& spec,
                const std::vector<ExprId>& json_args,
                const JsonSchemaOptions& json)
      : g_(*g),
        spec_(spec),
        m_(spec.markup),
        json_args_(json_args),
        json_(json) {}

  absl::StatusOr<ExprId> Build();

 private:
  ExprId Lit(absl::string_view s) { return g_.Literal(s); }
  ExprId Gap() { return m_.newlines ? g_.Optional(Lit("\n")) : g_.Empty(); }
  // Before the name: the id, name_prefix.
  ExprId BeforeName();
  ExprId AfterName();  // the index, name_end, gap
  // BODY call_close.
  absl::StatusOr<ExprId> Body(size_t tool);
  absl::StatusOr<ExprId> Parameters(const ToolSchema& tool);
  absl::StatusOr<ExprId> Parameter(const ToolSchema& tool,
                                   const std::string& key, const J& property,
                                   const J& root);
  ExprId AnyParameter();
  // An untyped property's const/enum values: strings raw (with
  // string_attrs), the others as JSON (json_attrs); a string that cannot
  // be written so that it reads back is left out.
  ExprId ListedParameter(const std::string& key, const J& property);
  // Any text in which parameter_close does not occur, then it.
  ExprId RawValue();
  // A raw value held to the string schema's lengths, pattern or format
  // (`a`), then parameter_close; Unimplemented/InvalidArgument from the
  // regex front end.
  absl::StatusOr<ExprId> CheckedRawValue(const StringAssertions& a,
                                         const std::string& key);
  // The raw string value of a "type": "string" property.
  absl::StatusOr<ExprId> StringValue(const ToolSchema& tool,
                                     const std::string& key, const J& property);
  ExprId Head();       // section_open list_open [gap call_open]
  ExprId Separator();  // between two calls in one section
  ExprId SectionEnd();
  bool PerCall() const { return m_.section_per_call || m_.call_open.empty(); }

  Grammar& g_;
  const ToolCallSpec& spec_;
  const CallMarkup& m_;
  const std::vector<ExprId>& json_args_;
  const JsonSchemaOptions json_;
};

ExprId MarkupBuilder::BeforeName() {
  ExprId id = g_.Empty();
  if (!m_.id_end.empty()) {
    const ExprId chars =
        m_.index_id
            ? g_.Repeat(g_.Bytes({{'0', '9'}}), 1, 3)
            : g_.Repeat(g_.Bytes({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}), 9, 9);
    id = g_.Seq({chars, Lit(m_.id_end)});
  }
  return g_.Seq({id, Lit(m_.name_prefix)});
}

ExprId MarkupBuilder::AfterName() {
  ExprId index =
      m_.name_index
          ? g_.Seq({Lit(":"), g_.Repeat(g_.Bytes({{'0', '9'}}), 1, 3)})
          : g_.Empty();
  return g_.Seq({index, Lit(m_.name_end), Gap()});
}

ExprId MarkupBuilder::RawValue() {
  const std::vector<uint32_t> close = DecodeUtf8Lenient(m_.parameter_close);
  // CheckMarkup: close[0] occurs only first. Cut at each close[0]: the
  // pieces after one must not start with the rest of the marker.
  const uint32_t c0 = close[0];
  const ExprId other = g_.Star(g_.NotCodepoints({{c0, c0}}));
  std::vector<ExprId> pieces;
  ExprId prefix = g_.Empty();
  for (size_t k = 1; k < close.size(); ++k) {
    const uint32_t next = close[k];
    pieces.push_back(g_.Seq(
        {prefix, g_.Optional(g_.Seq(
                     {g_.NotCodepoints({{next, next}, {c0, c0}}), other}))}));
    prefix = g_.Seq({prefix, g_.Codepoints({{next, next}})});
  }
  return g_.Seq(
      {other,
       g_.Star(g_.Seq({g_.Codepoints({{c0, c0}}), g_.Alt(std::move(pieces))})),
       Lit(m_.parameter_close)});
}

ExprId MarkupBuilder::AnyParameter() {
  ExprId key = g_.Repeat(
      g_.Bytes({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}, {'-', '.'}}), 1,
      64);
  ExprId value_open =
      m_.value_open.empty() ? g_.Empty() : g_.Seq({Gap(), Lit(m_.value_open)});
  return g_.Seq({Lit(m_.parameter_open), key, Lit(m_.parameter_key_end),
                 Lit(m_.string_attrs), value_open, RawValue(), Gap()});
}

// The parser (chat/tool_formats/parameter_value.h) drops one "\n" at each
// end of a raw value; the content it keeps is what the assertions count
// and match. The content neither starts nor ends with a line break (a
// pattern's content holds none), so that where the markup has gaps,
// "\n" CONTENT "\n" and CONTENT both keep exactly CONTENT, and once
// maxLength is reached the rest is forced. The content never holds
// parameter_close's first character (so never the marker).
absl::StatusOr<ExprId> MarkupBuilder::CheckedRawValue(const StringAssertions& a,
                                                      const std::string& key) {
  const uint32_t c0 = DecodeUtf8Lenient(m_.parameter_close)[0];
  std::vector<uint32_t> excluded = {c0, '\n'};
  std::sort(excluded.begin(), excluded.end());
  ExprId content;
  if (a.has_pattern) {
    RegexOptions options;
    options.search = a.search;
    options.emit = [excluded](Grammar* g, std::vector<CodepointRange> ranges) {
      std::vector<CodepointRange> kept;
      for (const CodepointRange& r : ranges) {
        uint32_t lo = r.lo;
        bool done = false;
        for (uint32_t x : excluded) {
          if (x < lo || x > r.hi) continue;
          if (x > lo) kept.push_back({lo, x - 1});
          done = x == r.hi;
          if (done) break;
          lo = x + 1;
        }
        if (!done) kept.push_back({lo, r.hi});
      }
      return kept.empty() ? g->Nothing() : g->Codepoints(std::move(kept));
    };
    absl::StatusOr<ExprId> body = AddRegex(&g_, a.pattern, options);
    if (!body.ok()) {
      return absl::Status(body.status().code(),
                          absl::StrCat("'pattern' at /properties/", key, ": ",
                                       body.status().message()));
    }
    content = *body;
  } else {
    if (a.max >= 0 && a.min > a.max) return g_.Nothing();
    const int64_t max = a.max < 0 ? int64_t{1'000'000'000} : a.max;
    auto clamp = [](int64_t v) {
      return static_cast<int32_t>(std::clamp<int64_t>(v, 0, 1'000'000'000));
    };
    const ExprId edge = g_.NotCodepoints(
        {{excluded[0], excluded[0]}, {excluded[1], excluded[1]}});
    const ExprId any = g_.NotCodepoints({{c0, c0}});
    std::vector<ExprId> lengths;  // 0, 1, 2 or more characters
    if (a.min <= 0) lengths.push_back(g_.Empty());
    if (a.min <= 1 && max >= 1) lengths.push_back(edge);
    if (max >= 2) {
      const int32_t most = a.max < 0 ? kUnbounded : clamp(max - 2);
      lengths.push_back(
          g_.Seq({edge, g_.Repeat(any, clamp(a.min - 2), most), edge}));
    }
    content = g_.Alt(std::move(lengths));
  }
  if (!m_.newlines) return g_.Seq({content, Lit(m_.parameter_close)});
  const RuleId rule = g_.AddRule("raw_value");
  g_.SetRule(rule, content);
  return g_.Alt(
      {g_.Seq({Lit("\n"), g_.Ref(rule), Lit("\n"), Lit(m_.parameter_close)}),
       g_.Seq({g_.Ref(rule), Lit(m_.parameter_close)})});
}

absl::StatusOr<ExprId> MarkupBuilder::StringValue(const ToolSchema& tool,
                                                  const std::string& key,
                                                  const J& property) {
  std::vector<ExprId> choices;
  auto add = [&](const J& v) {
    if (v.is_string()) choices.push_back(Lit(v.get<std::string>()));
  };
  if (auto c = property.find("const"); c != property.end()) add(*c);
  if (auto e = property.find("enum"); e != property.end() && e->is_array()) {
    for (const J& v : *e) add(v);
  }
  if (property.contains("const") || property.contains("enum")) {
    return g_.Seq(
        {Gap(), g_.Alt(std::move(choices)), Gap(), Lit(m_.parameter_close)});
  }
  absl::StatusOr<ExprId> value = [&]() -> absl::StatusOr<ExprId> {
    ASSIGN_OR_RETURN(
        const StringAssertions a,
        ReadStringAssertions(property, absl::StrCat("/properties/", key)));
    if (!a.has_pattern && !a.Lengths()) return RawValue();
    return CheckedRawValue(a, key);
  }();
  if (value.ok()) return value;
  if (tool.strict) {
    return ToolError(
        tool, value.status().code(),
        absl::StrCat("property '", key, "': ", value.status().message()));
  }
  return RawValue();
}

ExprId MarkupBuilder::ListedParameter(const std::string& key,
                                      const J& property) {
  std::vector<J> values;
  if (auto c = property.find("const"); c != property.end()) {
    values.push_back(*c);
  }
  if (auto e = property.find("enum"); e != property.end() && e->is_array()) {
    for (const J& v : *e) values.push_back(v);
  }
  ExprId value_open =
      m_.value_open.empty() ? g_.Empty() : g_.Seq({Gap(), Lit(m_.value_open)});
  std::vector<ExprId> choices;
  for (const J& v : values) {
    const bool raw = v.is_string();
    const std::string text = raw ? v.get<std::string>() : v.dump();
    if (raw && !RawStringReadsBack(text, m_.parameter_close)) continue;
    choices.push_back(
        g_.Seq({Lit(raw ? m_.string_attrs : m_.json_attrs), value_open, Gap(),
                Lit(text), Gap(), Lit(m_.parameter_close)}));
  }
  return g_.Seq({Lit(m_.parameter_open), Lit(key), Lit(m_.parameter_key_end),
                 g_.Alt(std::move(choices)), Gap()});
}

absl::StatusOr<ExprId> MarkupBuilder::Parameter(const ToolSchema& tool,
                                                const std::string& key,
                                                const J& property,
                                                const J& root) {
  if (IsUntypedListing(property)) return ListedParameter(key, property);
  ExprId value;
  absl::string_view attrs = m_.json_attrs;
  if (IsStringSchema(property)) {
    attrs = m_.string_attrs;
    ASSIGN_OR_RETURN(value, StringValue(tool, key, property));
  } else {
    J schema = Standalone(property, root);
    // Compiled alone first: g_ stays whole.
    if (absl::Status s = JsonSchemaToGrammar(schema, json_).status(); !s.ok()) {
      if (tool.strict) {
        return ToolError(tool, s.code(),
                         absl::StrCat("property '", key, "': ", s.message()));
      }
      schema = J::object();  // any JSON value
    }
    absl::StatusOr<ExprId> json = AddJsonSchema(&g_, schema, json_);
    if (!json.ok()) {
      return ToolError(tool, json.status().code(), json.status().message());
    }
    value = g_.Seq({Gap(), *json, Gap(), Lit(m_.parameter_close)});
  }
  ExprId value_open =
      m_.value_open.empty() ? g_.Empty() : g_.Seq({Gap(), Lit(m_.value_open)});
  return g_.Seq({Lit(m_.parameter_open), Lit(key), Lit(m_.parameter_key_end),
                 Lit(attrs), value_open, value, Gap()});
}

absl::StatusOr<ExprId> MarkupBuilder::Parameters(const ToolSchema& tool) {
  ASSIGN_OR_RETURN(const J schema, ToolObjectSchema(tool, json_));
  auto properties = schema.find("properties");
  if (properties == schema.end() || !properties->is_object()) {
    return g_.Star(AnyParameter());
  }
  std::vector<std::string> required;
  if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
    for (const J& name : *r) {
      if (name.is_string()) required.push_back(name.get<std::string>());
    }
  }
  std::vector<ExprId> items;
  for (auto it = properties->begin(); it != properties->end(); ++it) {
    ASSIGN_OR_RETURN(ExprId p, Parameter(tool, it.key(), it.value(), schema));
    const bool needed =
        std::find(required.begin(), required.end(), it.key()) != required.end();
    items.push_back(needed ? p : g_.Optional(p));
  }
  return g_.Seq(std::move(items));
}

absl::StatusOr<ExprId> MarkupBuilder::Body(size_t tool) {
  ExprId body;
  if (m_.xml) {
    ASSIGN_OR_RETURN(body, Parameters(spec_.tools[tool]));
  } else {
    body = g_.Seq(
        {Lit(m_.arguments_open), json_args_[tool], Lit(m_.arguments_close)});
  }
  return g_.Seq({body, Lit(m_.call_close)});
}

ExprId MarkupBuilder::Head() {
  const ExprId open = Lit(absl::StrCat(m_.section_open, m_.list_open));
  if (m_.call_open.empty()) return open;
  return g_.Seq({open, Gap(), Lit(m_.call_open)});
}

ExprId MarkupBuilder::Separator() {
  return m_.call_separator.empty() ? Gap() : Lit(m_.call_separator);
}

ExprId MarkupBuilder::SectionEnd() {
  if (m_.section_close.empty()) return g_.Empty();
  return g_.Seq({Gap(), Lit(m_.section_close)});
}

absl::StatusOr<ExprId> MarkupBuilder::Build() {
  const bool named_in_opening =
      spec_.mode == ToolCallMode::kNamed && m_.id_end.empty();
  if (named_in_opening) {
    ASSIGN_OR_RETURN(ExprId body, Body(0));
    return g_.Seq({body, SectionEnd()});
  }
  std::vector<ExprId> calls;
  for (size_t i = 0; i < spec_.tools.size(); ++i) {
    ASSIGN_OR_RETURN(ExprId body, Body(i));
    calls.push_back(g_.Seq({Lit(spec_.tools[i].name), AfterName(), body}));
  }
  const RuleId rule = g_.AddRule("call");
  g_.SetRule(rule, g_.Seq({BeforeName(), g_.Alt(std::move(calls))}));
  const ExprId call = g_.Ref(rule);
  ExprId body;
  const bool more = spec_.parallel && !m_.one_call;
  if (PerCall()) {
    ExprId first = g_.Seq({call, SectionEnd()});
    body = !more
               ? first
               : g_.Seq({first,
                         g_.Star(g_.Seq({Gap(), Head(), call, SectionEnd()}))});
  } else {
    ExprId rest =
        more ? g_.Star(g_.Seq({Separator(), Lit(m_.call_open), call}))
             : g_.Empty();
    body = g_.Seq({call, rest, SectionEnd()});
  }
  if (spec_.mode == ToolCallMode::kAuto) body = g_.Seq({Head(), body});
  return body;
}

bool BadKeyByte(char c) {
  return c == '<' || c == '>' || c == '"' || c == '=' || c == '\n' || c == '\r';
}

}  // namespace

absl::StatusOr<ExprId> MarkupLanguage(Grammar* g, const ToolCallSpec& spec,
                                      const std::vector<ExprId>& json_args,
                                      const JsonSchemaOptions& json) {
  return MarkupBuilder(g, spec, json_args, json).Build();
}

absl::Status CheckMarkup(const ToolCallSpec& spec) {
  const CallMarkup& m = spec.markup;
  if (m.section_open.empty()) {
    return absl::InvalidArgumentError("the call markup has no section_open");
  }
  if (!m.xml) return absl::OkStatus();
  const std::vector<uint32_t> close = DecodeUtf8Lenient(m.parameter_close);
  if (close.empty() || std::count(close.begin(), close.end(), close[0]) != 1) {
    return absl::InvalidArgumentError(
        "the call markup's parameter_close must start with a character it "
        "does not hold again");
  }
  for (const ToolSchema& tool : spec.tools) {
    if (tool.parameters.empty()) continue;
    const J schema =
        J::parse(tool.parameters, nullptr, /*allow_exceptions=*/false);
    if (!schema.is_object()) continue;  // ToolObjectSchema says why
    auto properties = schema.find("properties");
    if (properties == schema.end() || !properties->is_object()) continue;
    for (auto it = properties->begin(); it != properties->end(); ++it) {
      const std::string& key = it.key();
      if (key.empty() || std::any_of(key.begin(), key.end(), BadKeyByte)) {
        return absl::InvalidArgumentError(
            absl::StrCat("tool '", tool.name,
                         "': the call syntax cannot write the "
                         "parameter name '",
                         key,
                         "' (no '<', '>', '\"', '=' or line "
                         "breaks)"));
      }
    }
  }
  return absl::OkStatus();
}

J MarkupToJson(const CallMarkup& m) {
  return {{"xml", m.xml},
          {"section_open", m.section_open},
          {"list_open", m.list_open},
          {"call_open", m.call_open},
          {"call_separator", m.call_separator},
          {"id_end", m.id_end},
          {"index_id", m.index_id},
          {"name_prefix", m.name_prefix},
          {"name_index", m.name_index},
          {"name_end", m.name_end},
          {"arguments_open", m.arguments_open},
          {"arguments_close", m.arguments_close},
          {"parameter_open", m.parameter_open},
          {"parameter_key_end", m.parameter_key_end},
          {"string_attrs", m.string_attrs},
          {"json_attrs", m.json_attrs},
          {"value_open", m.value_open},
          {"parameter_close", m.parameter_close},
          {"call_close", m.call_close},
          {"section_close", m.section_close},
          {"newlines", m.newlines},
          {"section_per_call", m.section_per_call},
          {"one_call", m.one_call},
          {"markers", m.markers}};
}

bool MarkupFromJson(const nlohmann::json& j, CallMarkup* m) {
  if (!j.is_object()) return false;
  bool ok = true;
  auto text = [&](const char* key, std::string* out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_string()) {
      ok = false;
      return;
    }
    *out = it->get<std::string>();
  };
  auto flag = [&](const char* key, bool* out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_boolean()) {
      ok = false;
      return;
    }
    *out = it->get<bool>();
  };
  flag("xml", &m->xml);
  text("section_open", &m->section_open);
  text("list_open", &m->list_open);
  text("call_open", &m->call_open);
  text("call_separator", &m->call_separator);
  text("id_end", &m->id_end);
  flag("index_id", &m->index_id);
  text("name_prefix", &m->name_prefix);
  flag("name_index", &m->name_index);
  text("name_end", &m->name_end);
  text("arguments_open", &m->arguments_open);
  text("arguments_close", &m->arguments_close);
  text("parameter_open", &m->parameter_open);
  text("parameter_key_end", &m->parameter_key_end);
  text("string_attrs", &m->string_attrs);
  text("json_attrs", &m->json_attrs);
  text("value_open", &m->value_open);
  text("parameter_close", &m->parameter_close);
  text("call_close", &m->call_close);
  text("section_close", &m->section_close);
  flag("newlines", &m->newlines);
  flag("section_per_call", &m->section_per_call);
  flag("one_call", &m->one_call);
  if (auto it = j.find("markers"); it != j.end()) {
    if (!it->is_array()) return false;
    for (const nlohmann::json& s : *it) {
      if (!s.is_string()) return false;
      m->markers.push_back(s.get<std::string>());
    }
  }
  return ok;
}

}  // namespace paceline::engine::grammar::internal
