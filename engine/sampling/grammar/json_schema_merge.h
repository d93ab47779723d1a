#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_MERGE_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_MERGE_H_

// JSON Schema conjunction for the compiler (json_schema.h): `allOf`, and the
// keywords beside an `anyOf` / `oneOf` / `$ref`, become one schema whose
// instances are those valid under both inputs.
//
// Per keyword: types intersect (integer within number), enum/const values
// intersect, required lists unite, properties merge one by one (a property
// only one side lists must also satisfy the other side's
// additionalProperties), lower bounds take the larger and upper bounds the
// smaller, anyOf/oneOf lists combine pairwise, allOf lists concatenate.
// Keywords that cannot be combined exactly (two different patterns, two
// different formats, multipleOf, ...) are Unimplemented naming the keyword.

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace paceline::engine::grammar {

// Annotation keywords: no effect on validity (dropped by the merge, ignored
// by the compiler).
bool IsAnnotationKeyword(const std::string& keyword);

// a ∧ b. Neither may hold `$ref` at its top level (resolve it first).
// `where` names the place in the schema for errors.
absl::StatusOr<nlohmann::ordered_json> MergeSchemas(
    const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
    const std::string& where);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_SCHEMA_MERGE_H_
