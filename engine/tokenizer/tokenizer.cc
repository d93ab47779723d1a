#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::engine {
namespace {

constexpr uint8_t kLstrip = 1;
constexpr uint8_t kRstrip = 2;

// Token texts llama.cpp treats as control tokens whatever their type: end of
// turn/message and fill-in-the-middle markers. The first group also ends
// generation.
constexpr absl::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
};
constexpr absl::string_view kFimTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>",
    "<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>",  "<SUF>",
    "<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>",   "<MID>",
    "<|fim_pad|>",    "<fim-pad>",    "<PAD>",           "<|fim_repo|>",
    "<|repo_name|>",  "<fim-repo>",   "<REPO>",          "<|file_sep|>",
};
// FIM markers that also end generation (pad, repo, file separator).
constexpr absl::string_view kFimEogTexts[] = {
    "<|fim_pad|>",   "<fim-pad>",  "<PAD>",  "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>", "<|file_sep|>",
};

template <size_t N>
bool OneOf(absl::string_view text, const absl::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of an SPM byte token "<0xAB>", or -1.
int ParseByteToken(absl::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') {
    return -1;
  }
  const int hi = HexValue(text[3]);
  const int lo = HexValue(text[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

absl::Status CheckId(int32_t id, size_t n, absl::string_view key) {
  if (id < -1 || id >= static_cast<int64_t>(n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, ": token id ", id, " is outside the vocabulary (", n, " tokens)"));
  }
  return absl::OkStatus();
}

// A normal SPM token's output bytes: U+2581 '▁' becomes a space.
std::string SpmTokenBytes(absl::string_view text) {
  std::string bytes;
  for (size_t k = 0; k < text.size(); ++k) {
    if (text.compare(k, 3, "\xE2\x96\x81") == 0) {
      bytes.push_back(' ');
      k += 2;
    } else {
      bytes.push_back(text[k]);
    }
  }
  return bytes;
}

// A normal byte-level BPE token's output bytes: GPT-2's byte-to-unicode
// mapping undone; codepoints outside it are kept as UTF-8.
std::string BpeTokenBytes(absl::string_view text) {
  std::string bytes;
  for (uint32_t cpt : DecodeUtf8Lenient(text)) {
    const int byte = UnicodeToByte(cpt);
    if (byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
    } else {
      AppendUtf8(cpt, &bytes);
    }
  }
  return bytes;
}

// Checks what Create needs of `vocab` before building anything, and fills
// the optional arrays (scores, types) with their defaults.
absl::Status CheckVocab(TokenizerVocab* vocab) {
  const size_t n = vocab->tokens.size();
  if (vocab->model != "llama" && vocab->model != "gpt2") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.ggml.model: unsupported tokenizer model '",
                     vocab->model, "' (supported: llama, gpt2)"));
  }
  if (n == 0) {
    return absl::InvalidArgumentError("tokenizer.ggml.tokens: no tokens");
  }
  if (n > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("tokenizer.ggml.tokens: too many tokens");
  }
  if (vocab->scores.empty()) vocab->scores.assign(n, 0.0f);
  if (vocab->scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.ggml.scores has ", vocab->scores.size(),
                     " entries but tokenizer.ggml.tokens has ", n));
  }
  if (vocab->token_types.empty()) {
    vocab->token_types.assign(n, TokenType::kNormal);
  }
  if (vocab->token_types.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.ggml.token_type has ", vocab->token_types.size(),
        " entries but tokenizer.ggml.tokens has ", n));
  }
  RETURN_IF_ERROR(CheckId(vocab->bos_id, n, "tokenizer.ggml.bos_token_id"));
  RETURN_IF_ERROR(CheckId(vocab->eos_id, n, "tokenizer.ggml.eos_token_id"));
  RETURN_IF_ERROR(CheckId(vocab->unk_id, n, "tokenizer.ggml.unknown_token_id"));
  RETURN_IF_ERROR(CheckId(vocab->pad_id, n, "tokenizer.ggml.padding_token_id"));
  if (vocab->add_bos && vocab->bos_id < 0) {
    return absl::InvalidArgumentError(
        "tokenizer.ggml.add_bos_token is true but the model has no BOS "
        "token (tokenizer.ggml.bos_token_id)");
  }
  if (vocab->add_eos && vocab->eos_id < 0) {
    return absl::InvalidArgumentError(
        "tokenizer.ggml.add_eos_token is true but the model has no EOS "
        "token (tokenizer.ggml.eos_token_id)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(
    TokenizerVocab vocab) {
  RETURN_IF_ERROR(CheckVocab(&vocab));
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->is_spm_ = vocab.model == "llama";
  t->model_ = vocab.model;
  t->pre_ = vocab.pre;
  t->bos_id_ = vocab.bos_id;
  t->eos_id_ = vocab.eos_id;
  t->unk_id_ = vocab.unk_id;
  t->pad_id_ = vocab.pad_id;
  t->add_bos_ = vocab.add_bos;
  t->add_eos_ = vocab.add_eos;
  t->add_space_prefix_ = vocab.add_space_prefix;
  t->tokens_ = std::move(vocab.tokens);
  t->scores_ = std::move(vocab.scores);
  t->types_ = std::move(vocab.token_types);
  RETURN_IF_ERROR(t->IndexTokens(vocab.eog_ids));
  t->ApplyEogWorkarounds();
  RETURN_IF_ERROR(t->MarkStrips(vocab.lstrip_ids, vocab.rstrip_ids));
  if (t->is_spm_) {
    t->FindByteTokens();
  } else {
    RETURN_IF_ERROR(t->InitBpe(vocab.merges));
  }
  t->ListSpecialTokens();
  t->ComputeTokenBytes();
  return t;
}

absl::Status Tokenizer::IndexTokens(absl::Span<const int32_t> eog_ids) {
  const size_t n = tokens_.size();
  eog_.assign(n, false);
  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& text = tokens_[i];
    if (text.empty()) text = absl::StrCat("[EMPTY_", i, "]");
    token_to_id_[text] = static_cast<int32_t>(i);  // the last id wins
    TokenType& type = types_[i];
    if (type == TokenType::kByte && ParseByteToken(text) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.token_type: token ", i, " '", text,
                       "' is a byte token but not spelled <0xXX>"));
    }
    if (OneOf(text, kEndOfTurnTexts) || OneOf(text, kFimTexts)) {
      type = TokenType::kControl;
    }
    eog_[i] = OneOf(text, kEndOfTurnTexts) || OneOf(text, kFimEogTexts);
  }
  if (eos_id_ >= 0) eog_[eos_id_] = true;
  for (int32_t id : eog_ids) {
    RETURN_IF_ERROR(CheckId(id, n, "end-of-generation token"));
    if (id >= 0) eog_[id] = true;
  }
  return absl::OkStatus();
}

// llama.cpp's exceptions to the end-of-turn texts: gpt-oss (harmony) and
// solar-open end a message with "<|end|>" but the turn with "<|return|>" /
// "<|call|>" (or "<|calls|>" / "<|flush|>"), so "<|end|>" is an ordinary
// user-defined token there. ("</s>", which llama.cpp also names for one
// family, is left out: it ends generation where it is the EOS token.)
void Tokenizer::ApplyEogWorkarounds() {
  const auto eog_text = [this](absl::string_view text) {
    const int32_t id = TokenId(text);
    return id >= 0 && eog_[id] ? id : -1;
  };
  const bool has_return = eog_text("<|return|>") >= 0;
  const bool has_call = eog_text("<|call|>") >= 0 || eog_text("<|calls|>") >= 0;
  const bool has_flush = eog_text("<|flush|>") >= 0;
  const int32_t end = eog_text("<|end|>");
  if (end >= 0 && has_call && (has_return || has_flush)) {
    eog_[end] = false;
    types_[end] = TokenType::kUserDefined;
  }
}

absl::Status Tokenizer::MarkStrips(absl::Span<const int32_t> lstrip_ids,
                                   absl::Span<const int32_t> rstrip_ids) {
  const size_t n = tokens_.size();
  strip_.assign(n, 0);
  for (int32_t id : rstrip_ids) {
    RETURN_IF_ERROR(CheckId(id, n, "rstrip token"));
    if (id >= 0) strip_[id] |= kRstrip;
  }
  for (int32_t id : lstrip_ids) {
    RETURN_IF_ERROR(CheckId(id, n, "lstrip token"));
    if (id >= 0) strip_[id] |= kLstrip;
  }
  return absl::OkStatus();
}

void Tokenizer::FindByteTokens() {
  byte_tokens_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = TokenId(absl::string_view(name, sizeof(name)));
    if (id < 0) id = TokenId(std::string(1, static_cast<char>(b)));
    byte_tokens_[b] = id;
  }
}

absl::Status Tokenizer::InitBpe(const std::vector<std::string>& merges) {
  ASSIGN_OR_RETURN(PreTokenizer pretokenizer,
                   PreTokenizer::Create(pre_.empty() ? "default" : pre_));
  pretokenizer_ = std::make_unique<PreTokenizer>(std::move(pretokenizer));
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const absl::string_view merge = merges[rank];
    const size_t space = merge.find(' ', 1);
    const auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer.ggml.merges[", rank, "] '", merge, "': ", what));
    };
    if (space == absl::string_view::npos) return error("no space separator");
    const absl::string_view left_text = merge.substr(0, space);
    const absl::string_view right_text = merge.substr(space + 1);
    const int32_t left = TokenId(left_text);
    const int32_t right = TokenId(right_text);
    if (left < 0 || right < 0) return error("names an unknown token");
    const int32_t result = TokenId(absl::StrCat(left_text, right_text));
    if (result < 0) return error("the merged text is not a token");
    const uint64_t key =
        (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
    // The first occurrence of a pair keeps its rank, as in llama.cpp.
    merges_.try_emplace(key, Merge{static_cast<int32_t>(rank), result});
  }
  return absl::OkStatus();
}

void Tokenizer::ListSpecialTokens() {
  for (size_t i = 0; i < types_.size(); ++i) {
    const TokenType type = types_[i];
    if (type == TokenType::kUserDefined) {
      user_defined_ids_.push_back(static_cast<int32_t>(i));
    }
    if (type == TokenType::kUserDefined || type == TokenType::kControl ||
        type == TokenType::kUnknown) {
      special_ids_.push_back(static_cast<int32_t>(i));
    }
  }
  const auto longer_first = [this](int32_t a, int32_t b) {
    return tokens_[a].size() > tokens_[b].size();
  };
  std::stable_sort(user_defined_ids_.begin(), user_defined_ids_.end(),
                   longer_first);
  std::stable_sort(special_ids_.begin(), special_ids_.end(), longer_first);
}

void Tokenizer::ComputeTokenBytes() {
  bytes_.resize(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& text = tokens_[i];
    std::string& bytes = bytes_[i];
    switch (types_[i]) {
      case TokenType::kUserDefined:
        bytes = text;
        break;
      case TokenType::kByte:
        bytes.push_back(static_cast<char>(ParseByteToken(text)));
        break;
      case TokenType::kNormal:
        bytes = is_spm_ ? SpmTokenBytes(text) : BpeTokenBytes(text);
        break;
      default:  // control, unknown, unused, undefined: no text
        break;
    }
    max_token_bytes_ =
        std::max({max_token_bytes_, bytes.size(), text.size()});
  }
}

TokenType Tokenizer::token_type(int32_t id) const {
  return (id >= 0 && id < vocab_size()) ? types_[id] : TokenType::kUndefined;
}

bool Tokenizer::IsControl(int32_t id) const {
  return token_type(id) == TokenType::kControl;
}

bool Tokenizer::IsEog(int32_t id) const {
  return id >= 0 && id < vocab_size() && eog_[id];
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  return (id >= 0 && id < vocab_size()) ? tokens_[id] : EmptyString();
}

float Tokenizer::TokenScore(int32_t id) const {
  return (id >= 0 && id < vocab_size()) ? scores_[id] : 0.0f;
}

int32_t Tokenizer::TokenId(absl::string_view text) const {
  const auto it =
      token_to_id_.find(absl::string_view(text.data(), text.size()));
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string& Tokenizer::TokenBytes(int32_t id) const {
  return (id >= 0 && id < vocab_size()) ? bytes_[id] : EmptyString();
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id);
  return out;
}

std::vector<Tokenizer::Fragment> Tokenizer::Partition(
    absl::string_view text, bool parse_special,
    absl::Span<const TextRange> plain) const {
  // Whether [begin, begin + size) of `text` overlaps a plain range.
  const auto in_plain = [&](const char* at, size_t size) {
    const size_t begin = static_cast<size_t>(at - text.data());
    const auto it = std::upper_bound(
        plain.begin(), plain.end(), begin,
        [](size_t offset, const TextRange& r) { return offset < r.end; });
    return it != plain.end() && it->begin < begin + size;
  };
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t id : parse_special ? special_ids_ : user_defined_ids_) {
    const absl::string_view needle = tokens_[id];
    const bool guarded =
        !plain.empty() && types_[id] != TokenType::kUserDefined;
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0 ||
          fragment.text.find(needle) == absl::string_view::npos) {
        next.push_back(fragment);
        continue;
      }
      absl::string_view rest = fragment.text;
      size_t from = 0;
      size_t match;
      while ((match = rest.find(needle, from)) != absl::string_view::npos) {
        if (guarded && in_plain(rest.data() + match, needle.size())) {
          from = match + 1;
          continue;
        }
        from = 0;
        absl::string_view left = rest.substr(0, match);
        if (strip_[id] & kLstrip) {
          while (!left.empty() && IsAsciiSpace(left.back())) {
            left.remove_suffix(1);
          }
        }
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, needle});
        rest.remove_prefix(match + needle.size());
        if (strip_[id] & kRstrip) {
          while (!rest.empty() && IsAsciiSpace(rest.front())) {
            rest.remove_prefix(1);
          }
        }
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    fragments.swap(next);
  }
  return fragments;
}

std::vector<int32_t> Tokenizer::Encode(absl::string_view text,
                                       bool add_bos) const {
  EncodeOptions options;
  options.add_bos = add_bos;
  return Encode(text, options);
}

std::vector<int32_t> Tokenizer::Encode(absl::string_view text,
                                       const EncodeOptions& options) const {
  std::vector<int32_t> out;
  if (options.add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  // SPM puts a space before the text and after every special token.
  bool after_special = true;
  std::string escaped;
  for (const Fragment& fragment :
       Partition(text, options.parse_special, options.plain_ranges)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    if (!is_spm_) {
      EncodeBpe(fragment.text, &out);
      continue;
    }
    escaped.clear();
    if (add_space_prefix_ && after_special) escaped = "\xE2\x96\x81";
    for (char c : fragment.text) {
      if (c == ' ') {
        escaped += "\xE2\x96\x81";
      } else {
        escaped.push_back(c);
      }
    }
    EncodeSpm(escaped, &out);
    after_special = false;
  }
  return out;
}

}  // namespace paceline::engine
