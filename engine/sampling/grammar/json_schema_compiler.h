#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_COMPILER_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_COMPILER_H_

// The JSON Schema compiler's internals (json_schema.h is the interface):
// json_schema.cc holds the walk over a schema (references, combinators,
// enum/const, type dispatch), json_schema_types.cc the builders of each
// type's text.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/json_schema.h"
#include "nlohmann/json.hpp"

namespace paceline::engine::grammar::internal {

using J = nlohmann::ordered_json;

// A string schema's assertions as the compiler holds them: minLength and
// maxLength (characters), or one pattern: the schema's `pattern` (search
// semantics) or its `format`'s whole-string pattern. Unimplemented, naming
// the keyword, for a format defined but not enforced and for a pattern or
// format together with lengths; InvalidArgument for a malformed keyword.
struct StringAssertions {
  int64_t min = 0;
  int64_t max = -1;  // -1: no maxLength
  bool has_pattern = false;
  std::string pattern;  // ECMAScript, when has_pattern
  bool search = false;  // RegexOptions::search for `pattern`
  bool Lengths() const { return min > 0 || max >= 0; }
};
absl::StatusOr<StringAssertions> ReadStringAssertions(const J& s,
                                                      const std::string& where);

class SchemaCompiler {
 public:
  SchemaCompiler(Grammar* g, const J& root, const JsonSchemaOptions& options);

  // The language of `schema` (found at `where`, a JSON pointer for errors).
  absl::StatusOr<ExprId> Schema(const J& schema, const std::string& where,
                                int depth);
  // The same, as a reference to a rule of its own (so that copies of it in
  // repetitions and alternatives stay one call).
  absl::StatusOr<ExprId> SchemaRef(const J& schema, const std::string& where,
                                   int depth);

 private:
  // json_schema.cc
  absl::StatusOr<const J*> Resolve(const std::string& ref,
                                   const std::string& where);
  absl::StatusOr<J> ResolveTop(const J& schema, const std::string& where);
  absl::StatusOr<ExprId> RefRule(const J* target, const std::string& ref,
                                 int depth);
  absl::StatusOr<ExprId> AnyOf(const J& schema, const std::string& keyword,
                               const std::string& where, int depth);
  absl::StatusOr<ExprId> Enum(const J& schema, const J& values,
                              const std::string& where, int depth);
  absl::StatusOr<ExprId> Typed(const J& schema, const std::string& where,
                               int depth);
  absl::Status CheckKeywords(const J& schema, const std::string& where) const;
  absl::StatusOr<bool> Disjoint(const J& a, const J& b, int depth);

  // json_schema_types.cc
  absl::StatusOr<ExprId> Type(const std::string& type, const J& schema,
                              const std::string& where, int depth);
  absl::StatusOr<ExprId> String(const J& schema, const std::string& where);
  absl::StatusOr<ExprId> Number(const J& schema, bool integer,
                                const std::string& where);
  absl::StatusOr<ExprId> Array(const J& schema, const std::string& where,
                               int depth);
  absl::StatusOr<ExprId> Object(const J& schema, const std::string& where,
                                int depth);
  ExprId MembersInOrder(const std::vector<ExprId>& written,
                        const std::vector<bool>& required, ExprId extra);
  ExprId MembersAnyOrder(const std::vector<ExprId>& written,
                         const std::vector<bool>& required, ExprId extra);
  ExprId ValueLiteral(const J& value);
  absl::StatusOr<bool> PropertyCountsHold(const J& schema, size_t listed,
                                          size_t required, bool open,
                                          const std::string& where);
  absl::StatusOr<ExprId> Pattern(const std::string& pattern, bool search,
                                 const std::string& where);

  // Shared pieces.
  ExprId AnyValue();
  ExprId AnyString();
  ExprId Ws();           // between JSON tokens
  ExprId Sep(char c);    // ',' or ':' with the allowed whitespace
  ExprId Open(char c);   // '{' or '[' and the whitespace after
  ExprId Close(char c);  // the whitespace before, then '}' or ']'
  ExprId Cached(const std::string& key, ExprId (*make)(SchemaCompiler*));
  RuleId NewRule(const std::string& name);
  // A reference to a new rule whose body is `body`: copies of the reference
  // in alternatives and repetitions stay one call each.
  ExprId AsRule(const std::string& name, ExprId body);

  Grammar* const g_;
  const J& root_;
  const JsonSchemaOptions options_;
  absl::flat_hash_map<const J*, RuleId> ref_rules_;
  absl::flat_hash_map<std::string, ExprId> cache_;
  // Draft 7 and older: keywords beside a $ref are ignored.
  bool legacy_refs_ = false;
};

}  // namespace paceline::engine::grammar::internal

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_COMPILER_H_
