#ifndef PACELINE_TESTS_TESTING_PERSON_SCHEMA_H_
#define PACELINE_TESTS_TESTING_PERSON_SCHEMA_H_

// A small JSON Schema for structured-output tests, and its meaning checked
// by hand: stories260K, sampling freely inside it, ends well within 200
// tokens (a short string, a bounded integer, an enum).

#include <string>

#include "nlohmann/json.hpp"

namespace paceline::testing {

inline constexpr char kPersonSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "pet": {"enum": ["cat", "dog"]}
  },
  "required": ["name", "age", "pet"],
  "additionalProperties": false
})";

// "" when `text` is a JSON object valid under kPersonSchema, else what is
// wrong with it.
inline std::string PersonViolation(const std::string& text) {
  const nlohmann::json v =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return "not JSON";
  if (!v.is_object()) return "not an object";
  if (v.size() != 3) return "not exactly the keys name, age, pet";
  for (const char* key : {"name", "age", "pet"}) {
    if (!v.contains(key)) return std::string("no ") + key;
  }
  const nlohmann::json& name = v["name"];
  if (!name.is_string()) return "name is not a string";
  int chars = 0;  // code points: UTF-8 bytes that do not continue one
  for (unsigned char c : name.get<std::string>()) chars += (c & 0xC0) != 0x80;
  if (chars > 8) return "name is longer than 8";
  const nlohmann::json& age = v["age"];
  if (!age.is_number_integer()) return "age is not an integer";
  if (age.get<int64_t>() < 0 || age.get<int64_t>() > 120) {
    return "age is outside [0, 120]";
  }
  const nlohmann::json& pet = v["pet"];
  if (pet != "cat" && pet != "dog") return "pet is neither cat nor dog";
  return "";
}

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_PERSON_SCHEMA_H_
