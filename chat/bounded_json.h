#ifndef PACELINE_CHAT_BOUNDED_JSON_H_
#define PACELINE_CHAT_BOUNDED_JSON_H_

// Untrusted JSON text (a request body, a tool's parameters, a template
// kwarg) as nlohmann::ordered_json, in time and memory linear in its size
// and within limits checked while it is read.
//
// Why not Json::parse: ordered_json keeps an object's members in a vector
// and each insert scans it for the key, so an object of k keys costs k^2/2
// string compares (100,000 keys: 14 s of one intake thread). Here each
// object's keys are indexed in a hash set while it is read (past a few
// keys), so a parse is linear. A repeated key keeps its first position and
// takes the last value (what Json::parse does).
//
// The limits are refused while reading, so a body past one costs at most
// the text read until then: nesting deeper than max_depth (the top value
// is level 1 when it is an array or object), an object with more than
// max_object_keys keys, more than `budget`'s values in all (every value
// counts one: scalars, arrays, objects; a budget may be shared by the
// several texts of one request).
//
// Errors are InvalidArgument, their message starting with `what` ("the
// request body", "chat.tools[0].function.parameters") and naming the limit
// and where it was passed; malformed JSON is "<what> is not valid JSON".
// Thread-compatible.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace paceline::chat {

// The server's limits for request JSON (every API's). A 4 MiB body of
// token ids holds about a million values.
inline constexpr int kDefaultMaxJsonDepth = 64;
inline constexpr int64_t kDefaultMaxJsonObjectKeys = 4096;
inline constexpr int64_t kDefaultMaxJsonValues = 1 << 20;

struct JsonLimits {
  int max_depth = kDefaultMaxJsonDepth;
  int64_t max_object_keys = kDefaultMaxJsonObjectKeys;
};

// Values still allowed, shared by every parse that is given it.
struct JsonBudget {
  explicit JsonBudget(int64_t values) : max_values(values), left(values) {}
  const int64_t max_values;
  int64_t left;
};

// `text` as one JSON value (nothing but whitespace after it). `budget`
// may be null (no limit on values). When an object has too many keys,
// *where (may be null) is its path: "chat_template_kwargs",
// "messages[2].tool_calls[0]", "" for the top (the other limits are the
// whole text's; their messages say where they were passed).
absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(
    absl::string_view text, absl::string_view what, const JsonLimits& limits,
    JsonBudget* budget, std::string* where = nullptr);

// Appends `key: value` to `object` (an ordered_json object) in constant
// time. The caller guarantees `key` is not in `object` already (e.g. the
// keys come from another object, mapped one to one).
void AppendNewMember(nlohmann::ordered_json* object, std::string key,
                     nlohmann::ordered_json value);

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_BOUNDED_JSON_H_
