#include "engine/sampling/grammar/constraint.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/gbnf.h"
#include "engine/sampling/grammar/regex.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "nlohmann/json.hpp"

namespace paceline::engine::grammar {

const char* ConstraintKindName(Constraint::Kind kind) {
  switch (kind) {
    case Constraint::Kind::kJsonSchema:
      return "json_schema";
    case Constraint::Kind::kJsonObject:
      return "json_object";
    case Constraint::Kind::kRegex:
      return "regex";
    case Constraint::Kind::kChoice:
      return "choice";
    case Constraint::Kind::kGbnf:
      return "grammar";
    case Constraint::Kind::kToolCalls:
      return "tool_calls";
  }
  return "unknown";
}

absl::StatusOr<Grammar> ConstraintGrammar(const Constraint& c,
                                          JsonSchemaOptions json) {
  json.whitespace = c.flexible_whitespace
                        ? JsonSchemaOptions::Whitespace::kFlexible
                        : JsonSchemaOptions::Whitespace::kCompact;
  switch (c.kind) {
    case Constraint::Kind::kJsonSchema:
      return JsonSchemaToGrammar(absl::string_view(c.text), json);
    case Constraint::Kind::kJsonObject:
      return JsonSchemaToGrammar(nlohmann::ordered_json{{"type", "object"}},
                                 json);
    case Constraint::Kind::kGbnf:
      return ParseGbnf(c.text);
    case Constraint::Kind::kToolCalls:
      return ToolCallGrammar(c.text, json);
    case Constraint::Kind::kRegex:
    case Constraint::Kind::kChoice: {
      Grammar g;
      ExprId body;
      if (c.kind == Constraint::Kind::kRegex) {
        ASSIGN_OR_RETURN(body, AddRegex(&g, c.text));
      } else {
        if (c.choices.empty()) {
          return absl::InvalidArgumentError(
              "a choice needs at least one value");
        }
        std::vector<ExprId> alts;
        for (const std::string& v : c.choices) alts.push_back(g.Literal(v));
        body = g.Alt(std::move(alts));
      }
      const RuleId root = g.AddRule("root");
      g.SetRule(root, body);
      g.set_root(root);
      return g;
    }
  }
  return absl::InvalidArgumentError("unknown constraint kind");
}

std::string ConstraintKey(const Constraint& c) {
  std::string key =
      absl::StrCat(ConstraintKindName(c.kind), "\n",
                   c.flexible_whitespace ? "ws" : "compact", "\n");
  if (c.kind == Constraint::Kind::kChoice) {
    for (const std::string& v : c.choices) {
      absl::StrAppend(&key, v.size(), ":", v, "\n");
    }
  } else {
    absl::StrAppend(&key, c.text);
  }
  return key;
}

}  // namespace paceline::engine::grammar
