#include "chat/prompt.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/bounded_json.h"

namespace paceline::chat {
namespace {

using engine::EncodeOptions;
using engine::TextRange;
using engine::Tokenizer;
using engine::TokenType;

// The placeholder alphabet, U+F0000..U+F001F: UTF-8 F3 B0 80 [80-9F].
constexpr absl::string_view kAlphabetPrefix = "\xF3\xB0\x80";
constexpr unsigned char kEscape = 0x80;   // U+F0000: a placeholder starts
constexpr unsigned char kEnd = 0x81;      // U+F0001: a token index ends
constexpr unsigned char kLiteral = 0x82;  // U+F0002: an escaped code point
constexpr unsigned char kDigit0 = 0x90;   // U+F0010 + d: hex digit d
constexpr size_t kCodeLen = 4;            // bytes per alphabet code point
constexpr int kMaxDigits = 8;

// The last byte of the alphabet code point at text[at], or -1.
int AlphabetAt(absl::string_view text, size_t at) {
  if (at + kCodeLen > text.size() ||
      text.substr(at, kAlphabetPrefix.size()) != kAlphabetPrefix) {
    return -1;
  }
  const unsigned char last = static_cast<unsigned char>(text[at + 3]);
  return last >= 0x80 && last <= 0x9F ? last : -1;
}

void AppendCode(unsigned char last, std::string* out) {
  absl::StrAppend(out, kAlphabetPrefix);
  out->push_back(static_cast<char>(last));
}

void AppendPlaceholder(int32_t index, std::string* out) {
  AppendCode(kEscape, out);
  char digits[kMaxDigits];
  int n = 0;
  uint32_t rest = static_cast<uint32_t>(index);
  do {
    digits[n++] = static_cast<char>(rest % 16);
    rest /= 16;
  } while (rest != 0);
  while (n > 0) AppendCode(kDigit0 + digits[--n], out);
  AppendCode(kEnd, out);
}

// Appends `piece` to `text` as a plain range.
void AppendPlain(absl::string_view piece, std::string* text,
                 std::vector<TextRange>* plain) {
  const size_t begin = text->size();
  absl::StrAppend(text, piece);
  plain->push_back({begin, text->size()});
}

}  // namespace

ChatPromptEncoder::ChatPromptEncoder(const Tokenizer* tokenizer)
    : tokenizer_(tokenizer) {
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    const TokenType type = tokenizer->token_type(id);
    const std::string& text = tokenizer->TokenText(id);
    if ((type != TokenType::kControl && type != TokenType::kUnknown) ||
        text.empty() || absl::StrContains(text, kAlphabetPrefix)) {
      continue;
    }
    const int32_t index = static_cast<int32_t>(protected_ids_.size());
    protected_ids_.push_back(id);
    by_first_byte_[static_cast<unsigned char>(text[0])].push_back(index);
  }
  for (auto& [byte, indices] : by_first_byte_) {
    std::stable_sort(indices.begin(), indices.end(), [&](int32_t a, int32_t b) {
      return tokenizer_->TokenText(protected_ids_[a]).size() >
             tokenizer_->TokenText(protected_ids_[b]).size();
    });
  }
}

int32_t ChatPromptEncoder::MatchAt(absl::string_view text) const {
  const auto it = by_first_byte_.find(static_cast<unsigned char>(text[0]));
  if (it == by_first_byte_.end()) return -1;
  for (int32_t index : it->second) {
    if (absl::StartsWith(text, tokenizer_->TokenText(protected_ids_[index]))) {
      return index;
    }
  }
  return -1;
}

std::string ChatPromptEncoder::ProtectString(absl::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (AlphabetAt(text, i) >= 0) {
      AppendCode(kEscape, &out);
      AppendCode(kLiteral, &out);
      absl::StrAppend(&out, text.substr(i, kCodeLen));
      i += kCodeLen;
      continue;
    }
    if (const int32_t index = MatchAt(text.substr(i)); index >= 0) {
      AppendPlaceholder(index, &out);
      i += tokenizer_->TokenText(protected_ids_[index]).size();
      continue;
    }
    out.push_back(text[i++]);
  }
  return out;
}

absl::Status ChatPromptEncoder::ProtectValue(nlohmann::ordered_json& value,
                                             int depth) const {
  if (depth > kMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the chat request nests deeper than ", kMaxDepth, " levels"));
  }
  if (value.is_string()) {
    std::string& text = value.get_ref<std::string&>();
    text = ProtectString(text);
  } else if (value.is_array()) {
    for (nlohmann::ordered_json& element : value) {
      RETURN_IF_ERROR(ProtectValue(element, depth + 1));
    }
  } else if (value.is_object()) {
    // ProtectString is one to one, so the keys stay distinct.
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      RETURN_IF_ERROR(ProtectValue(it.value(), depth + 1));
      AppendNewMember(&out, ProtectString(it.key()), std::move(it.value()));
    }
    value = std::move(out);
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::ordered_json> ChatPromptEncoder::Protect(
    const nlohmann::ordered_json& context) const {
  nlohmann::ordered_json out = context;
  if (!out.is_object()) {
    RETURN_IF_ERROR(ProtectValue(out, 0));
    return out;
  }
  nlohmann::ordered_json protected_context = nlohmann::ordered_json::object();
  for (auto it = out.begin(); it != out.end(); ++it) {
    const bool model_token = it.key() == "bos_token" || it.key() == "eos_token";
    if (!model_token) RETURN_IF_ERROR(ProtectValue(it.value(), 1));
    AppendNewMember(&protected_context,
                    model_token ? it.key() : ProtectString(it.key()),
                    std::move(it.value()));
  }
  return protected_context;
}

ChatPrompt ChatPromptEncoder::Encode(absl::string_view rendered) const {
  ChatPrompt prompt;
  size_t i = 0;
  while (i < rendered.size()) {
    const size_t escape = rendered.find(kAlphabetPrefix, i);
    if (escape == absl::string_view::npos) {
      absl::StrAppend(&prompt.text, rendered.substr(i));
      break;
    }
    absl::StrAppend(&prompt.text, rendered.substr(i, escape - i));
    i = escape;
    const int code = AlphabetAt(rendered, i);
    if (code < 0) {  // another code point that starts F3 B0 80
      absl::StrAppend(&prompt.text, kAlphabetPrefix);
      i += kAlphabetPrefix.size();
      continue;
    }
    if (code != kEscape) {  // a stray alphabet code point: plain text
      AppendPlain(rendered.substr(i, kCodeLen), &prompt.text, &prompt.plain);
      i += kCodeLen;
      continue;
    }
    i += kCodeLen;
    if (AlphabetAt(rendered, i) == kLiteral &&
        AlphabetAt(rendered, i + kCodeLen) >= 0) {
      AppendPlain(rendered.substr(i + kCodeLen, kCodeLen), &prompt.text,
                  &prompt.plain);
      i += 2 * kCodeLen;
      continue;
    }
    size_t j = i;
    uint32_t index = 0;
    int digits = 0;
    while (digits < kMaxDigits) {
      const int d = AlphabetAt(rendered, j);
      if (d < kDigit0 || d >= kDigit0 + 16) break;
      index = index * 16 + static_cast<uint32_t>(d - kDigit0);
      ++digits;
      j += kCodeLen;
    }
    if (digits > 0 && AlphabetAt(rendered, j) == kEnd &&
        index < protected_ids_.size()) {
      AppendPlain(tokenizer_->TokenText(protected_ids_[index]), &prompt.text,
                  &prompt.plain);
      i = j + kCodeLen;
      continue;
    }
    // A placeholder the template cut apart: its escape stays as it is.
    AppendPlain(rendered.substr(i - kCodeLen, kCodeLen), &prompt.text,
                &prompt.plain);
  }
  EncodeOptions options;
  options.parse_special = true;
  options.plain_ranges = prompt.plain;
  prompt.tokens = tokenizer_->Encode(prompt.text, options);
  const int32_t bos = tokenizer_->bos_id();
  if (tokenizer_->add_bos() && bos >= 0 &&
      (prompt.tokens.empty() || prompt.tokens.front() != bos)) {
    prompt.tokens.insert(prompt.tokens.begin(), bos);
  }
  return prompt;
}

absl::StatusOr<ChatPrompt> ChatPromptEncoder::Render(
    const ChatTemplate& chat_template, const nlohmann::ordered_json& context,
    const ChatRenderOptions& options) const {
  ASSIGN_OR_RETURN(const nlohmann::ordered_json protected_context,
                   Protect(context));
  ASSIGN_OR_RETURN(const std::string rendered,
                   chat_template.Render(protected_context, options));
  return Encode(rendered);
}

}  // namespace paceline::chat
