#include "engine/sampling/grammar/mask_tables.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/counted_strings.h"
#include "engine/sampling/row_sampling_math.h"

namespace paceline::engine::grammar {

// Tokens that go on after their state's rule returned partway: their
// remaining bytes in a trie; tail i stands for the tokens
// tokens[begin[i] .. begin[i + 1]).
struct TailSet {
  std::shared_ptr<const TokenTrie> trie;
  std::vector<uint32_t> begin;
  std::vector<int32_t> tokens;
  int64_t memory_bytes() const {
    return static_cast<int64_t>(begin.size() * 4 + tokens.size() * 4) +
           trie->num_nodes() * 12;
  }
};

struct SharedEntries::Entry {
  // The accepted tokens: a bitmask when many, a list when few.
  std::vector<uint32_t> dense;
  std::vector<int32_t> sparse;
  bool exit_at_root = false;
  // The tails: its own, and a derived entry's base's but for the tokens
  // whose first byte is in base_skip (bit b of word b / 64).
  std::shared_ptr<const TailSet> tails;
  std::shared_ptr<const TailSet> base_tails;
  std::array<uint64_t, 4> base_skip{};

  int64_t memory_bytes() const {
    int64_t n = static_cast<int64_t>(dense.size() * 4 + sparse.size() * 4);
    if (tails) n += tails->memory_bytes();
    return n;
  }
};

namespace {

inline void SetBit(absl::Span<uint32_t> bits, int32_t id) {
  bits[id >> 5] |= 1u << (id & 31);
}

// Without -mpopcnt, __builtin_popcount is a library call.
inline int PopCount(uint32_t w) {
  w = w - ((w >> 1) & 0x55555555u);
  w = (w & 0x33333333u) + ((w >> 2) & 0x33333333u);
  return static_cast<int>((((w + (w >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24);
}

// A bitmask of accepted tokens into `e`: kept when many, listed when few.
void SetAccepted(std::vector<uint32_t> bits, SharedEntries::Entry* e) {
  size_t count = 0;
  for (uint32_t w : bits) count += PopCount(w);
  if (count < bits.size()) {
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint32_t b = bits[w]; b != 0; b &= b - 1) {
        e->sparse.push_back(static_cast<int32_t>(w * 32) + __builtin_ctz(b));
      }
    }
  } else {
    e->dense = std::move(bits);
  }
}

using Tails = absl::flat_hash_map<std::string, std::vector<int32_t>>;

std::shared_ptr<const TailSet> MakeTailSet(const Tails& tails) {
  if (tails.empty()) return nullptr;
  auto set = std::make_shared<TailSet>();
  std::vector<std::string> strings;
  set->begin.push_back(0);
  for (const auto& [tail, ids] : tails) {
    strings.push_back(tail);
    set->tokens.insert(set->tokens.end(), ids.begin(), ids.end());
    set->begin.push_back(static_cast<uint32_t>(set->tokens.size()));
  }
  set->trie = TokenTrie::Create(std::move(strings), {});
  return set;
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

// Where a byte leads in a rule that calls nothing, up to isomorphism of
// the automaton reachable from there: a hash of its canonical form (states
// numbered as a breadth-first search in byte order meets them, each
// state's flags and its transitions as maximal byte runs, so the rule's
// byte classes do not matter). Two independent 64-bit hashes. Futures of
// more than kMaxFutureStates states are not computed (unknown).
struct Future {
  uint64_t a = 0;
  uint64_t b = 0;
  bool known = true;
  bool dead() const { return known && a == 0 && b == 0; }
  friend bool operator==(const Future& x, const Future& y) {
    return x.known && y.known && x.a == y.a && x.b == y.b;
  }
  friend bool operator!=(const Future& x, const Future& y) { return !(x == y); }
};

constexpr size_t kMaxFutureStates = 64;

class FutureHasher {
 public:
  explicit FutureHasher(const RuleDfa& d) : d_(d), ids_(d.num_states(), -1) {
    for (int b = 0; b < 256; ++b) {
      if (b == 0 || d.byte_class[b] != d.byte_class[b - 1]) {
        runs_.push_back({static_cast<uint8_t>(b), d.byte_class[b]});
      }
    }
  }

  Future Of(int32_t state) {
    if (state == RuleDfa::kDead) return Future{};
    auto [it, inserted] = memo_.try_emplace(state);
    if (inserted) it->second = Compute(state);
    return it->second;
  }

 private:
  Future Compute(int32_t start) {
    Future unknown;
    unknown.known = false;
    for (int32_t s : order_) ids_[s] = -1;
    order_.clear();
    code_.clear();
    ids_[start] = 0;
    order_.push_back(start);
    for (size_t i = 0; i < order_.size(); ++i) {
      const int32_t s = order_[i];
      if (d_.has_calls(s)) return unknown;
      const int32_t* row =
          d_.next.data() + static_cast<size_t>(s) * d_.num_classes;
      code_.push_back(0x80000000u | (d_.flags[s] & 7u));
      int64_t prev = -2;
      for (const auto& [byte, cls] : runs_) {
        const int32_t n = row[cls];
        int64_t id = -1;
        if (n != RuleDfa::kDead) {
          if (ids_[n] < 0) {
            if (order_.size() >= kMaxFutureStates) return unknown;
            ids_[n] = static_cast<int32_t>(order_.size());
            order_.push_back(n);
          }
          id = ids_[n];
        }
        if (id == prev) continue;
        prev = id;
        code_.push_back(byte);
        code_.push_back(static_cast<uint32_t>(id + 1));
      }
    }
    Future f;
    f.a = absl::HashOf(absl::MakeConstSpan(code_)) | 1;
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (uint32_t w : code_) {
      for (int k = 0; k < 4; ++k) {
        h = (h ^ ((w >> (8 * k)) & 0xff)) * 0x100000001b3ull;
      }
    }
    f.b = h;
    return f;
  }

  const RuleDfa& d_;
  std::vector<std::pair<uint8_t, uint8_t>> runs_;  // (first byte, class)
  absl::flat_hash_map<int32_t, Future> memo_;
  std::vector<int32_t> ids_;    // [state]: its number in order_, or -1
  std::vector<int32_t> order_;  // the states met, in canonical order
  std::vector<uint32_t> code_;
};

// A state's futures after each first byte (indexed by byte; the root's
// children only) and the one that covers the most tokens.
struct Signature {
  std::array<Future, 256> after;
  Future majority;
};

}  // namespace

// Entries others are derived from, keyed by their majority future (and
// the vocabulary): the first dense entry of a state with that majority.
class EntryBases {
 public:
  struct Base {
    Signature sig;
    std::shared_ptr<const SharedEntries::Entry> entry;
  };
  std::shared_ptr<const Base> Find(uint64_t key) {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void Insert(uint64_t key, std::shared_ptr<const Base> base) {
    absl::MutexLock lock(&mu_);
    if (map_.size() < kMaxBases) map_.try_emplace(key, std::move(base));
  }

 private:
  static constexpr size_t kMaxBases = 256;
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Base>> map_
      ABSL_GUARDED_BY(mu_);
};

namespace {

// The walk that builds one Entry (see mask_tables.h): the vocabulary trie
// from one top frame, its frames below cut off.
class EntryBuilder {
 public:
  EntryBuilder(const CompiledGrammar& g, const TokenTrie& trie,
               SubtreeCache* subtrees, EntryBases* bases)
      : g_(g),
        trie_(trie),
        subtrees_(subtrees),
        bases_(bases),
        levels_(trie.max_depth() + 2),
        scan_(trie.max_depth() + 2),
        bits_(MaskWords(trie.vocab_size()), 0) {}

  std::shared_ptr<MaskTables::Entry> Build(const Frame& top) {
    auto entry = std::make_shared<MaskTables::Entry>();
    Stack base;
    base.push_back(top);
    entry->exit_at_root = CanFinish(g_, base);
    const RuleDfa& d = g_.rule(top.rule);
    if (Simple(d, top.state) && d.fingerprint != 0 && bases_ != nullptr) {
      BuildFromBase(d, top.state, base, entry.get());
      return entry;
    }
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
  // A Simple state of a rule that calls nothing: derived from a base entry
  // (mask_tables.h) when one agrees on most first bytes, else walked and
  // offered as a base.
  void BuildFromBase(const RuleDfa& d, int32_t state, const Stack& base_stack,
                     MaskTables::Entry* entry) {
    Signature sig = SignatureOf(d, state);
    const uint64_t key = absl::HashOf(sig.majority.a, sig.majority.b, &trie_);
    std::shared_ptr<const EntryBases::Base> base;
    if (sig.majority.known && !sig.majority.dead()) base = bases_->Find(key);
    if (base != nullptr && base->entry->base_tails == nullptr &&
        Derive(d, state, base_stack, sig, *base, entry)) {
      Finish(entry);
      return;
    }
    WalkSimple(0, d, state, base_stack);
    Finish(entry);
    if (base == nullptr && sig.majority.known && !sig.majority.dead() &&
        !entry->dense.empty()) {
      auto made = std::make_shared<EntryBases::Base>();
      made->sig = sig;
      // A copy: `entry` is the caller's, not yet shared.
      made->entry = std::make_shared<const MaskTables::Entry>(*entry);
      bases_->Insert(key, std::move(made));
    }
  }

  Signature SignatureOf(const RuleDfa& d, int32_t state) {
    Signature sig;
    FutureHasher hasher(d);
    absl::flat_hash_map<uint64_t, int64_t> weight;  // future -> tokens
    const TokenTrie::Node* nodes = trie_.nodes();
    const uint32_t* begin = trie_.token_begin();
    for (uint32_t c = 1; c < nodes[0].end; c = nodes[c].end) {
      const uint8_t byte = nodes[c].byte;
      Future f = hasher.Of(d.Next(state, byte));
      sig.after[byte] = f;
      if (!f.known || f.dead()) continue;
      weight[f.a ^ (f.b * 31)] += begin[nodes[c].end] - begin[c];
    }
    int64_t best = 0;
    for (uint32_t c = 1; c < nodes[0].end; c = nodes[c].end) {
      const Future& f = sig.after[nodes[c].byte];
      if (!f.known || f.dead()) continue;
      const int64_t w = weight[f.a ^ (f.b * 31)];
      if (w > best) {
        best = w;
        sig.majority = f;
      }
    }
    if (best == 0) sig.majority.known = false;
    return sig;
  }

  // The base's bits and tails less the first bytes whose futures differ,
  // which are walked. False (nothing done) when those cover more than half
  // the vocabulary.
  bool Derive(const RuleDfa& d, int32_t state, const Stack& base_stack,
              const Signature& sig, const EntryBases::Base& base,
              MaskTables::Entry* entry) {
    const TokenTrie::Node* nodes = trie_.nodes();
    const uint32_t* begin = trie_.token_begin();
    std::array<bool, 256> differs{};
    int64_t walked = 0;
    for (uint32_t c = 1; c < nodes[0].end; c = nodes[c].end) {
      const uint8_t byte = nodes[c].byte;
      if (sig.after[byte] == base.sig.after[byte]) continue;
      differs[byte] = true;
      walked += begin[nodes[c].end] - begin[c];
    }
    if (walked * 2 > begin[nodes[0].end]) return false;
    const MaskTables::Entry& from = *base.entry;
    bits_ = from.dense;
    const int32_t* slots = trie_.token_slots();
    for (uint32_t c = 1; c < nodes[0].end; c = nodes[c].end) {
      if (!differs[nodes[c].byte] || base.sig.after[nodes[c].byte].dead()) {
        continue;
      }
      for (uint32_t k = begin[c]; k < begin[nodes[c].end]; ++k) {
        bits_[slots[k] >> 5] &= ~(1u << (slots[k] & 31));
      }
    }
    entry->base_tails = from.tails;
    for (int b = 0; b < 256; ++b) {
      if (differs[b]) entry->base_skip[b >> 6] |= uint64_t{1} << (b & 63);
    }
    root_filter_ = &differs;
    WalkSimple(0, d, state, base_stack);
    root_filter_ = nullptr;
    return true;
  }

  void AcceptToken(int32_t id) {
    if (recording_ != nullptr) recording_->tokens.push_back(id);
    bits_[id >> 5] |= 1u << (id & 31);
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
      if (root_filter_ != nullptr && n.depth == 1 && !(*root_filter_)[n.byte]) {
        c = n.end;
        continue;
      }
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
    SetAccepted(std::move(bits_), e);
    e->tails = MakeTailSet(tails_);
  }

  const CompiledGrammar& g_;
  const TokenTrie& trie_;
  SubtreeCache* const subtrees_;  // null: no sharing
  EntryBases* const bases_;       // null: nothing derived
  Subtree* recording_ = nullptr;  // what FirstByte's walk finds goes here too
  // When set, the root's children whose byte is false are skipped.
  const std::array<bool, 256>* root_filter_ = nullptr;
  std::vector<std::vector<Stack>> levels_;  // [depth]: stacks there
  std::vector<int32_t> scan_;               // [depth]: WalkSimple's states
  std::vector<int32_t> exits_;  // depths on the path where the base returns
  Tails tails_;
  std::vector<uint32_t> bits_;
};

// ORs into `allowed` the tokens of a tail set that `below` can read, but
// those whose first byte is in `skip`.
class TailWalker {
 public:
  TailWalker(const CompiledGrammar& g, const TokenTrie& vocab,
             const TailSet& set, const std::array<uint64_t, 4>& skip,
             absl::Span<uint32_t> allowed)
      : g_(g),
        vocab_(vocab),
        set_(set),
        trie_(*set.trie),
        skip_(skip),
        allowed_(allowed) {
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
        for (uint32_t i = set_.begin[tail]; i < set_.begin[tail + 1]; ++i) {
          const int32_t id = set_.tokens[i];
          const uint8_t first = static_cast<uint8_t>(vocab_.bytes(id)[0]);
          if (skip_[first >> 6] >> (first & 63) & 1) continue;
          SetBit(allowed_, id);
        }
      }
      Walk(c);
    }
  }

  const CompiledGrammar& g_;
  const TokenTrie& vocab_;
  const TailSet& set_;
  const TokenTrie& trie_;
  const std::array<uint64_t, 4> skip_;
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

SharedEntries::SharedEntries(int64_t budget_bytes)
    : budget_bytes_(budget_bytes), bases_(std::make_unique<EntryBases>()) {}

SharedEntries::~SharedEntries() = default;

std::shared_ptr<const CountedStrings> SharedEntries::counted_strings(
    const TokenTrie& vocab) {
  absl::MutexLock lock(&counted_mu_);
  if (counted_ == nullptr) counted_ = std::make_shared<CountedStrings>(vocab);
  return counted_;
}

MaskTables::MaskTables(std::shared_ptr<const CompiledGrammar> grammar,
                       std::shared_ptr<const TokenTrie> vocab,
                       std::shared_ptr<SharedEntries> shared)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      shared_(std::move(shared)),
      subtrees_(std::make_unique<SubtreeCache>()),
      own_bases_(shared_ == nullptr ? std::make_unique<EntryBases>() : nullptr),
      bases_(shared_ != nullptr ? shared_->bases() : own_bases_.get()) {}

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
  if (built == nullptr && fingerprint != 0) {
    built = CountedEntry(top);
    if (built != nullptr && shared_ != nullptr) {
      shared_->Insert(shared_key, built);
    }
  }
  if (built == nullptr) {
    built =
        EntryBuilder(*grammar_, *vocab_, subtrees_.get(), bases_).Build(top);
    if (shared_ != nullptr && fingerprint != 0)
      shared_->Insert(shared_key, built);
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = entries_.try_emplace(key, std::move(built));
  if (inserted) memory_bytes_ += it->second->memory_bytes();
  return *it->second;
}

std::shared_ptr<const MaskTables::Entry> MaskTables::CountedEntry(
    const Frame& top) {
  std::shared_ptr<const CountedStrings> strings;
  std::shared_ptr<const CountedRule> rule;
  bool asked = false;
  {
    absl::MutexLock lock(&mu_);
    strings = counted_strings_;
    auto it = counted_rules_.find(top.rule);
    if (it != counted_rules_.end()) {
      asked = true;
      rule = it->second;
    }
  }
  if (strings == nullptr) {
    strings = shared_ != nullptr ? shared_->counted_strings(*vocab_)
                                 : std::make_shared<CountedStrings>(*vocab_);
    absl::MutexLock lock(&mu_);
    if (counted_strings_ == nullptr) counted_strings_ = strings;
    strings = counted_strings_;
  }
  if (!asked) {
    rule = strings->Recognize(grammar_->rule(top.rule));
    absl::MutexLock lock(&mu_);
    counted_rules_.try_emplace(top.rule, rule);
  }
  if (rule == nullptr || rule->count[top.state] < 0) return nullptr;
  const int64_t read = rule->count[top.state];
  const int64_t m = std::max<int64_t>(rule->min - read, 0);
  const int64_t r = rule->max == CountedRule::kUnbounded
                        ? CountedRule::kUnbounded
                        : rule->max - read;
  const uint64_t tails_key = strings->FillKey(m, r);
  std::shared_ptr<const TailSet> tails;
  bool have_tails = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = counted_tails_.find(tails_key);
    if (it != counted_tails_.end()) {
      have_tails = true;
      tails = it->second;
    }
  }
  std::vector<uint32_t> bits(MaskWords(vocab_->vocab_size()), 0);
  Tails found;
  strings->Fill(m, r, absl::MakeSpan(bits),
                [&](absl::string_view tail, int32_t id) {
                  if (!have_tails) found[std::string(tail)].push_back(id);
                });
  if (!have_tails) {
    tails = MakeTailSet(found);
    absl::MutexLock lock(&mu_);
    counted_tails_.try_emplace(tails_key, tails);
  }
  auto entry = std::make_shared<Entry>();
  Stack alone;
  alone.push_back(top);
  entry->exit_at_root = CanFinish(*grammar_, alone);
  SetAccepted(std::move(bits), entry.get());
  entry->tails = std::move(tails);
  return entry;
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
  if (e.tails) {
    TailWalker(*grammar_, *vocab_, *e.tails, {}, allowed).Run(below);
  }
  if (e.base_tails) {
    TailWalker(*grammar_, *vocab_, *e.base_tails, e.base_skip, allowed)
        .Run(below);
  }
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
