#ifndef PACELINE_TOOLS_PACELINE_JSON_PARSE_H_
#define PACELINE_TOOLS_PACELINE_JSON_PARSE_H_

// JSON text from a user's file or flag, parsed with the first syntax error
// named (nlohmann's non-throwing parse says only that the text is not
// JSON).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace paceline::tools {

// `text` as JSON, objects in their keys' order; InvalidArgument "WHERE:
// parse error at line L, column C: WHAT" when it is not JSON.
absl::StatusOr<nlohmann::ordered_json> ParseJson(const std::string& text,
                                                 absl::string_view where);

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_JSON_PARSE_H_
