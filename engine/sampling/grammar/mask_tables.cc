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

// The walk that builds one Entry (see mask_tables.h): the vocabulary trie
// from one top frame, its frames below cut off.
class EntryBuilder {
 public:
  EntryBuilder(const CompiledGrammar& g, const TokenTrie& trie)
      : g_(g),
        trie_(trie),
        levels_(trie.max_depth() + 2),
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
  void Accept(int32_t node) {
    for (int32_t id : trie_.tokens(node)) {
      uint32_t& w = bits_[id >> 5];
      const uint32_t bit = 1u << (id & 31);
      count_ += (w & bit) == 0;
      w |= bit;
    }
  }

  // Every token below `node` fails inside the frame; those that passed a
  // point where the frame could return go on from there in the frames
  // below.
  void Fail(int32_t node) {
    if (exits_.empty()) return;
    for (int32_t id : trie_.subtree_tokens(node)) {
      absl::string_view bytes = trie_.bytes(id);
      for (int32_t at : exits_) {
        tails_[std::string(bytes.substr(at))].push_back(id);
      }
    }
  }

  // One stack whose top state only moves by bytes: a table lookup per node.
  void WalkSimple(int32_t node, const RuleDfa& d, int32_t state,
                  const Stack& stack) {
    const uint32_t end = trie_.end(node);
    const int32_t depth = trie_.depth(node);
    for (uint32_t c = node + 1; c < end; c = trie_.end(c)) {
      const int32_t t = d.Next(state, trie_.byte(c));
      if (t == RuleDfa::kDead) {
        Fail(c);
        continue;
      }
      Accept(c);
      if (trie_.end(c) == c + 1) continue;
      if (Simple(d, t)) {
        WalkSimple(c, d, t, stack);
        continue;
      }
      std::vector<Stack>& next = levels_[depth + 1];
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
  std::vector<std::vector<Stack>> levels_;  // [depth]: stacks there
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
      shared_(std::move(shared)) {}

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
    built = EntryBuilder(*grammar_, *vocab_).Build(top);
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
  absl::MutexLock lock(&mu_);
  return memory_bytes_;
}

}  // namespace paceline::engine::grammar
