#include "server/openai/openai_json.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chat/bounded_json.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {
namespace {

absl::Status WrongType(absl::string_view param, const char* want,
                       const Json& got) {
  return InvalidParam(param, absl::StrCat("'", param, "' must be ", want,
                                          ", got ", TypeName(got)));
}

}  // namespace

absl::StatusOr<Json> ParseBody(absl::string_view body) {
  chat::JsonLimits limits;
  limits.max_depth = kMaxBodyDepth;
  limits.max_object_keys = kMaxObjectKeys;
  chat::JsonBudget budget(kMaxBodyValues);
  std::string where;
  absl::StatusOr<Json> json =
      chat::ParseBoundedJson(body, "the request body", limits, &budget, &where);
  if (!json.ok()) {
    // A limit names the value that passed it as the param.
    if (!where.empty()) return InvalidParam(where, json.status().message());
    return json.status();
  }
  if (!json->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body must be a JSON object, got ", TypeName(*json)));
  }
  return json;
}

const Json* Find(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const char* TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return "a string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "null";
  }
}

absl::StatusOr<bool> AsBool(const Json& v, absl::string_view param) {
  if (!v.is_boolean()) return WrongType(param, "a boolean", v);
  return v.get<bool>();
}

absl::StatusOr<std::string> AsString(const Json& v, absl::string_view param) {
  if (!v.is_string()) return WrongType(param, "a string", v);
  return v.get<std::string>();
}

absl::StatusOr<double> AsNumber(const Json& v, absl::string_view param) {
  if (!v.is_number()) return WrongType(param, "a number", v);
  const double x = v.get<double>();
  if (!std::isfinite(x)) {
    return InvalidParam(param, absl::StrCat("'", param, "' must be finite"));
  }
  return x;
}

absl::StatusOr<int64_t> AsInt(const Json& v, absl::string_view param,
                              int64_t lo, int64_t hi) {
  const std::string range = absl::StrCat("an integer in [", lo, ", ", hi, "]");
  if (!v.is_number()) return WrongType(param, range.c_str(), v);
  bool in_range = false;
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    in_range = hi >= 0 && u <= static_cast<uint64_t>(hi);
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
    in_range = x >= lo && x <= hi;
  } else {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      return WrongType(param, range.c_str(), v);
    }
    // Compared as doubles first, so the cast below cannot overflow.
    in_range = d >= static_cast<double>(lo) && d <= static_cast<double>(hi) &&
               d < 9223372036854775808.0;  // 2^63
    if (in_range) x = static_cast<int64_t>(d);
  }
  if (!in_range || x < lo || x > hi) {
    return InvalidParam(param, absl::StrCat("'", param, "' must be ", range,
                                            ", got ", Dump(v)));
  }
  return x;
}

absl::Status OptionalString(const Json& obj, const char* key,
                            absl::string_view param, std::string* out) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return absl::OkStatus();
  absl::StatusOr<std::string> text = AsString(*v, Member(param, key));
  if (!text.ok()) return text.status();
  *out = *std::move(text);
  return absl::OkStatus();
}

absl::Status RequiredString(const Json& obj, const char* key,
                            absl::string_view param, std::string* out) {
  const std::string field = Member(param, key);
  const Json* v = Find(obj, key);
  if (v == nullptr) {
    return InvalidParam(field, absl::StrCat("'", field, "' is required"));
  }
  absl::StatusOr<std::string> text = AsString(*v, field);
  if (!text.ok()) return text.status();
  if (text->empty()) {
    return InvalidParam(field, absl::StrCat("'", field, "' is empty"));
  }
  *out = *std::move(text);
  return absl::OkStatus();
}

absl::Status ExpectObject(const Json& v, absl::string_view param) {
  return v.is_object() ? absl::OkStatus() : WrongType(param, "an object", v);
}

absl::Status ExpectArray(const Json& v, absl::string_view param) {
  return v.is_array() ? absl::OkStatus() : WrongType(param, "an array", v);
}

std::string Dump(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string Index(absl::string_view param, size_t i) {
  return absl::StrCat(param, "[", i, "]");
}

std::string Member(absl::string_view param, absl::string_view key) {
  return absl::StrCat(param, ".", key);
}

}  // namespace paceline::server::openai
