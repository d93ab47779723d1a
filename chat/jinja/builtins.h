#ifndef PACELINE_CHAT_JINJA_BUILTINS_H_
#define PACELINE_CHAT_JINJA_BUILTINS_H_

// jinja2's filters, tests and globals, Python's str / dict / list methods,
// and the attribute and item access rules of the immutable sandbox.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/jinja/eval.h"
#include "chat/jinja/value.h"

namespace paceline::chat::jinja {

bool IsKnownFilter(absl::string_view name);
bool IsKnownTest(absl::string_view name);

absl::StatusOr<Value> ApplyFilter(absl::string_view name, const Value& input,
                                  CallArgs& args, Evaluator& ev);
absl::StatusOr<bool> ApplyTest(absl::string_view name, const Value& input,
                               CallArgs& args, Evaluator& ev);

// `obj.name` (attribute first, then item) and `obj[key]` (item first, then
// attribute, for a str key), as jinja2's sandbox resolves them. Missing
// gives Undefined; access on an Undefined fails.
absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name);
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);

// A method of a str, dict or list, as a callable bound to `self`; nullopt
// when the type has no such (safe) method.
std::optional<Value> BoundMethod(const Value& self, absl::string_view name);
absl::StatusOr<Value> CallMethod(const Value& self, absl::string_view name,
                                 CallArgs& args, Evaluator& ev);

// The globals every render sees: range, dict, namespace, raise_exception,
// strftime_now.
void AddGlobals(Frame* frame);

// The values a for loop or a filter iterates: list items, dict keys, str
// characters, nothing for Undefined; an error otherwise.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);

// Python's `a + b` etc. for the binary operators of the grammar.
absl::StatusOr<Value> BinaryOp(absl::string_view op, const Value& a,
                               const Value& b, Evaluator& ev);
// Python's `a in b`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);

// ResourceExhausted when a string or list built by the template would hold
// more than max_output_bytes bytes (or items).
absl::Status CheckSize(size_t size, const Evaluator& ev);

// markupsafe.escape: & < > " ' as HTML entities.
std::string HtmlEscape(absl::string_view s);

// An error for using an undefined value (its hint says why it is).
absl::Status UndefinedError(const Value& undefined);

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_BUILTINS_H_
