// Byte-level BPE ("gpt2" model): pre-tokenize, map bytes to unicode, merge
// by rank.

#include <algorithm>
#include <queue>
#include <vector>

#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::engine {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t length;
  int32_t id;  // the token spelled by this symbol, -1 for none
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  int32_t result;
  size_t length;  // of both symbols when the bigram was made
};

// Lowest rank first; among equal ranks the leftmost pair.
struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::EncodeBpe(absl::string_view text,
                          std::vector<int32_t>* out) const {
  std::vector<uint32_t> cpts = DecodeUtf8Lenient(text);
  if (pretokenizer_->normalize_nfc()) NormalizeNfc(&cpts);
  std::string utf8;
  std::string word;
  size_t begin = 0;
  for (size_t len : pretokenizer_->SplitCodepoints(cpts)) {
    utf8.clear();
    for (size_t i = begin; i < begin + len; ++i) AppendUtf8(cpts[i], &utf8);
    begin += len;
    word.clear();
    for (char c : utf8)
      AppendUtf8(ByteToUnicode(static_cast<uint8_t>(c)), &word);
    EncodeBpeWord(word, out);
  }
}

// `word` is byte-encoded, so every character is one symbol of 1-2 bytes.
void Tokenizer::EncodeBpeWord(absl::string_view word,
                              std::vector<int32_t>* out) const {
  if (pretokenizer_->ignore_merges()) {
    if (const int32_t id = TokenId(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  for (size_t offset = 0; offset < word.size();) {
    const size_t len =
        std::min(Utf8LengthFromLeadByte(static_cast<uint8_t>(word[offset])),
                 word.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offset + len == word.size() ? -1 : index + 1,
                       offset, len, TokenId(word.substr(offset, len))});
    offset += len;
  }
  if (symbols.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t l = symbols[left].id;
    const int32_t r = symbols[right].id;
    if (l < 0 || r < 0) return;
    const auto it = merges_.find((static_cast<uint64_t>(l) << 32) |
                                 static_cast<uint32_t>(r));
    if (it == merges_.end()) return;
    queue.push({left, right, it->second.rank, it->second.result,
                symbols[left].length + symbols[right].length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Symbols only grow: an unchanged total means the pair is still current.
    if (left.length == 0 || right.length == 0 ||
        left.length + right.length != bigram.length) {
      continue;
    }
    left.length += right.length;
    left.id = bigram.result;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    if (symbols[i].id >= 0) {
      out->push_back(symbols[i].id);
      continue;
    }
    // A character that is not a token: llama.cpp looks each of its UTF-8
    // bytes up as a one-byte token and drops the misses.
    for (char c : word.substr(symbols[i].start, symbols[i].length)) {
      if (const int32_t id = TokenId(absl::string_view(&c, 1)); id >= 0) {
        out->push_back(id);
      }
    }
  }
}

}  // namespace paceline::engine
