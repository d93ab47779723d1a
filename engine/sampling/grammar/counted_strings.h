#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_COUNTED_STRINGS_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_COUNTED_STRINGS_H_

// Token masks of counted JSON strings (minLength / maxLength) by word
// operations, for MaskTables (mask_tables.h).
//
// A JSON string of min..max characters compiles to one automaton state per
// character position (and a few inside a character), so each position's
// first mask would walk the whole vocabulary. Instead the vocabulary is
// read once, as the content of a JSON string from a character boundary:
// a token is content only, needing `need` more characters (those it
// finishes, plus one it leaves unfinished), or content of `chars`
// characters then the closing quote (its bytes after the quote are read by
// what follows the string), or neither. At the boundary with k characters
// read, m = min - k (at least 0) and r = max - k: the tokens accepted are
// those needing at most r (a union kept per r) and those ending right after
// a quote with m <= chars <= r; those going on after such a quote are
// tails.
//
// A rule is read so only when its automaton is proven to be such a string:
// a breadth-first product with a model (the JSON string written here, with
// a character counter) pairs every reachable state with one (model state,
// count), and every transition and flag agrees. The model writes a
// character as json_text.h does; were the two to differ, no rule would be
// proven and masks would be walked as before.
//
// Thread-safety: safe to share; Recognize locks its memo.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/token_trie.h"

namespace paceline::engine::grammar {

// A rule proven to be a JSON string of min..max characters.
struct CountedRule {
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  int64_t min = 0;
  int64_t max = kUnbounded;
  // [state]: the characters read, for a state at a character boundary
  // inside the quotes; -1 for the others (before the opening quote, inside
  // a character, after the closing quote).
  std::vector<int64_t> count;
};

class CountedStrings {
 public:
  // Reads every token of `vocab` (which must outlive this).
  explicit CountedStrings(const TokenTrie& vocab);
  CountedStrings(const CountedStrings&) = delete;
  CountedStrings& operator=(const CountedStrings&) = delete;

  // Null unless `rule` (a rule that calls nothing) is proven a counted
  // JSON string. The answers are kept by the rule's fingerprint.
  std::shared_ptr<const CountedRule> Recognize(const RuleDfa& rule) const;

  // At a boundary with at least m and at most r characters to go (r may
  // be CountedRule::kUnbounded): ORs into `bits` (MaskWords(vocab size)
  // words) the tokens read whole, and calls `tail(bytes, id)` for each
  // token going on after the closing quote with `bytes` after it.
  template <typename Tail>
  void Fill(int64_t m, int64_t r, absl::Span<uint32_t> bits, Tail tail) const {
    const std::vector<uint32_t>& within =
        within_[r < max_need_ ? r : max_need_];
    for (size_t w = 0; w < within.size(); ++w) bits[w] |= within[w];
    for (const Closing& c : closings_) {
      if (c.chars < m || c.chars > r) continue;
      const absl::string_view bytes = vocab_.bytes(c.id);
      if (c.after_quote == bytes.size()) {
        bits[c.id >> 5] |= 1u << (c.id & 31);
      } else {
        tail(bytes.substr(c.after_quote), c.id);
      }
    }
  }

  // The (m, r) pairs that Fill treats alike map to one key.
  uint64_t FillKey(int64_t m, int64_t r) const;

 private:
  struct Closing {
    int64_t chars;         // characters before the quote
    int32_t id;            // the token
    uint32_t after_quote;  // its bytes through the quote
  };

  void Read(int32_t node, int32_t state, int64_t chars);
  std::shared_ptr<const CountedRule> Prove(const RuleDfa& rule) const;

  const TokenTrie& vocab_;
  std::shared_ptr<const CompiledGrammar> model_;  // one rule: the string
  std::vector<int32_t> representative_;  // [model state]: its class's least
  std::vector<std::vector<int32_t>> by_need_;  // [need]: token ids
  std::vector<std::vector<uint32_t>> within_;  // [r]: needing at most r
  int64_t max_need_ = 0;
  int64_t max_chars_ = 0;  // the most characters before a closing quote
  std::vector<Closing> closings_;

  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<uint64_t, std::shared_ptr<const CountedRule>>
      recognized_ ABSL_GUARDED_BY(mu_);  // by fingerprint
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_COUNTED_STRINGS_H_
