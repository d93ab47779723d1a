#ifndef PACELINE_CHAT_JINJA_PYFORMAT_H_
#define PACELINE_CHAT_JINJA_PYFORMAT_H_

// Python's string formatting as templates use it: `fmt % args`,
// `fmt.format(...)`, and datetime.strftime for strftime_now (UTC).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chat/jinja/eval.h"
#include "chat/jinja/value.h"

namespace paceline::chat::jinja {

// `fmt % args` (args a tuple for several values): %s %r %d %i %f %x %o %e %g
// %% with flags, width and precision.
absl::StatusOr<Value> PercentFormat(const std::string& fmt, const Value& args);

// `fmt.format(*pos, **kw)`: {} {0} {name} {x!r} and simple format specs.
absl::StatusOr<Value> BraceFormat(const std::string& fmt, const CallArgs& args);

// datetime.strftime of `t` in UTC (%Y %m %d %H %M %S %y %b %B %a %A %j %p %I
// %e %% and more).
std::string Strftime(absl::string_view fmt, absl::Time t);

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_PYFORMAT_H_
