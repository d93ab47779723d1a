#ifndef PACELINE_CHAT_TOOL_FORMATS_MARKUP_READER_H_
#define PACELINE_CHAT_TOOL_FORMATS_MARKUP_READER_H_

// The one streaming engine behind every family of tool_syntax.h: it reads
// the calls after the section's opening marker from the parser's pending
// text, a decision at a time, and says what it decided. The parser
// (chat/output_parser.h) owns the text, the content and the call indices.
//
// It consumes only what is decided: a marker cut at the end of the text is
// left there until more comes. Untrusted input: names, keys, ids and
// attributes are capped, and a parameter value at kMaxValueBytes; no
// recursion. Thread-compatible.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "chat/call_scanner.h"
#include "chat/tool_formats/parameter_value.h"
#include "chat/tool_formats/tool_syntax.h"

namespace paceline::chat::internal {

class MarkupReader {
 public:
  static constexpr size_t kMaxNameBytes = 128;
  static constexpr size_t kMaxAttrsBytes = 64;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;

  enum class Event {
    kMore,      // consumed what it could: more text is needed
    kProgress,  // consumed a part; call Next again
    kAnnounce,  // the call's name (and id) are known: name(), id()
    kCallDone,  // the call is complete (its arguments a JSON object)
    kEnd,       // the calls are over: content follows
    kContent,   // the header opened content instead of a call: content
    kBroken,    // the text is not a call: the consumed part is content
  };
  struct Result {
    Event event;
    size_t consumed;  // bytes of `text` taken, before the event
  };

  // Starts after `syntax`'s section_open; `types` may be null.
  void Begin(const ToolSyntax* syntax, const ToolParameterTypes* types);

  // Decides what it can at the start of `text` (`final`: no more text will
  // come; then kMore is never returned).
  Result Next(absl::string_view text, bool final);

  const std::string& name() const { return name_; }
  const std::string& id() const { return id_; }
  // Argument text decided since the previous call.
  std::string TakeArguments();

 private:
  enum class State {
    kCallOrEnd,
    kArrayPrefix,
    kArrayOpen,
    kJsonCall,
    kArrayNext,
    kId,
    kName,
    kArgumentsOpen,
    kJsonArguments,
    kArgumentsClose,
    kCallClose,
    kParameterOrClose,
    kParameterKey,
    kParameterAttrs,
    kValueOpen,
    kValue,
    kSectionClose,
  };

  Result StepCallOrEnd(absl::string_view text, bool final);
  Result StepArray(absl::string_view text, bool final);
  Result StepJson(absl::string_view text, bool final);
  Result StepHeader(absl::string_view text, bool final);
  Result StepAfterArguments(absl::string_view text, bool final);
  Result StepParameterOrClose(absl::string_view text, bool final);
  Result StepParameterHeader(absl::string_view text, bool final);
  Result StepValue(absl::string_view text, bool final);
  Result StepSectionClose(absl::string_view text, bool final);

  // Where `marker` starts in `text` (searched from scanned_ on), or npos
  // with scanned_ moved on.
  size_t FindFrom(absl::string_view text, absl::string_view marker);
  Result CallDone(size_t consumed);
  Result Broken(size_t consumed) { return {Event::kBroken, consumed}; }
  bool SetName(absl::string_view header);

  const ToolSyntax* syntax_ = nullptr;
  const ToolParameterTypes* types_ = nullptr;
  State state_ = State::kCallOrEnd;
  size_t scanned_ = 0;  // bytes of the text known not to start the marker
  int calls_ = 0;       // complete calls in this section
  ToolCallScanner scanner_;
  bool scanning_ = false;  // arguments come from scanner_
  std::string name_;
  std::string id_;
  std::string key_;
  ValueHint hint_ = ValueHint::kNone;
  bool first_parameter_ = true;
  std::string arguments_;
};

}  // namespace paceline::chat::internal

#endif  // PACELINE_CHAT_TOOL_FORMATS_MARKUP_READER_H_
