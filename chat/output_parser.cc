#include "chat/output_parser.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "absl/strings/match.h"

namespace paceline::chat {
namespace {

constexpr absl::string_view kHermesOpen = "<tool_call>";
constexpr absl::string_view kHermesClose = "</tool_call>";
constexpr absl::string_view kPythonTag = "<|python_tag|>";
constexpr absl::string_view kToolCalls = "[TOOL_CALLS]";
constexpr absl::string_view kCallId = "[CALL_ID]";
constexpr absl::string_view kArgs = "[ARGS]";
constexpr size_t kMaxMistralNameBytes = 128;
constexpr size_t kMaxMistralIdBytes = 64;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsAlnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z');
}

bool IsNameByte(char c) {
  return IsAlnum(c) || c == '_' || c == '-' || c == '.';
}

size_t LeadingSpaces(absl::string_view text) {
  size_t n = 0;
  while (n < text.size() && IsSpace(text[n])) ++n;
  return n;
}

size_t TrailingSpaces(absl::string_view text) {
  size_t n = 0;
  while (n < text.size() && IsSpace(text[text.size() - 1 - n])) ++n;
  return n;
}

// The longest suffix of `text` that a marker starts with (and is shorter
// than): text that may still become that marker.
size_t HeldSuffix(absl::string_view text,
                  std::initializer_list<absl::string_view> markers) {
  size_t longest = 0;
  for (absl::string_view m : markers) longest = std::max(longest, m.size());
  for (size_t n = std::min(text.size(), longest); n > 0; --n) {
    absl::string_view tail = text.substr(text.size() - n);
    for (absl::string_view m : markers) {
      if (m.size() > n && absl::StartsWith(m, tail)) return n;
    }
  }
  return 0;
}

// splitmix64: ids that depend on the seed only.
ChatOutputParser::IdGenerator SeededIds(uint64_t seed, bool with_prefix) {
  return [state = seed, with_prefix]() mutable {
    static constexpr absl::string_view kAlphabet =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::string id = with_prefix ? "call_" : "";
    for (int i = 0; i < 9; ++i) {
      id += kAlphabet[z % kAlphabet.size()];
      z /= kAlphabet.size();
    }
    return id;
  };
}

bool IsMistral(ToolCallFormat format) {
  return format == ToolCallFormat::kMistral ||
         format == ToolCallFormat::kMistralArgs;
}

bool HasReasoning(const ChatOutputFormat& format) {
  return !format.reasoning_open.empty() && !format.reasoning_close.empty();
}

}  // namespace

ChatOutputFormat DetectChatOutputFormat(absl::string_view source) {
  ChatOutputFormat format;
  // {marker in the source, open, close}.
  static constexpr absl::string_view kReasoning[][3] = {
      {"<seed:think>", "<seed:think>", "</seed:think>"},
      {"<mm:think>", "<mm:think>", "</mm:think>"},
      {"<|START_THINKING|>", "<|START_THINKING|>", "<|END_THINKING|>"},
      {"<think{}>", "<think:opensource>", "</think:opensource>"},  // Hunyuan
      {"<think>", "<think>", "</think>"},
      {"</think>", "<think>", "</think>"},
      {"[THINK]", "[THINK]", "[/THINK]"},
  };
  for (const auto& markers : kReasoning) {
    if (absl::StrContains(source, markers[0])) {
      format.reasoning_open = std::string(markers[1]);
      format.reasoning_close = std::string(markers[2]);
      break;
    }
  }
  format.tool_calls = DetectToolSyntax(source);
  if (format.tool_calls == ToolCallFormat::kHarmony) {
    format.reasoning_open.clear();  // the analysis channel
    format.reasoning_close.clear();
  }
  if (format.tool_calls != ToolCallFormat::kNone) return format;
  if (absl::StrContains(source, kToolCalls)) {
    format.tool_calls = absl::StrContains(source, kArgs)
                            ? ToolCallFormat::kMistralArgs
                            : ToolCallFormat::kMistral;
  } else if (absl::StrContains(source, kHermesOpen)) {
    format.tool_calls = ToolCallFormat::kHermes;
  } else if (absl::StrContains(source, kPythonTag) ||
             absl::StrContains(source,
                               "\"name\": function name, \"parameters\"")) {
    format.tool_calls = ToolCallFormat::kLlama3;
  }
  return format;
}

namespace {

// `format` has reasoning and the prompt ends with `marker`, trailing
// whitespace ignored.
bool PromptEndsWith(absl::string_view rendered_prompt,
                    const ChatOutputFormat& format, absl::string_view marker) {
  if (!HasReasoning(format)) return false;
  absl::string_view prompt = rendered_prompt;
  prompt.remove_suffix(TrailingSpaces(prompt));
  return absl::EndsWith(prompt, marker);
}

}  // namespace

bool PromptOpensReasoning(absl::string_view rendered_prompt,
                          const ChatOutputFormat& format) {
  return PromptEndsWith(rendered_prompt, format, format.reasoning_open);
}

bool PromptClosesReasoning(absl::string_view rendered_prompt,
                           const ChatOutputFormat& format) {
  return PromptEndsWith(rendered_prompt, format, format.reasoning_close);
}

bool PromptOpensToolCalls(absl::string_view rendered_prompt,
                          const ChatOutputFormat& format) {
  const ToolSyntax* syntax = FindToolSyntax(format.tool_calls);
  if (syntax == nullptr || syntax->content_name.empty()) return false;
  return absl::EndsWith(rendered_prompt, syntax->section_open);
}

ChatOutputParser::ChatOutputParser(ChatOutputFormat format, uint64_t id_seed)
    : ChatOutputParser(format,
                       SeededIds(id_seed, !IsMistral(format.tool_calls))) {}

ChatOutputParser::ChatOutputParser(ChatOutputFormat format, IdGenerator ids)
    : format_(std::move(format)),
      ids_(std::move(ids)),
      syntax_(FindToolSyntax(format_.tool_calls)) {
  if (!HasReasoning(format_)) state_ = State::kContent;
  if (format_.tool_calls == ToolCallFormat::kHarmony) state_ = State::kHarmony;
  if (format_.starts_in_tool_calls && syntax_ != nullptr) {
    markup_.Begin(syntax_, format_.parameter_types.get());
    state_ = State::kMarkup;
  }
}

ChatOutputDelta ChatOutputParser::Push(absl::string_view text) {
  buffer_.append(text.data(), text.size());
  while (Step(/*final=*/false)) {
  }
  return std::exchange(out_, ChatOutputDelta());
}

ChatOutputDelta ChatOutputParser::Finish() {
  while (Step(/*final=*/true)) {
  }
  // Every state decides at the end: nothing stays held.
  buffer_.clear();
  return std::exchange(out_, ChatOutputDelta());
}

bool ChatOutputParser::Step(bool final) {
  switch (state_) {
    case State::kStart:
      return StepStart(final);
    case State::kReasoning:
    case State::kContent:
      return StepText(final);
    case State::kCall:
      return StepCall(final);
    case State::kHermesClose:
    case State::kLlamaNext:
    case State::kMistralNext:
      return StepAfterCall(final);
    case State::kMistralStart:
      return StepMistralStart(final);
    case State::kMistralName:
    case State::kMistralId:
      return StepMistralHeader(final);
    case State::kMarkup:
      return StepMarkup(final);
    case State::kHarmony:
      return StepHarmony(final);
  }
  return false;
}

bool ChatOutputParser::StepStart(bool final) {
  const std::string& open = format_.reasoning_open;
  HoldLeadingSpaces();
  if (absl::StartsWith(buffer_, open)) {
    buffer_.erase(0, open.size());
    space_.clear();
    state_ = State::kReasoning;
    skip_whitespace_ = true;
    return true;
  }
  if (!final && absl::StartsWith(open, buffer_)) return false;
  // The prompt opened the block (an open marker the model writes anyway
  // is dropped above), and its leading whitespace is dropped.
  if (format_.starts_in_reasoning) {
    state_ = State::kReasoning;
    space_.clear();
  } else {
    state_ = State::kContent;
  }
  return true;
}

bool ChatOutputParser::StepText(bool final) {
  if (skip_whitespace_) {
    buffer_.erase(0, LeadingSpaces(buffer_));
    if (buffer_.empty()) return false;
    skip_whitespace_ = false;
  }
  const bool reasoning = state_ == State::kReasoning;
  if (!reasoning && format_.tool_calls == ToolCallFormat::kLlama3 &&
      !content_started_) {
    // A bare JSON call may open the content.
    HoldLeadingSpaces();
    if (buffer_.empty() && !final) return false;
    if (!buffer_.empty() && buffer_[0] == '{') {
      raw_ = std::exchange(space_, "");
      BeginCall(State::kLlamaNext, /*arguments_only=*/false);
      return true;
    }
    content_started_ = true;
  }
  absl::string_view marker =
      reasoning ? absl::string_view(format_.reasoning_close) : CallMarker();
  size_t pos = marker.empty() ? std::string::npos
                              : absl::string_view(buffer_).find(marker);
  if (pos == std::string::npos) {
    EmitDecided(final, marker);
    return false;
  }
  // Whitespace next to the marker is neither side's; the marker and the
  // whitespace become content again if the call turns out malformed.
  absl::string_view before = absl::string_view(buffer_).substr(0, pos);
  size_t spaces = TrailingSpaces(before);
  EmitText(before.substr(0, before.size() - spaces));
  space_.append(buffer_, pos - spaces, spaces);
  buffer_.erase(0, pos);
  if (reasoning) {
    buffer_.erase(0, marker.size());
    space_.clear();
    state_ = State::kContent;
    skip_whitespace_ = true;
    return true;
  }
  raw_ = std::exchange(space_, "");
  ConsumeRaw(marker.size());
  if (syntax_ != nullptr) {
    markup_.Begin(syntax_, format_.parameter_types.get());
    state_ = State::kMarkup;
  } else if (format_.tool_calls == ToolCallFormat::kHermes) {
    BeginCall(State::kHermesClose, /*arguments_only=*/false);
  } else if (format_.tool_calls == ToolCallFormat::kLlama3) {
    BeginCall(State::kLlamaNext, /*arguments_only=*/false);
  } else {
    state_ = State::kMistralStart;
  }
  return true;
}

void ChatOutputParser::EmitDecided(bool final, absl::string_view marker) {
  if (final || marker.empty()) {
    EmitText(buffer_);
    EmitText(std::exchange(space_, ""), /*even_space_alone=*/true);
    buffer_.clear();
    return;
  }
  // Hold what may become the marker, and the whitespace before it.
  size_t end = buffer_.size() - HeldSuffix(buffer_, {marker});
  absl::string_view decided = absl::string_view(buffer_).substr(0, end);
  size_t spaces = TrailingSpaces(decided);
  EmitText(decided.substr(0, decided.size() - spaces));
  space_.append(buffer_, end - spaces, spaces);
  buffer_.erase(0, end);
}

bool ChatOutputParser::StepCall(bool final) {
  for (size_t i = 0; i < buffer_.size(); ++i) {
    internal::ToolCallScanner::Step step = scanner_.Feed(buffer_[i]);
    if (step == internal::ToolCallScanner::Step::kError) {
      ConsumeRaw(i);
      FailCall();
      return true;
    }
    if (!announced_ && scanner_.has_name()) Announce(scanner_.name(), "");
    if (step == internal::ToolCallScanner::Step::kDone) {
      buffer_.erase(0, i + 1);
      CommitCall();
      state_ = call_container_;
      skip_whitespace_ = state_ == State::kContent;
      return true;
    }
  }
  ConsumeRaw(buffer_.size());
  FlushArguments();
  if (!final) return false;
  FailCall();  // cut mid-call
  return true;
}

bool ChatOutputParser::StepAfterCall(bool final) {
  size_t spaces = LeadingSpaces(buffer_);
  ConsumeRaw(spaces);
  if (buffer_.empty() && !final) return false;
  // From here on raw_ holds only the whitespace after a complete call,
  // dropped unless a `;` or `,` starts another call.
  if (state_ == State::kHermesClose) {
    if (absl::StartsWith(buffer_, kHermesClose)) {
      buffer_.erase(0, kHermesClose.size());
      skip_whitespace_ = true;
    } else if (!final && absl::StartsWith(kHermesClose, buffer_)) {
      return false;
    }
  } else if (!buffer_.empty()) {
    const bool llama = state_ == State::kLlamaNext;
    char c = buffer_[0];
    if ((llama && (c == ';' || c == '{')) || (!llama && c == ',')) {
      if (c != '{') ConsumeRaw(1);
      BeginCall(state_, /*arguments_only=*/false);
      return true;
    }
    if (!llama && c == ']') {
      buffer_.erase(0, 1);
      skip_whitespace_ = true;
    }
  }
  raw_.clear();
  state_ = State::kContent;
  return true;
}

bool ChatOutputParser::StepMistralStart(bool final) {
  ConsumeRaw(LeadingSpaces(buffer_));
  if (buffer_.empty()) {
    if (!final) return false;
    FailCall();
    return true;
  }
  if (buffer_[0] == '[') {
    ConsumeRaw(1);
    BeginCall(State::kMistralNext, /*arguments_only=*/false);
    return true;
  }
  mistral_name_.clear();
  mistral_id_.clear();
  state_ = State::kMistralName;
  return true;
}

bool ChatOutputParser::StepMistralHeader(bool final) {
  const bool name = state_ == State::kMistralName;
  std::string& text = name ? mistral_name_ : mistral_id_;
  while (!buffer_.empty()) {
    char c = buffer_[0];
    if (c == '[') {
      absl::string_view rest = buffer_;
      bool args = absl::StartsWith(rest, kArgs);
      bool id = name && absl::StartsWith(rest, kCallId);
      if ((args || id) && !text.empty()) {
        ConsumeRaw(args ? kArgs.size() : kCallId.size());
        if (id) {
          state_ = State::kMistralId;
          return true;
        }
        BeginCall(State::kContent, /*arguments_only=*/true);
        Announce(mistral_name_, mistral_id_);
        return true;
      }
      bool maybe = absl::StartsWith(kArgs, rest) ||
                   (name && absl::StartsWith(kCallId, rest));
      if (maybe && !final && !text.empty()) return false;
      break;
    }
    size_t limit = name ? kMaxMistralNameBytes : kMaxMistralIdBytes;
    if (!(name ? IsNameByte(c) : IsAlnum(c)) || text.size() >= limit) break;
    text += c;
    ConsumeRaw(1);
  }
  if (buffer_.empty() && !final) return false;
  FailCall();
  return true;
}

absl::string_view ChatOutputParser::CallMarker() const {
  if (syntax_ != nullptr) return syntax_->section_open;
  switch (format_.tool_calls) {
    case ToolCallFormat::kHermes:
      return kHermesOpen;
    case ToolCallFormat::kLlama3:
      return kPythonTag;
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kMistralArgs:
      return kToolCalls;
    default:
      return "";
  }
}

void ChatOutputParser::EmitText(absl::string_view text, bool even_space_alone) {
  if (text.empty()) return;
  std::string& channel =
      state_ == State::kReasoning ? out_.reasoning : out_.content;
  if (!even_space_alone) {
    channel += space_;
    space_.clear();
  }
  channel.append(text.data(), text.size());
  if (state_ != State::kReasoning) content_started_ = true;
}

void ChatOutputParser::HoldLeadingSpaces() {
  size_t spaces = LeadingSpaces(buffer_);
  space_.append(buffer_, 0, spaces);
  buffer_.erase(0, spaces);
}

void ChatOutputParser::ConsumeRaw(size_t n) {
  raw_.append(buffer_, 0, n);
  buffer_.erase(0, n);
}

void ChatOutputParser::BeginCall(State container, bool arguments_only) {
  state_ = State::kCall;
  call_container_ = container;
  scanner_.Reset(arguments_only);
}

void ChatOutputParser::Announce(const std::string& name, std::string id) {
  call_index_ = next_index_++;
  announced_ = true;
  ChatToolCallDelta delta;
  delta.index = call_index_;
  delta.id = id.empty() ? ids_() : std::move(id);
  delta.name = name;
  delta.arguments = TakeArguments();
  out_.tool_calls.push_back(std::move(delta));
}

void ChatOutputParser::FlushArguments() {
  if (!announced_) return;
  std::string arguments = TakeArguments();
  if (arguments.empty()) return;
  if (out_.tool_calls.empty() || out_.tool_calls.back().index != call_index_) {
    out_.tool_calls.push_back({call_index_, "", "", ""});
  }
  out_.tool_calls.back().arguments += arguments;
}

void ChatOutputParser::CommitCall() {
  FlushArguments();
  saw_tool_calls_ = true;
  announced_ = false;
  raw_.clear();
}

void ChatOutputParser::FailCall() {
  if (announced_) {
    FlushArguments();
    out_.broken_tool_calls.push_back(call_index_);
    announced_ = false;
  }
  state_ = State::kContent;
  skip_whitespace_ = false;
  out_.content += raw_;
  content_started_ = true;
  raw_.clear();
}

}  // namespace paceline::chat
