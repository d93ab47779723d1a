#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_CONSTRAINT_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_CONSTRAINT_H_

// What a request asks its output to be (structured output), independent of
// the API that said it, and the grammar each kind builds.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/json_schema.h"

namespace paceline::engine::grammar {

struct Constraint {
  enum class Kind {
    kJsonSchema,  // text: a JSON Schema
    kJsonObject,  // any JSON object
    kRegex,       // text: an ECMAScript pattern the whole output matches
    kChoice,      // choices: one of them, exactly
    kGbnf,        // text: a GBNF grammar (rule "root")
    kToolCalls,   // text: ToolCallSpecText (tool_call_grammar.h)
  };
  Kind kind = Kind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  bool flexible_whitespace = false;  // JSON kinds only
};

// "json_schema", "json_object", "regex", "choice", "grammar", "tool_calls".
const char* ConstraintKindName(Constraint::Kind kind);

// The grammar of `c`. `json` supplies the JSON options (the whitespace
// comes from `c`). Errors: the front end's (InvalidArgument for a bad
// schema, pattern or grammar; Unimplemented naming what is not supported).
absl::StatusOr<Grammar> ConstraintGrammar(const Constraint& c,
                                          JsonSchemaOptions json = {});

// A key that is equal for constraints with the same language and options.
std::string ConstraintKey(const Constraint& c);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_CONSTRAINT_H_
