#include "tools/paceline/constraint_flags.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace paceline::tools {
namespace {

using Kind = engine::grammar::Constraint::Kind;

// The kinds with a flag, in the order errors name them.
constexpr Kind kFlagKinds[] = {Kind::kJsonSchema, Kind::kGbnf, Kind::kRegex,
                               Kind::kChoice};

absl::string_view FlagOf(Kind kind) {
  return absl::string_view(ConstraintFlagName(kind)).substr(2);
}

// The value of --F, a file's bytes for the file flags.
absl::StatusOr<std::string> ReadText(const ParsedArgs& args, Kind kind) {
  const std::string value = *args.Get(FlagOf(kind));
  if (kind != Kind::kJsonSchema && kind != Kind::kGbnf) return value;
  absl::StatusOr<std::string> text =
      ReadWholeFile(value, kind == Kind::kJsonSchema ? "schema" : "grammar");
  if (!text.ok()) return ForFlag(FlagOf(kind), text.status());
  return text;
}

}  // namespace

const char* ConstraintFlagName(Kind kind) {
  switch (kind) {
    case Kind::kJsonSchema:
      return "--json-schema";
    case Kind::kJsonObject:
      return "--json-object";
    case Kind::kRegex:
      return "--regex";
    case Kind::kChoice:
      return "--choice";
    case Kind::kGbnf:
      return "--grammar";
    default:  // a kind no flag gives
      return "--constraint";
  }
}

absl::StatusOr<std::optional<engine::grammar::Constraint>> ReadConstraintFlags(
    const ParsedArgs& args) {
  std::optional<Kind> kind;
  for (Kind k : kFlagKinds) {
    if (!args.Has(FlagOf(k))) continue;
    if (kind.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          ConstraintFlagName(*kind), " and ", ConstraintFlagName(k),
          " cannot be combined: give at most one constraint"));
    }
    kind = k;
  }
  const bool flexible = args.Has(kFlexibleWhitespaceFlag.name);
  if (flexible && kind != Kind::kJsonSchema) {
    return absl::InvalidArgumentError(
        "--flexible-whitespace needs --json-schema (it applies to JSON only)");
  }
  if (!kind.has_value()) return std::nullopt;
  engine::grammar::Constraint c;
  c.kind = *kind;
  c.flexible_whitespace = flexible;
  if (c.kind == Kind::kChoice) {
    for (const std::string& list : args.GetAll("choice")) {
      absl::StatusOr<std::vector<std::string>> values = SplitChoices(list);
      if (!values.ok()) return ForFlag("choice", values.status());
      for (std::string& v : *values) c.choices.push_back(std::move(v));
    }
  } else {
    ASSIGN_OR_RETURN(c.text, ReadText(args, c.kind));
  }
  return c;
}

absl::StatusOr<std::vector<std::string>> SplitChoices(absl::string_view list) {
  std::vector<std::string> values(1);
  for (size_t i = 0; i < list.size(); ++i) {
    const char ch = list[i];
    if (ch == ',') {
      values.emplace_back();
    } else if (ch != '\\') {
      values.back() += ch;
    } else if (i + 1 < list.size() &&
               (list[i + 1] == ',' || list[i + 1] == '\\')) {
      values.back() += list[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("a backslash at byte ", i,
                       " escapes neither ',' nor '\\' (write \\, or \\\\)"));
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("value ", i + 1, " of '", list, "' is empty"));
    }
  }
  return values;
}

v1::Constraint ConstraintToProto(const engine::grammar::Constraint& c) {
  v1::Constraint out;
  switch (c.kind) {
    case Kind::kJsonSchema:
      out.set_json_schema(c.text);
      break;
    case Kind::kJsonObject:
      out.set_json_object(true);
      break;
    case Kind::kRegex:
      out.set_regex(c.text);
      break;
    case Kind::kChoice:
      for (const std::string& v : c.choices) {
        out.mutable_choice()->add_values(v);
      }
      break;
    case Kind::kGbnf:
      out.set_grammar(c.text);
      break;
    default:  // a kind the wire does not carry: no kind set
      break;
  }
  if (c.flexible_whitespace) out.set_flexible_whitespace(true);
  return out;
}

}  // namespace paceline::tools
