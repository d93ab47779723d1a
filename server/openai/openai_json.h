#ifndef PACELINE_SERVER_OPENAI_OPENAI_JSON_H_
#define PACELINE_SERVER_OPENAI_OPENAI_JSON_H_

// Reading an untrusted OpenAI request body: a bounded parse, and typed
// field readers whose errors name the field as OpenAI's `param`
// (InvalidParam, openai_error.h). Internal to server/openai.
//
// JSON null and an absent field are the same thing (OpenAI's schema types
// most options "T or null", and clients such as LangChain send explicit
// nulls for unset options).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

using Json = nlohmann::ordered_json;

// The body as a JSON object, read in linear time (bounded_json.h).
// Errors (InvalidArgument): malformed JSON, a body that is not an object,
// and the limits of openai_request.h, refused while the body is read:
// nesting over kMaxBodyDepth, an object with over kMaxObjectKeys keys,
// over kMaxBodyValues values in all. An object with too many keys inside
// the body is named as the param ("chat_template_kwargs").
absl::StatusOr<Json> ParseBody(absl::string_view body);

// `obj[key]`, or null when absent or JSON null. `obj` must be an object.
const Json* Find(const Json& obj, const char* key);

// "a string", "an integer", "a number", "a boolean", "an array",
// "an object", "null": for messages.
const char* TypeName(const Json& v);

// Typed readers; a wrong type is InvalidParam(param, "'param' must be X,
// got Y").
absl::StatusOr<bool> AsBool(const Json& v, absl::string_view param);
absl::StatusOr<std::string> AsString(const Json& v, absl::string_view param);
// A finite number (an integer is accepted too).
absl::StatusOr<double> AsNumber(const Json& v, absl::string_view param);
// An integer in [lo, hi]; an integral float (3.0, 1e3) counts. Out of range
// is InvalidParam naming the range.
absl::StatusOr<int64_t> AsInt(const Json& v, absl::string_view param,
                              int64_t lo, int64_t hi);
// obj[key] as a string into *out when present (left as is when absent).
absl::Status OptionalString(const Json& obj, const char* key,
                            absl::string_view param, std::string* out);
// obj[key] as a non-empty string; absent or "" is InvalidParam
// ("'param.key' is required" / "is empty").
absl::Status RequiredString(const Json& obj, const char* key,
                            absl::string_view param, std::string* out);
// An object / an array: just the type check.
absl::Status ExpectObject(const Json& v, absl::string_view param);
absl::Status ExpectArray(const Json& v, absl::string_view param);

// `v` as JSON text; invalid UTF-8 replaced (never throws).
std::string Dump(const Json& v);

// "param[i]" and "param.key", for nested params.
std::string Index(absl::string_view param, size_t i);
std::string Member(absl::string_view param, absl::string_view key);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_JSON_H_
