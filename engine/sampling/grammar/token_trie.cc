#include "engine/sampling/grammar/token_trie.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "engine/tokenizer/tokenizer.h"

namespace paceline::engine::grammar {

std::shared_ptr<const TokenTrie> TokenTrie::Create(
    std::vector<std::string> token_bytes, std::vector<int32_t> eog_ids) {
  std::shared_ptr<TokenTrie> t(new TokenTrie());
  t->bytes_ = std::move(token_bytes);
  t->eog_ids_ = std::move(eog_ids);
  std::vector<int32_t> order;
  for (int32_t id = 0; id < t->vocab_size(); ++id) {
    if (!t->bytes_[id].empty()) order.push_back(id);
  }
  // Sorted by bytes, a preorder walk is one pass: each token adds the nodes
  // of its suffix past the prefix it shares with the previous token.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return t->bytes_[a] < t->bytes_[b];
  });
  std::vector<int32_t> path = {0};  // node of each prefix length
  t->nodes_.push_back({0, 0, 0});
  std::vector<int32_t> owner;  // [token slot]: its node
  absl::string_view prev;
  for (int32_t id : order) {
    absl::string_view b = t->bytes_[id];
    size_t common = 0;
    while (common < prev.size() && common < b.size() &&
           prev[common] == b[common]) {
      ++common;
    }
    path.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      path.push_back(static_cast<int32_t>(t->nodes_.size()));
      t->nodes_.push_back(
          {0, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(b[d])});
    }
    owner.push_back(path.back());
    t->tokens_.push_back(id);
    t->max_depth_ = std::max(t->max_depth_, static_cast<int32_t>(b.size()));
    prev = b;
  }
  const int32_t n = static_cast<int32_t>(t->nodes_.size());
  // Subtree ends: a node's subtree runs until the next node no deeper.
  for (auto& node : t->nodes_) node.end = static_cast<uint32_t>(n);
  std::vector<int32_t> open;
  for (int32_t i = 0; i < n; ++i) {
    while (!open.empty() &&
           t->nodes_[open.back()].depth >= t->nodes_[i].depth) {
      t->nodes_[open.back()].end = static_cast<uint32_t>(i);
      open.pop_back();
    }
    open.push_back(i);
  }
  // Token slots are already in node order (tokens sorted by bytes).
  t->token_begin_.assign(n + 1, 0);
  for (int32_t node : owner) ++t->token_begin_[node + 1];
  std::partial_sum(t->token_begin_.begin(), t->token_begin_.end(),
                   t->token_begin_.begin());
  return t;
}

std::shared_ptr<const TokenTrie> TokenTrie::FromTokenizer(
    const Tokenizer& tok) {
  std::vector<std::string> bytes(tok.vocab_size());
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    // Control tokens spell nothing in text (TokenBytes is empty for them).
    bytes[id] = tok.TokenBytes(id);
    if (tok.IsEog(id)) eog.push_back(id);
  }
  return Create(std::move(bytes), std::move(eog));
}

}  // namespace paceline::engine::grammar
