// SentencePiece-style BPE ("llama" model): merges by token score.

#include <algorithm>
#include <queue>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::engine {
namespace {

// A stretch of the text, linked to its neighbours; merged-away symbols keep
// length 0.
struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t length;
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t length;  // of both symbols when the bigram was made
};

// Highest score first; among equal scores the leftmost pair.
struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

// `text` is already escaped (spaces are U+2581). Symbols start as UTF-8
// characters cut by their lead byte alone, so invalid bytes survive to the
// byte fallback untouched.
void Tokenizer::EncodeSpm(absl::string_view text,
                          std::vector<int32_t>* out) const {
  std::vector<Symbol> symbols;
  for (size_t offset = 0; offset < text.size();) {
    const size_t len =
        std::min(Utf8LengthFromLeadByte(static_cast<uint8_t>(text[offset])),
                 text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    offset += len;
    symbols.push_back(
        {index - 1, offset == text.size() ? -1 : index + 1, offset - len, len});
  }
  if (symbols.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t id = TokenId(text.substr(symbols[left].start, length));
    if (id < 0) return;
    queue.push({left, right, scores_[id], length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Symbols only grow, so an unchanged total length means neither side
    // has merged since the bigram was made.
    if (left.length == 0 || right.length == 0 ||
        left.length + right.length != bigram.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    const absl::string_view piece =
        text.substr(symbols[i].start, symbols[i].length);
    const int32_t id = TokenId(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // Byte fallback. Only unmerged single characters get here: a merge
    // always produces a token.
    for (char c : piece) {
      const int32_t byte_id = byte_tokens_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) {
        out->push_back(byte_id);
      } else if (unk_id_ >= 0) {
        out->push_back(unk_id_);
      }
    }
  }
}

}  // namespace paceline::engine
