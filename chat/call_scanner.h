#ifndef PACELINE_CHAT_CALL_SCANNER_H_
#define PACELINE_CHAT_CALL_SCANNER_H_

// The streaming JSON scanners behind ChatOutputParser (chat_output.h): they
// take a model's tool call a byte at a time, so that argument text can go
// out as it arrives, and say at each byte whether the text is still a
// possible call. Only structure is tracked while streaming (strings with
// their escapes, nesting); each value is checked as JSON when it closes.
//
// Untrusted input: no recursion, nesting and token lengths are capped.
// Thread-compatible.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace paceline::chat::internal {

// The extent of one JSON value fed byte by byte, from its first byte (the
// caller skips whitespace before it).
class JsonValueScanner {
 public:
  enum class Step {
    kMore,        // the byte belongs to the value, which goes on
    kDone,        // the byte ended the value
    kDoneBefore,  // the value (a number or literal) ended before this byte
    kError,       // the byte cannot be part of a JSON value here
  };

  static constexpr int kMaxDepth = 128;
  static constexpr size_t kMaxScalarBytes = 64;

  Step Feed(char c);
  void Reset() { *this = JsonValueScanner(); }

 private:
  enum class Kind { kNone, kString, kNested, kScalar };

  Step FeedNested(char c);

  Kind kind_ = Kind::kNone;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  size_t scalar_bytes_ = 0;
};

// A tool call: either a whole call object `{"name": ..., "arguments": {...}}`
// or, `arguments_only`, just the arguments object (Mistral's `[ARGS]`).
// Accepted keys and what makes a call complete: output_parser.h.
class ToolCallScanner {
 public:
  enum class Step {
    kMore,   // consumed; the call goes on
    kDone,   // consumed; the call is complete and valid
    kError,  // not consumed: the text is not a call
  };

  static constexpr size_t kMaxKeyBytes = 32;

  void Reset(bool arguments_only);

  Step Feed(char c);

  // The decoded name, once its value has closed (never in arguments_only).
  bool has_name() const { return has_name_; }
  const std::string& name() const { return name_; }

  // Argument text scanned since the previous call (all of it on the first).
  std::string TakeArguments();

 private:
  enum class State {
    kOpen,        // whitespace, then `{`
    kKeyOrEnd,    // after `{`: a key or `}`
    kKey,         // after `,`: a key
    kInKey,       // inside a key string
    kColon,       // whitespace, then `:`
    kValueStart,  // whitespace, then a value's first byte
    kValue,       // inside a value
    kCommaOrEnd,  // whitespace, then `,` or `}`
    kDone,
  };
  enum class Field { kName, kArguments, kOther };

  Step FeedKeyState(char c);
  Step StartValue(char c);
  Step FeedValue(char c);
  Step EndValue();
  Step EndObject();
  Step FeedCommaOrEnd(char c);

  bool arguments_only_ = false;
  State state_ = State::kOpen;
  JsonValueScanner value_;
  Field field_ = Field::kOther;
  std::string key_;
  std::string value_raw_;  // the name's or another key's value as written
  std::string arguments_;  // the arguments object as written
  size_t arguments_taken_ = 0;
  bool has_name_ = false;
  bool has_arguments_ = false;
  bool has_id_ = false;
  bool has_type_ = false;
  std::string name_;
};

}  // namespace paceline::chat::internal

#endif  // PACELINE_CHAT_CALL_SCANNER_H_
