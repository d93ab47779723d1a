#ifndef PACELINE_CHAT_TOOL_FORMATS_HARMONY_READER_H_
#define PACELINE_CHAT_TOOL_FORMATS_HARMONY_READER_H_

// gpt-oss's harmony output, read as it streams: messages `[<|start|>
// assistant] [ to=RECIPIENT] <|channel|>CHANNEL [ to=RECIPIENT]
// [<|constrain|>json]<|message|>BODY` ended by `<|end|>`, `<|call|>` or
// `<|return|>` (control tokens as their text). Channel `analysis` is
// reasoning, `final` and `commentary` content; a recipient
// `functions.NAME` makes the message a call whose body is its arguments
// (a JSON object, else the call is broken and its body is content). A
// header that does not end in `<|message|>` within kMaxHeaderBytes turns
// the rest of the output into content.
//
// Like markup_reader.h, it consumes only what is decided and says what;
// the parser (chat/output_parser.h) owns the text and the calls.
// Thread-compatible.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace paceline::chat::internal {

class HarmonyReader {
 public:
  static constexpr size_t kMaxHeaderBytes = 512;
  static constexpr size_t kMaxArgumentsBytes = size_t{1} << 20;

  enum class Event {
    kMore,       // consumed what it could: more text is needed
    kHeader,     // consumed a header or an end marker (no text)
    kReasoning,  // the consumed bytes are reasoning
    kContent,    // the consumed bytes are content
    kAnnounce,   // a call's header: name()
    kArguments,  // the consumed bytes are the call's arguments
    kCallDone,   // the call's arguments closed as a JSON object
    kBroken,     // the call's arguments are not a JSON object
  };
  struct Result {
    Event event;
    size_t consumed;
  };

  Result Next(absl::string_view text, bool final);

  const std::string& name() const { return name_; }
  std::string TakeArguments();

 private:
  enum class State { kHeader, kBody, kPlain };
  enum class Channel { kReasoning, kContent, kCall };

  Result StepHeader(absl::string_view text, bool final);
  Result StepBody(absl::string_view text, bool final);
  Result EndBody(size_t marker_bytes);
  // Reads the header; false when it is not one.
  bool ReadHeader(absl::string_view header);

  State state_ = State::kHeader;
  Channel channel_ = Channel::kContent;
  std::string name_;
  std::string arguments_;  // the call's body so far
  size_t arguments_taken_ = 0;
};

}  // namespace paceline::chat::internal

#endif  // PACELINE_CHAT_TOOL_FORMATS_HARMONY_READER_H_
