#include "engine/sampling/grammar/mask_tables.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/row_sampling_math.h"

namespace paceline::engine::grammar {

struct SharedEntries::Entry {
  // The accepted tokens: a bitmask when many, a list when few.
  std::vector<uint32_t> dense;
  std::vector<int32_t> sparse;
  bool exit_at_root = false;
  // The tails: a trie over the remaining bytes; tail i stands for the
  // tokens tail_tokens[tail_begin[i] .. tail_begin[i + 1]).
  std::shared_ptr<const TokenTrie> tails;
  std::vector<uint32_t> tail_begin;
  std::vector<int32_t> tail_tokens;

  int64_t memory_bytes() const {
    int64_t n =
        static_cast<int64_t>(dense.size() * 4 + sparse.size() * 4 +
                             tail_begin.size() * 4 + tail_tokens.size() * 4);
    if (tails) n += tails->num_nodes() * 12;
    return n;
  }
};

namespace {

inline void SetBit(absl::Span<uint32_t> bits, int32_t id) {
  bits[id >> 5] |= 1u << (id & 31);
}

inline bool Simple(const RuleDfa& d, int32_t s) {
  return !d.accepting(s) && !d.has_calls(s);
}

}  // namespace

// What a walk found below one first byte: the tokens accepted and the
// tails, from a state reached with that byte. Entries of different states
// that reach the same state with the same byte (a key left at any node of
// a list, a string's body from its start) share it.
struct Subtree {
  std::vector<int32_t> tokens;
  std::vector<std::pair<std::string, int32_t>> tails;
  int64_t bytes() const {
    int64_t n = static_cast<int64_t>(tokens.size() * 4);
    for (const auto& t : tails) n += static_cast<int64_t>(t.first.size() + 8);
    return n;
  }
};

class SubtreeCache {
 public:
  std::shared_ptr<const Subtree> Find(uint64_t key) {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void Insert(uint64_t key, std::shared_ptr<const Subtree> s) {
    absl::MutexLock lock(&mu_);
    const int64_t b = s->bytes();
    if (map_.try_emplace(key, std::move(s)).second) bytes_ += b;
  }
  int64_t bytes() {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Subtree>> map_
      ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace {

// Subtrees smaller than this are walked again rather than cached.
constexpr uint32_t kMinCachedSubtree = 256;

// The walk that builds one Entry (see mask_tables.h): the vocabulary trie
// from one top frame, its frames below cut off.
class EntryBuilder {
 public:
  EntryBuilder(const CompiledGrammar& g, const TokenTrie& trie,
               SubtreeCache* subtrees)
      : g_(g),
        trie_(trie),
        subtrees_(subtrees),
        levels_(trie.max_depth() + 2),
        scan_(trie.max_depth() + 2),
        bits_(MaskWords(trie.vocab_size()), 0) {}

  std::shared_ptr<MaskTables::Entry> Build(const Frame& top) {
    auto entry = std::make_shared<MaskTables::Entry>();
    Stack base;
    base.push_back(top);
    entry->exit_at_root = CanFinish(g_, base);
    const RuleDfa& d = g_.rule(top.rule);
    if (Simple(d, top.state)) {
      WalkSimple(0, d, top.state, base);
    } else {
      levels_[0] = {base};
      WalkGeneral(0, 0);
    }
    Finish(entry.get());
    return entry;
  }

 private:
  void AcceptToken(int32_t id) {
    if (recording_ != nullptr) recording_->tokens.push_back(id);
    uint32_t& w = bits_[id >> 5];
    const uint32_t bit = 1u << (id & 31);
    count_ += (w & bit) == 0;
    w |= bit;
  }
  void Accept(int32_t node) {
    for (int32_t id : trie_.tokens(node)) AcceptToken(id);
  }

  // Every token below `node` fails inside the frame; those that passed a
  // point where the frame could return go on from there in the frames
  // below.
  void Fail(int32_t node) {
    if (exits_.empty()) return;
    for (int32_t id : trie_.subtree_tokens(node)) {
      absl::string_view bytes = trie_.bytes(id);
      for (int32_t at : exits_) {
        AddTail(std::string(bytes.substr(at)), id);
      }
    }
  }

  void AddTail(std::string tail, int32_t id) {
    if (recording_ != nullptr) recording_->tails.emplace_back(tail, id);
    tails_[std::move(tail)].push_back(id);
  }

  // The root's child `c` (a first byte), reached in state `t` of rule
  // `rule`: from the cache, or walked by `walk` and cached when big.
  template <typename Walk>
  void FirstByte(uint32_t c, RuleId rule, int32_t t, Walk walk) {
    const uint32_t size = trie_.end(c) - c;
    if (size < kMinCachedSubtree || subtrees_ == nullptr) {
      walk();
      return;
    }
    const uint64_t key = absl::HashOf(rule, t, c);
    if (std::shared_ptr<const Subtree> hit = subtrees_->Find(key)) {
      for (int32_t id : hit->tokens) AcceptToken(id);
      for (const auto& [tail, id] : hit->tails) AddTail(tail, id);
      return;
    }
    auto recorded = std::make_shared<Subtree>();
    recording_ = recorded.get();
    walk();
    recording_ = nullptr;
    subtrees_->Insert(key, std::move(recorded));
  }

  // One stack whose top state only moves by bytes: a table lookup per node,
  // in one forward scan of the subtree's preorder array (scan_[k] holds
  // the state after the path's first k bytes, so a node reads its
  // parent's at its depth - 1).
  void WalkSimple(int32_t node, const RuleDfa& d, int32_t state,
                  const Stack& stack) {
    const TokenTrie::Node* nodes = trie_.nodes();
    const uint32_t* begin = trie_.token_begin();
    const int32_t* slots = trie_.token_slots();
    const uint32_t end = nodes[node].end;
    scan_[nodes[node].depth] = state;
    for (uint32_t c = node + 1; c < end;) {
      const TokenTrie::Node& n = nodes[c];
      const int32_t t = d.Next(scan_[n.depth - 1], n.byte);
      if (node == 0 && t != RuleDfa::kDead && recording_ == nullptr &&
          n.end - c >= kMinCachedSubtree) {
        // A first byte: its subtree walked once for every state that
        // reaches `t` with it.
        FirstByte(c, stack.back().rule, t, [&] {
          for (uint32_t k = begin[c]; k < begin[c + 1]; ++k) {
            AcceptToken(slots[k]);
          }
          if (Simple(d, t)) {
            WalkSimple(c, d, t, stack);
          } else {
            Below(c, t, stack);
          }
        });
        c = n.end;
        continue;
      }
      if (t == RuleDfa::kDead) {
        Fail(c);
        c = n.end;
        continue;
      }
      for (uint32_t k = begin[c]; k < begin[c + 1]; ++k) AcceptToken(slots[k]);
      if (Simple(d, t)) {
        scan_[n.depth] = t;
        ++c;
        continue;
      }
      if (n.end != c + 1) Below(c, t, stack);
      c = n.end;
    }
  }

  // Walks below node `c`, reached in the non-simple state `t` with the
  // frames of `stack` (its top moved to `t`).
  void Below(uint32_t c, int32_t t, const Stack& stack) {
    std::vector<Stack>& next = levels_[trie_.depth(c)];
    next.clear();
    Stack moved = stack;
    moved.back().state = t;
    while (moved.size() > 1 &&
           g_.rule(moved.back().rule).final_only(moved.back().state)) {
      moved.pop_back();
    }
    next.push_back(std::move(moved));
    Continue(c);
  }

  // Any set of stacks.
  void WalkGeneral(int32_t node, int32_t depth) {
    const bool exit_here = depth > 0 && AnyCanFinishAtBase(levels_[depth]);
    if (exit_here) exits_.push_back(depth);
    const uint32_t end = trie_.end(node);
    for (uint32_t c = node + 1; c < end; c = trie_.end(c)) {
      std::vector<Stack>& next = levels_[depth + 1];
      StepAll(g_, levels_[depth], trie_.byte(c), &next);
      if (next.empty()) {
        Fail(c);
        continue;
      }
      Accept(c);
      if (trie_.end(c) == c + 1) continue;
      Continue(c);
    }
    if (exit_here) exits_.pop_back();
  }

  // Walks below `node`, whose stacks are levels_[depth(node)].
  void Continue(int32_t node) {
    const std::vector<Stack>& here = levels_[trie_.depth(node)];
    if (here.size() == 1) {
      const Frame& top = here[0].back();
      const RuleDfa& d = g_.rule(top.rule);
      if (Simple(d, top.state)) {
        WalkSimple(node, d, top.state, here[0]);
        return;
      }
    }
    WalkGeneral(node, trie_.depth(node));
  }

  // The base frame may return: some stack is just the base, able to end.
  bool AnyCanFinishAtBase(const std::vector<Stack>& stacks) const {
    return AnyCanFinish(g_, stacks);
  }

  void Finish(MaskTables::Entry* e) {
    const size_t words = bits_.size();
    if (static_cast<size_t>(count_) < words) {
      for (size_t w = 0; w < words; ++w) {
        for (uint32_t b = bits_[w]; b != 0; b &= b - 1) {
          e->sparse.push_back(static_cast<int32_t>(w * 32) + __builtin_ctz(b));
        }
      }
    } else {
      e->dense = std::move(bits_);
    }
    if (tails_.empty()) return;
    std::vector<std::string> strings;
    e->tail_begin.push_back(0);
    for (auto& [tail, ids] : tails_) {
      strings.push_back(tail);
      e->tail_tokens.insert(e->tail_tokens.end(), ids.begin(), ids.end());
      e->tail_begin.push_back(static_cast<uint32_t>(e->tail_tokens.size()));
    }
    e->tails = TokenTrie::Create(std::move(strings), {});
  }

  const CompiledGrammar& g_;
  const TokenTrie& trie_;
  SubtreeCache* const subtrees_;  // null: no sharing
  Subtree* recording_ = nullptr;  // what FirstByte's walk finds goes here too
  std::vector<std::vector<Stack>> levels_;  // [depth]: stacks there
  std::vector<int32_t> scan_;               // [depth]: WalkSimple's states
  std::vector<int32_t> exits_;  // depths on the path where the base returns
  absl::flat_hash_map<std::string, std::vector<int32_t>> tails_;
  std::vector<uint32_t> bits_;
  int64_t count_ = 0;
};

// ORs into `allowed` the tokens of `e`'s tails that `below` can read.
class TailWalker {
 public:
  TailWalker(const CompiledGrammar& g, const MaskTables::Entry& e,
             absl::Span<uint32_t> allowed)
      : g_(g), e_(e), trie_(*e.tails), allowed_(allowed) {
    levels_.resize(trie_.max_depth() + 2);
  }

  void Run(const Stack& below) {
    levels_[0] = {below};
    Walk(0);
  }

 private:
  void Walk(int32_t node) {
    const int32_t depth = trie_.depth(node);
    const uint32_t end = trie_.end(node);
    for (uint32_t c = node + 1; c < end; c = trie_.end(c)) {
      std::vector<Stack>& next = levels_[depth + 1];
      StepAll(g_, levels_[depth], trie_.byte(c), &next);
      if (next.empty()) continue;
      for (int32_t tail : trie_.tokens(c)) {
        for (uint32_t i = e_.tail_begin[tail]; i < e_.tail_begin[tail + 1];
             ++i) {
          SetBit(allowed_, e_.tail_tokens[i]);
        }
      }
      Walk(c);
    }
  }

  const CompiledGrammar& g_;
  const MaskTables::Entry& e_;
  const TokenTrie& trie_;
  absl::Span<uint32_t> allowed_;
  std::vector<std::vector<Stack>> levels_;
};

uint64_t Key(const Frame& f) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(f.rule)) << 32) |
         static_cast<uint32_t>(f.state);
}

}  // namespace

std::shared_ptr<const SharedEntries::Entry> SharedEntries::Find(
    uint64_t key) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void SharedEntries::Insert(uint64_t key, std::shared_ptr<const Entry> entry) {
  absl::MutexLock lock(&mu_);
  const int64_t bytes = entry->memory_bytes();
  if (!entries_.try_emplace(key, std::move(entry)).second) return;
  order_.push_back(key);
  memory_bytes_ += bytes;
  while (memory_bytes_ > budget_bytes_ && oldest_ < order_.size()) {
    auto it = entries_.find(order_[oldest_++]);
    memory_bytes_ -= it->second->memory_bytes();
    entries_.erase(it);
  }
  if (oldest_ > order_.size() / 2) {
    order_.erase(order_.begin(), order_.begin() + oldest_);
    oldest_ = 0;
  }
}

int64_t SharedEntries::memory_bytes() const {
  absl::MutexLock lock(&mu_);
  return memory_bytes_;
}

MaskTables::MaskTables(std::shared_ptr<const CompiledGrammar> grammar,
                       std::shared_ptr<const TokenTrie> vocab,
                       std::shared_ptr<SharedEntries> shared)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      shared_(std::move(shared)),
      subtrees_(std::make_unique<SubtreeCache>()) {}

MaskTables::~MaskTables() = default;

const MaskTables::Entry& MaskTables::Get(const Frame& top) {
  const uint64_t key = Key(top);
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return *it->second;
  }
  const uint64_t fingerprint = grammar_->rule(top.rule).fingerprint;
  const uint64_t shared_key =
      absl::HashOf(fingerprint, top.state, vocab_.get());
  std::shared_ptr<const Entry> built;
  if (shared_ != nullptr && fingerprint != 0) built = shared_->Find(shared_key);
  if (built == nullptr) {
    built = EntryBuilder(*grammar_, *vocab_, subtrees_.get()).Build(top);
    if (shared_ != nullptr && fingerprint != 0)
      shared_->Insert(shared_key, built);
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = entries_.try_emplace(key, std::move(built));
  if (inserted) memory_bytes_ += it->second->memory_bytes();
  return *it->second;
}

void MaskTables::FillStack(const Stack& stack, absl::Span<uint32_t> allowed) {
  const Entry& e = Get(stack.back());
  if (!e.dense.empty()) {
    for (size_t w = 0; w < e.dense.size(); ++w) allowed[w] |= e.dense[w];
  }
  for (int32_t id : e.sparse) SetBit(allowed, id);
  if (stack.size() == 1) return;  // the root returning ends the text
  Stack below = stack;
  below.pop_back();
  if (e.exit_at_root) FillStack(below, allowed);
  if (e.tails) TailWalker(*grammar_, e, allowed).Run(below);
}

void MaskTables::Fill(const std::vector<Stack>& stacks,
                      absl::Span<uint32_t> allowed) {
  for (const Stack& s : stacks) FillStack(s, allowed);
}

int64_t MaskTables::num_entries() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

int64_t MaskTables::memory_bytes() const {
  const int64_t subtrees = subtrees_->bytes();
  absl::MutexLock lock(&mu_);
  return memory_bytes_ + subtrees;
}

}  // namespace paceline::engine::grammar
