#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_MASK_TABLES_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_MASK_TABLES_H_

// Token masks of one compiled grammar over one vocabulary.
//
// Design (XGrammar's split of a mask into a stack-independent part and a
// rest, computed lazily). The mask of a configuration is the union over its
// stacks (pda.h); a stack's mask is decided by its top frame (R, s) except
// for tokens that finish R partway and go on in the frames below. So for
// each top frame the tables keep, computed on first use by one walk of the
// vocabulary trie from (R, s) with the frames below cut off:
//   - accepted: the tokens readable without ever returning from R's frame
//     (calls made on the way are followed; they are R's business);
//   - exit_at_root: R may return before the token's first byte, so every
//     token the frames below allow is allowed too (asked of them in turn);
//   - tails: for each token that can only go on by returning from R after
//     k >= 1 of its bytes, the token's remaining bytes, gathered in a small
//     trie of their own.
// A stack's mask is then accepted | (exit_at_root ? mask of the stack
// below : 0) | the tails the stack below can read — a walk over the tail
// trie (a few hundred nodes for a JSON string) rather than over the
// vocabulary. The first use of a state pays one walk over the vocabulary
// trie, pruned where the state refuses a byte; a state inside a string
// pays for the whole trie once.
//
// Derived entries. In a rule that calls nothing, the part of a state's
// entry below a first byte depends only on where that byte leads: on the
// automaton reachable from there (its "future", hashed up to isomorphism
// when small). States that agree on most first bytes' futures (a key left
// at any node of a property list's trie, against a plain string's body)
// therefore have nearly the same entry: such an entry starts as a word
// copy of a base entry whose bytes lead to the same futures, and only the
// first bytes that differ are cleared and walked again.
//
// Thread-safety: Fill may run concurrently from any thread (the tables are
// filled under a mutex, computed outside it).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/pda.h"
#include "engine/sampling/grammar/token_trie.h"

namespace paceline::engine::grammar {

class CountedStrings;
struct CountedRule;
class EntryBases;
struct TailSet;

// Entries of rules that call nothing depend only on the rule's automaton,
// so grammars over one vocabulary share them (a JSON string, a number, a
// pattern used by many schemas): this cache holds them, keyed by the
// rule's fingerprint (compile.h) and the state, up to a memory budget
// (oldest dropped first; the bases and the counted-string table below,
// a few MB at most, are outside it). One per vocabulary; thread-safe.
class SharedEntries {
 public:
  explicit SharedEntries(int64_t budget_bytes = int64_t{256} << 20);
  ~SharedEntries();
  SharedEntries(const SharedEntries&) = delete;
  SharedEntries& operator=(const SharedEntries&) = delete;

  struct Entry;
  std::shared_ptr<const Entry> Find(uint64_t key) const;
  void Insert(uint64_t key, std::shared_ptr<const Entry> entry);
  int64_t memory_bytes() const;
  // Entries that others are derived from (mask_tables.cc), for every
  // grammar over this vocabulary.
  EntryBases* bases() const { return bases_.get(); }
  // The vocabulary read as JSON string content (counted_strings.h), made
  // on first use; `vocab` is this one's vocabulary.
  std::shared_ptr<const CountedStrings> counted_strings(const TokenTrie& vocab);

 private:
  const int64_t budget_bytes_;
  const std::unique_ptr<EntryBases> bases_;
  absl::Mutex counted_mu_;
  std::shared_ptr<const CountedStrings> counted_ ABSL_GUARDED_BY(counted_mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Entry>> entries_
      ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const CountedStrings> counted_strings_ ABSL_GUARDED_BY(mu_);
  // [rule]: what Recognize said (null: not a counted string), once asked.
  absl::flat_hash_map<RuleId, std::shared_ptr<const CountedRule>> counted_rules_
      ABSL_GUARDED_BY(mu_);
  // Counted strings' tails, by CountedStrings::FillKey.
  absl::flat_hash_map<uint64_t, std::shared_ptr<const TailSet>> counted_tails_
      ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> order_ ABSL_GUARDED_BY(mu_);  // insertion order
  size_t oldest_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t memory_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

class SubtreeCache;

class MaskTables {
 public:
  // `shared` may be null (no sharing across grammars).
  MaskTables(std::shared_ptr<const CompiledGrammar> grammar,
             std::shared_ptr<const TokenTrie> vocab,
             std::shared_ptr<SharedEntries> shared = nullptr);
  ~MaskTables();
  MaskTables(const MaskTables&) = delete;
  MaskTables& operator=(const MaskTables&) = delete;

  // ORs into `allowed` (MaskWords(vocab_size) words) every token with
  // non-empty bytes that some stack of `stacks` can read in full. End of
  // generation is the caller's (CanFinish).
  void Fill(const std::vector<Stack>& stacks, absl::Span<uint32_t> allowed);

  const CompiledGrammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const CompiledGrammar>& grammar_shared() const {
    return grammar_;
  }
  const TokenTrie& vocab() const { return *vocab_; }
  // States whose tables exist, and their heap bytes.
  int64_t num_entries() const;
  int64_t memory_bytes() const;

  using Entry = SharedEntries::Entry;  // one top frame's tables

 private:
  const Entry& Get(const Frame& top);
  // The entry of a counted string's state at a character boundary
  // (counted_strings.h); null for any other state.
  std::shared_ptr<const Entry> CountedEntry(const Frame& top);
  void FillStack(const Stack& stack, absl::Span<uint32_t> allowed);

  const std::shared_ptr<const CompiledGrammar> grammar_;
  const std::shared_ptr<const TokenTrie> vocab_;
  const std::shared_ptr<SharedEntries> shared_;
  // Walks below a first byte, shared between the entries of states that
  // reach the same state with it (mask_tables.cc).
  const std::unique_ptr<SubtreeCache> subtrees_;
  // The bases of derived entries: shared_'s, else this grammar's own.
  const std::unique_ptr<EntryBases> own_bases_;
  EntryBases* const bases_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Entry>> entries_
      ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const CountedStrings> counted_strings_ ABSL_GUARDED_BY(mu_);
  // [rule]: what Recognize said (null: not a counted string), once asked.
  absl::flat_hash_map<RuleId, std::shared_ptr<const CountedRule>> counted_rules_
      ABSL_GUARDED_BY(mu_);
  // Counted strings' tails, by CountedStrings::FillKey.
  absl::flat_hash_map<uint64_t, std::shared_ptr<const TailSet>> counted_tails_
      ABSL_GUARDED_BY(mu_);
  int64_t memory_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_MASK_TABLES_H_
