#ifndef PACELINE_CHAT_JINJA_STRINGS_H_
#define PACELINE_CHAT_JINJA_STRINGS_H_

// Python's str operations on UTF-8 text, codepoint by codepoint.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace paceline::chat::jinja {

// str.strip / lstrip / rstrip; `chars` nullopt strips whitespace.
std::string PyStrip(absl::string_view s,
                    const std::optional<std::string>& chars, bool left,
                    bool right);
// str.split / rsplit; `sep` nullopt splits on whitespace runs.
std::vector<std::string> PySplit(absl::string_view s,
                                 const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right);
std::vector<std::string> PySplitLines(absl::string_view s);
std::string PyUpper(absl::string_view s);
std::string PyLower(absl::string_view s);
std::string PyTitle(absl::string_view s);
std::string PyCapitalize(absl::string_view s);
// jinja2's `title` filter: each word split on [-\s({\[<]+ capitalised.
std::string JinjaTitle(absl::string_view s);
std::string PyReplace(absl::string_view s, absl::string_view old,
                      absl::string_view repl, int64_t count);
// str.find / rfind in codepoints; -1 when absent.
int64_t PyFind(absl::string_view s, absl::string_view sub, bool from_right);
int64_t PyCount(absl::string_view s, absl::string_view sub);
bool PyIsLower(absl::string_view s);
bool PyIsUpper(absl::string_view s);

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_STRINGS_H_
