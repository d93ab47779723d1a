#include "engine/tokenizer/text_output.h"

#include <algorithm>
#include <utility>

namespace paceline::engine {

TextOutput::TextOutput(const Tokenizer* tokenizer, StopStrings stop,
                       bool control_token_text)
    : detokenizer_(tokenizer, {.control_token_text = control_token_text}),
      stop_(std::move(stop)) {}

std::string TextOutput::Push(int32_t id) {
  if (stopped()) return "";
  ++tokens_;
  std::string text = std::move(held_);
  held_.clear();
  text += detokenizer_.Push(id);
  if (stop_.strings.empty()) return text;
  const std::string* matched = nullptr;
  const size_t at = FindStopString(text, &matched);
  if (matched != nullptr) {
    stop_string_ = *matched;
    text.resize(at + (stop_.include ? matched->size() : 0));
    return text;
  }
  const size_t hold = HoldBack(text);
  held_.assign(text, text.size() - hold, hold);
  text.resize(text.size() - hold);
  return text;
}

std::string TextOutput::Flush() {
  if (stopped()) return "";
  std::string text = std::move(held_);
  held_.clear();
  text += detokenizer_.Flush();
  return text;
}

size_t TextOutput::FindStopString(absl::string_view text,
                                  const std::string** matched) const {
  size_t best = absl::string_view::npos;
  for (const std::string& s : stop_.strings) {
    const size_t at = text.find(s);
    if (at < best) {
      best = at;
      *matched = &s;
    }
  }
  return best;
}

size_t TextOutput::HoldBack(absl::string_view text) const {
  size_t hold = 0;
  for (const std::string& s : stop_.strings) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k) {
      if (text.substr(text.size() - k) == absl::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

}  // namespace paceline::engine
