#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_H_

// JSON Schema (draft 2020-12) -> a byte-level grammar (grammar.h) whose
// language is the JSON texts valid under the schema, in this engine's
// serialization: UTF-8, no whitespace except what the options allow,
// strings written with their characters as they are (escapes only where
// JSON requires them or as the writer chooses: \" \\ \/ \b \f \n \r \t
// and \uXXXX).
//
// A keyword the engine cannot enforce is an error naming it (Unimplemented)
// — never silently ignored. Annotations (title, description, examples,
// default, $comment, deprecated, readOnly, writeOnly, ...) are ignored, as
// the specification says they may be.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/grammar.h"
#include "nlohmann/json_fwd.hpp"

namespace paceline::engine::grammar {

struct JsonSchemaOptions {
  // Whitespace between JSON tokens.
  enum class Whitespace {
    kCompact,   // none, except one optional space after ',' and ':'
    kFlexible,  // any JSON whitespace, up to max_whitespace bytes a gap
  };
  Whitespace whitespace = Whitespace::kCompact;
  int32_t max_whitespace = 16;
  // Objects with at most this many listed properties accept them in any
  // order; larger ones in the schema's `properties` order.
  int32_t max_any_order_properties = 6;
  // Against hostile schemas: the schema's size, its nesting, the grammar
  // built from it.
  int64_t max_schema_bytes = 1 << 20;
  int32_t max_depth = 128;
  int64_t max_grammar_exprs = 1'000'000;
};

// The schema is an ordered_json: `properties` keep their order.
// Errors: InvalidArgument for a schema that is not valid JSON Schema or
// breaks a limit (naming where: a JSON pointer into the schema),
// Unimplemented naming the keyword and where for what is not enforced.
absl::StatusOr<Grammar> JsonSchemaToGrammar(
    const nlohmann::ordered_json& schema,
    const JsonSchemaOptions& options = {});
absl::StatusOr<Grammar> JsonSchemaToGrammar(
    absl::string_view schema_text, const JsonSchemaOptions& options = {});

// The schema's language as an expression of `g` (its rules added to `g`),
// for grammars that embed JSON values (tool calls). On an error `g` may
// hold rules without a body: compile the schema alone first where the
// caller goes on after an error. max_grammar_exprs is the caller's check.
absl::StatusOr<ExprId> AddJsonSchema(Grammar* g,
                                     const nlohmann::ordered_json& schema,
                                     const JsonSchemaOptions& options = {});

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_H_
