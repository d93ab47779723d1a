#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_TOKEN_TRIE_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_TOKEN_TRIE_H_

// A vocabulary as the grammar engine sees it: each token's bytes, in a trie
// laid out in depth-first preorder, so a subtree is a contiguous range of
// nodes and a mask walk is a forward scan that skips whole subtrees.
//
// Node 0 is the root (the empty prefix). Node i's subtree is [i, end(i));
// its children are i + 1, end(i + 1), end(end(i + 1)), ... up to end(i).
// Tokens whose bytes are empty (control tokens, unused ids) are in no node:
// they never appear in text, so only the end-of-generation ids are ever
// allowed among them, where the grammar may end.
//
// Thread-safety: immutable after Create.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paceline::engine {
class Tokenizer;
}

namespace paceline::engine::grammar {

class TokenTrie {
 public:
  // `token_bytes[id]` is token id's text as bytes; `eog_ids` the ids that
  // end a generation (EOS, end of turn), each < token_bytes.size().
  static std::shared_ptr<const TokenTrie> Create(
      std::vector<std::string> token_bytes, std::vector<int32_t> eog_ids);
  // The tokenizer's TokenBytes and end-of-generation ids.
  static std::shared_ptr<const TokenTrie> FromTokenizer(const Tokenizer& tok);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  absl::string_view bytes(int32_t id) const { return bytes_[id]; }
  absl::Span<const int32_t> eog_ids() const { return eog_ids_; }

  // A node's fields together, for scans over the preorder array.
  struct Node {
    uint32_t end;    // one past its subtree
    uint16_t depth;  // its path's length
    uint8_t byte;    // the path's last byte (0 for the root)
  };
  const Node* nodes() const { return nodes_.data(); }
  const uint32_t* token_begin() const { return token_begin_.data(); }
  const int32_t* token_slots() const { return tokens_.data(); }

  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  uint32_t end(int32_t node) const { return nodes_[node].end; }
  uint8_t byte(int32_t node) const { return nodes_[node].byte; }
  int32_t depth(int32_t node) const { return nodes_[node].depth; }
  // The tokens spelled exactly by node's path.
  absl::Span<const int32_t> tokens(int32_t node) const {
    return absl::MakeConstSpan(tokens_.data() + token_begin_[node],
                               token_begin_[node + 1] - token_begin_[node]);
  }
  // Every token in node's subtree (the node's own first).
  absl::Span<const int32_t> subtree_tokens(int32_t node) const {
    return absl::MakeConstSpan(
        tokens_.data() + token_begin_[node],
        token_begin_[nodes_[node].end] - token_begin_[node]);
  }
  int32_t max_depth() const { return max_depth_; }

 private:
  TokenTrie() = default;

  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_ids_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> token_begin_;  // [node], [num_nodes]: into tokens_
  std::vector<int32_t> tokens_;
  int32_t max_depth_ = 0;
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_TOKEN_TRIE_H_
