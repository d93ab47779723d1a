#ifndef PACELINE_CHAT_OUTPUT_PARSER_H_
#define PACELINE_CHAT_OUTPUT_PARSER_H_

// A chat model's output split, as it streams, into reasoning, content and
// tool calls (OpenAI's `reasoning_content`, `content` and `tool_calls`).
//
// The parser sees text only: markers that are control tokens
// (`[TOOL_CALLS]`, `<|python_tag|>`, `[ARGS]`) must reach it as their text.
//
// What the client sees, exactly:
// - Reasoning: the text between the open and close markers, recognised only
//   at the very start of the output (leading whitespace allowed), or from
//   the first byte when the prompt itself opened the block
//   (`starts_in_reasoning`; an open marker the model writes anyway is
//   then dropped). Tool-call markers inside reasoning are
//   reasoning text. An output cut inside reasoning is all reasoning.
// - Whitespace adjacent to a recognised marker (a reasoning marker, a call's
//   opening marker, the end of a call or of its closing tag) belongs to
//   neither side and is dropped; every other byte of content and reasoning
//   is passed through as the model wrote it. With ToolCallFormat::kNone and
//   no reasoning markers the content is the output, byte for byte.
// - Tool calls (the formats are described at ToolCallFormat, in
//   chat/tool_formats/tool_call_format.h): the first
//   delta of call `index` carries its id and name (and any argument text
//   already seen); later deltas append argument text as it arrives. The
//   arguments are the JSON object exactly as the model wrote it, from `{` to
//   the matching `}`, whitespace inside kept. A call is complete when its
//   object closes and checks as JSON (the name a non-empty string, the
//   arguments an object, every other value valid JSON; top-level keys only
//   "name" or "tool_name", "arguments" or "parameters" (one of each),
//   "id", "tool_call_id", "type").
//   The formats that write a call's arguments as XML parameters (and
//   gpt-oss, whose call is a message) differ: the arguments are a JSON
//   object text the parser builds from the parameters
//   (tool_formats/parameter_value.h), sent a parameter at a time, and a
//   call is complete at its closing marker.
//   A call object without arguments gets "{}". What follows a complete
//   call (Hermes' `</tool_call>`, Llama's `;`, Mistral's `,`/`]`) is looked
//   for, but its absence does not undo the call: other text there is
//   content.
// - Malformed or cut calls (not JSON, no name, an unknown key, a stream
//   ending mid-call) are content: the exact text from the end of the last
//   complete call or of the content before it (the opening marker and any
//   whitespace before it included, but not whitespace dropped after a
//   complete call) up to the byte that broke it is emitted as `content`,
//   and parsing resumes at that byte as content. If the
//   broken call had already been announced (its name was parsed, so deltas
//   with its index went out), its index is listed in that delta's
//   `broken_tool_calls`: no more text comes for it, the argument text it got
//   is not a complete call, and a non-streamed response must leave it out;
//   a stream cannot take it back. Its index is not reused, and it does not
//   count for saw_tool_calls().
// - Everything depends on the whole text only, never on how it was split
//   into pushes: the concatenation of all deltas' fields (per call index)
//   is the same for any split.
//
// If every pushed text ends on a UTF-8 character boundary, so does every
// field of every delta: the parser cuts only at push boundaries and before
// the ASCII bytes of markers, whitespace and JSON structure.
//
// Thread-compatible: one parser per request.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "chat/call_scanner.h"
#include "chat/tool_formats/harmony_reader.h"
#include "chat/tool_formats/markup_reader.h"
#include "chat/tool_formats/parameter_value.h"
#include "chat/tool_formats/tool_call_format.h"
#include "chat/tool_formats/tool_syntax.h"

namespace paceline::chat {

struct ChatOutputFormat {
  // Reasoning markers; both empty: no reasoning is parsed.
  std::string reasoning_open;
  std::string reasoning_close;
  // The prompt ended by opening the reasoning block (DeepSeek-R1, QwQ): the
  // output starts inside it. See PromptOpensReasoning.
  bool starts_in_reasoning = false;
  // The prompt ended by closing it (a template that writes an empty block
  // when thinking is off, Qwen3's `<think>\n\n</think>`): the answer comes
  // at once. The parser does not read it; structured output starts there.
  // See PromptClosesReasoning.
  bool prompt_closed_reasoning = false;
  // The prompt ended with the marker that opens calls (functionary v3.2's
  // `>>>`): the output starts with a call's header. See
  // PromptOpensToolCalls.
  bool starts_in_tool_calls = false;
  // The server should use kNone for a request without tools.
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  // The request's tools' parameter types (may be null): how the XML
  // formats type a parameter's value (chat/tool_formats/parameter_value.h).
  std::shared_ptr<const ToolParameterTypes> parameter_types;
};

// Chooses the format from the template's own markers:
// - Reasoning: `<seed:think>`, `<mm:think>`, `<|START_THINKING|>` (each
//   with its close marker), else `<think>` or `</think>`: `<think>`/
//   `</think>`; else `[THINK]`: `[THINK]`/`[/THINK]`. gpt-oss's reasoning
//   is its analysis channel (ToolCallFormat::kHarmony), no markers.
// - Calls: a family of tool_syntax.h whose markers the source holds
//   (DetectToolSyntax), or gpt-oss's harmony; else `[TOOL_CALLS]`:
//   kMistralArgs when `[ARGS]` is there too, else kMistral; else
//   `<tool_call>`: kHermes; else `<|python_tag|>` or Llama 3's tool prompt
//   (`"name": function name, "parameters"`): kLlama3; else kNone.
// starts_in_reasoning is left false (it depends on the rendered prompt).
ChatOutputFormat DetectChatOutputFormat(absl::string_view template_source);

// True when `format` has reasoning markers and the rendered prompt ends
// with the open marker, trailing whitespace ignored.
bool PromptOpensReasoning(absl::string_view rendered_prompt,
                          const ChatOutputFormat& format);
// True when `format` has reasoning markers and the rendered prompt ends
// with the close marker, trailing whitespace ignored.
bool PromptClosesReasoning(absl::string_view rendered_prompt,
                           const ChatOutputFormat& format);

// True when the format's calls may open at the end of the prompt (those
// whose opening marker can open content too: functionary v3.2's `>>>`) and
// the rendered prompt ends with that marker.
bool PromptOpensToolCalls(absl::string_view rendered_prompt,
                          const ChatOutputFormat& format);

struct ChatToolCallDelta {
  int index = 0;          // 0, 1, ... in the order calls are announced
  std::string id;         // the first delta of a call only
  std::string name;       // the first delta of a call only
  std::string arguments;  // argument text since the call's previous delta
};

struct ChatOutputDelta {
  std::string content;
  std::string reasoning;
  // At most one entry per call index, in index order.
  std::vector<ChatToolCallDelta> tool_calls;
  // Announced calls that turned out malformed (see the top of this file).
  std::vector<int> broken_tool_calls;

  bool empty() const {
    return content.empty() && reasoning.empty() && tool_calls.empty() &&
           broken_tool_calls.empty();
  }
};

class ChatOutputParser {
 public:
  // Returns the id of the next call (called once per announced call).
  using IdGenerator = std::function<std::string()>;

  // Ids are generated from `id_seed`: "call_" and 9 letters and digits, or,
  // for the Mistral formats (whose templates insist on it), 9 letters and
  // digits alone. The same seed gives the same ids.
  explicit ChatOutputParser(ChatOutputFormat format, uint64_t id_seed = 0);
  ChatOutputParser(ChatOutputFormat format, IdGenerator ids);

  ChatOutputParser(const ChatOutputParser&) = delete;
  ChatOutputParser& operator=(const ChatOutputParser&) = delete;

  // Takes the next piece of the output and returns what became certain.
  // Text that may still turn out to be (part of) a marker, whitespace that
  // may still turn out to be next to one, and a call whose name is not yet
  // known are held back.
  ChatOutputDelta Push(absl::string_view text);

  // The output ended: returns everything still held (a cut call as content,
  // see the top of this file). Push after Finish is not allowed.
  ChatOutputDelta Finish();

  // At least one complete call was parsed: finish with
  // FINISH_REASON_TOOL_CALLS.
  bool saw_tool_calls() const { return saw_tool_calls_; }

  const ChatOutputFormat& format() const { return format_; }

 private:
  enum class State {
    kStart,         // maybe a reasoning open marker
    kReasoning,     // inside reasoning, looking for the close marker
    kContent,       // content, looking for a call's opening marker
    kCall,          // a call's JSON (call_container_: what comes after)
    kHermesClose,   // after a Hermes call object: `</tool_call>`
    kLlamaNext,     // after a Llama call: `;` and another, or content
    kMistralStart,  // after `[TOOL_CALLS]`: `[` (array) or a name
    kMistralNext,   // after an array element: `,` or `]`
    kMistralName,   // `[TOOL_CALLS]name` up to `[CALL_ID]` or `[ARGS]`
    kMistralId,     // `[CALL_ID]id` up to `[ARGS]`
    kMarkup,        // the calls of a tool_syntax.h family (markup_)
    kHarmony,       // all of a gpt-oss output (harmony_)
  };

  // One step of the state machine on buffer_; false when nothing more can
  // be decided (`final`: the output has ended, decide everything).
  bool Step(bool final);
  bool StepStart(bool final);
  bool StepText(bool final);
  bool StepCall(bool final);
  bool StepAfterCall(bool final);
  bool StepMistralStart(bool final);
  bool StepMistralHeader(bool final);
  // output_parser_markup.cc: the families read by markup_ and harmony_.
  bool StepMarkup(bool final);
  bool StepHarmony(bool final);
  // The text that opens calls in content (empty: none).
  absl::string_view CallMarker() const;
  // The call in progress's argument text since the previous take.
  std::string TakeArguments();

  // Emits text to the current channel (content or reasoning), after the
  // held whitespace before it; `even_space_alone`: `text` is that
  // whitespace, emitted as is.
  void EmitText(absl::string_view text, bool even_space_alone = false);
  // Emits what the text states can decide of buffer_ without a marker in
  // it (`marker`: the one they look for, or empty).
  void EmitDecided(bool final, absl::string_view marker);
  // Moves buffer_'s leading whitespace to space_.
  void HoldLeadingSpaces();
  // Moves buffer_[0, n) into raw_.
  void ConsumeRaw(size_t n);
  // Starts scanning a call object (or, `arguments_only`, the arguments
  // object of a Mistral `[ARGS]` call); `container` is the state after it.
  void BeginCall(State container, bool arguments_only);
  void Announce(const std::string& name, std::string id);
  void FlushArguments();
  void CommitCall();
  void FailCall();

  // Constant after construction.
  const ChatOutputFormat format_;
  IdGenerator ids_;
  const ToolSyntax* const syntax_;  // the format's family, or null

  State state_ = State::kStart;
  State call_container_ = State::kContent;  // the state after kCall
  std::string buffer_;                      // pushed text not yet decided
  // Whitespace before buffer_ in a text state, held until it is known
  // whether a marker follows it (kept apart so a long run is not rescanned).
  std::string space_;
  // Text since the last decided point that becomes content if the call
  // being parsed turns out malformed.
  std::string raw_;
  bool skip_whitespace_ = false;  // drop leading whitespace (after a marker)
  bool content_started_ = false;  // a Llama call can no longer start bare
  internal::ToolCallScanner scanner_;
  internal::MarkupReader markup_;
  internal::HarmonyReader harmony_;
  std::string mistral_name_;
  std::string mistral_id_;
  bool announced_ = false;  // the call in progress has gone out
  int call_index_ = 0;      // its index, when announced_
  int next_index_ = 0;
  bool saw_tool_calls_ = false;
  ChatOutputDelta out_;  // the delta being built
};

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_OUTPUT_PARSER_H_
