#include "engine/sampling/grammar/compile.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "common/status_macros.h"

namespace paceline::engine::grammar {
namespace {

constexpr int32_t kEpsilon = -2;  // NfaEdge::rule for an epsilon edge
constexpr int32_t kByteEdge = -1;

struct NfaEdge {
  int32_t target = 0;
  int32_t rule = kEpsilon;  // kEpsilon, kByteEdge, or the callee
  uint8_t lo = 0;
  uint8_t hi = 0;
};

// A rule body as a Thompson NFA: state 0 starts, state 1 accepts.
class NfaBuilder {
 public:
  NfaBuilder(const Grammar& g, int64_t max_states)
      : g_(g), max_states_(max_states) {}

  // `body` -1: the empty language.
  absl::Status Build(ExprId body) {
    NewState();
    NewState();
    if (body >= 0) Connect(body, 0, 1);
    if (overflow_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("a rule's automaton needs more than ", max_states_,
                       " states (nested repetitions multiply)"));
    }
    return absl::OkStatus();
  }

  std::vector<std::vector<NfaEdge>>& states() { return out_; }

 private:
  int32_t NewState() {
    if (static_cast<int64_t>(out_.size()) >= max_states_) overflow_ = true;
    out_.emplace_back();
    return static_cast<int32_t>(out_.size() - 1);
  }
  void Edge(int32_t from, NfaEdge e) { out_[from].push_back(e); }
  void Epsilon(int32_t from, int32_t to) { Edge(from, {to, kEpsilon}); }

  // Adds the language of `id` between `from` and `to`.
  void Connect(ExprId id, int32_t from, int32_t to) {
    if (overflow_) return;
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        Epsilon(from, to);
        return;
      case ExprKind::kNothing:
        return;
      case ExprKind::kBytes:
        for (ByteRange r : e.ranges) Edge(from, {to, kByteEdge, r.lo, r.hi});
        return;
      case ExprKind::kRef:
        Edge(from, {to, e.rule});
        return;
      case ExprKind::kAlt:
        // Loops always run through fresh states (ConnectRepeat), so the
        // alternatives can share both ends.
        for (ExprId c : e.children) Connect(c, from, to);
        return;
      case ExprKind::kSeq: {
        int32_t at = from;
        for (size_t i = 0; i < e.children.size(); ++i) {
          int32_t next = i + 1 == e.children.size() ? to : NewState();
          Connect(e.children[i], at, next);
          at = next;
        }
        return;
      }
      case ExprKind::kRepeat:
        ConnectRepeat(e, from, to);
        return;
    }
  }

  void ConnectRepeat(const Expr& e, int32_t from, int32_t to) {
    ExprId item = e.children[0];
    int32_t at = from;
    for (int32_t i = 0; i < e.min && !overflow_; ++i) {
      int32_t next = NewState();
      Connect(item, at, next);
      at = next;
    }
    if (e.max == kUnbounded) {
      int32_t loop = NewState();
      Epsilon(at, loop);
      Connect(item, loop, loop);
      Epsilon(loop, to);
      return;
    }
    for (int32_t i = e.min; i < e.max && !overflow_; ++i) {
      Epsilon(at, to);
      int32_t next = NewState();
      Connect(item, at, next);
      at = next;
    }
    Epsilon(at, to);
  }

  const Grammar& g_;
  const int64_t max_states_;
  std::vector<std::vector<NfaEdge>> out_;
  bool overflow_ = false;
};

// Subset construction of one rule's NFA into `dfa` (classes, next, calls,
// the accepting flag).
class Determinizer {
 public:
  Determinizer(std::vector<std::vector<NfaEdge>>* nfa, RuleDfa* dfa)
      : nfa_(*nfa), dfa_(*dfa) {}

  absl::Status Run(int64_t* states_left, absl::Time deadline) {
    MakeClasses();
    std::vector<int32_t> start = {0};
    Closure(&start);
    Intern(start);
    std::vector<std::vector<int32_t>> by_class(dfa_.num_classes);
    absl::flat_hash_map<RuleId, std::vector<int32_t>> by_call;
    for (size_t s = 0; s < num_sets(); ++s) {
      if (--*states_left < 0) {
        return absl::ResourceExhaustedError(
            "the grammar's automata need too many states");
      }
      if ((s & 255) == 0 && absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            "compiling the grammar took too long");
      }
      for (auto& v : by_class) v.clear();
      by_call.clear();
      // (Set(s) stays valid: nothing is interned in this loop.)
      for (int32_t n : Set(static_cast<int32_t>(s))) {
        for (const NfaEdge& e : nfa_[n]) {
          if (e.rule == kByteEdge) {
            for (int c = dfa_.byte_class[e.lo]; c <= dfa_.byte_class[e.hi];
                 ++c) {
              by_class[c].push_back(e.target);
            }
          } else if (e.rule >= 0) {
            by_call[e.rule].push_back(e.target);
          }
        }
      }
      // Classes often move to the same NFA states (every plain character
      // of a string): each distinct list is closed and interned once.
      done_.clear();
      for (int32_t c = 0; c < dfa_.num_classes; ++c) {
        std::vector<int32_t>& targets = by_class[c];
        if (targets.empty()) continue;
        int32_t id = -1;
        for (const auto& [earlier, earlier_id] : done_) {
          if (by_class[earlier] == targets) {
            id = earlier_id;
            break;
          }
        }
        if (id < 0) {
          closed_ = targets;
          Closure(&closed_);
          id = Intern(closed_);
          done_.push_back({c, id});
        }
        dfa_.next[s * dfa_.num_classes + c] = id;
      }
      std::vector<Call> calls;
      for (auto& [rule, targets] : by_call) {
        Closure(&targets);
        calls.push_back({rule, Intern(targets)});
      }
      std::sort(calls.begin(), calls.end(),
                [](const Call& a, const Call& b) { return a.rule < b.rule; });
      calls_[s] = std::move(calls);
    }
    Finish();
    return absl::OkStatus();
  }

 private:
  // Byte classes: bytes no edge of this rule tells apart share a class.
  void MakeClasses() {
    std::array<bool, 257> cut{};
    cut[0] = true;
    for (const auto& edges : nfa_) {
      for (const NfaEdge& e : edges) {
        if (e.rule != kByteEdge) continue;
        cut[e.lo] = true;
        cut[e.hi + 1] = true;
      }
    }
    int32_t c = -1;
    for (int b = 0; b < 256; ++b) {
      if (cut[b]) ++c;
      dfa_.byte_class[b] = static_cast<uint8_t>(c);
    }
    dfa_.num_classes = c + 1;
  }

  // Sorted epsilon closure of `set`, in place.
  void Closure(std::vector<int32_t>* set) {
    if (seen_.size() < nfa_.size()) seen_.assign(nfa_.size(), 0);
    ++epoch_;
    std::vector<int32_t>& todo = todo_;
    todo.clear();
    for (int32_t n : *set) {
      if (seen_[n] != epoch_) {
        seen_[n] = epoch_;
        todo.push_back(n);
      }
    }
    set->clear();
    while (!todo.empty()) {
      int32_t n = todo.back();
      todo.pop_back();
      set->push_back(n);
      for (const NfaEdge& e : nfa_[n]) {
        if (e.rule == kEpsilon && seen_[e.target] != epoch_) {
          seen_[e.target] = epoch_;
          todo.push_back(e.target);
        }
      }
    }
    std::sort(set->begin(), set->end());
  }

  int32_t Intern(const std::vector<int32_t>& set) {
    auto it = ids_.find(absl::MakeConstSpan(set));
    if (it != ids_.end()) return *it;
    const int32_t id = static_cast<int32_t>(num_sets());
    arena_.insert(arena_.end(), set.begin(), set.end());
    offsets_.push_back(static_cast<uint32_t>(arena_.size()));
    ids_.insert(id);
    calls_.emplace_back();
    dfa_.next.resize(num_sets() * dfa_.num_classes, RuleDfa::kDead);
    return id;
  }

  size_t num_sets() const { return offsets_.size() - 1; }
  absl::Span<const int32_t> Set(int32_t id) const {
    return absl::MakeConstSpan(arena_.data() + offsets_[id],
                               offsets_[id + 1] - offsets_[id]);
  }

  void Finish() {
    const int32_t n = static_cast<int32_t>(num_sets());
    dfa_.start = 0;
    dfa_.flags.assign(n, 0);
    dfa_.call_begin.assign(n + 1, 0);
    for (int32_t s = 0; s < n; ++s) {
      // The NFA's accepting state is 1.
      const absl::Span<const int32_t> set = Set(s);
      if (std::binary_search(set.begin(), set.end(), 1)) {
        dfa_.flags[s] |= RuleDfa::kAccepting;
      }
      dfa_.call_begin[s] = static_cast<int32_t>(dfa_.calls.size());
      dfa_.calls.insert(dfa_.calls.end(), calls_[s].begin(), calls_[s].end());
    }
    dfa_.call_begin[n] = static_cast<int32_t>(dfa_.calls.size());
  }

  const std::vector<std::vector<NfaEdge>>& nfa_;
  RuleDfa& dfa_;
  // The DFA states' NFA sets, one after another: set i is
  // arena_[offsets_[i] .. offsets_[i + 1]).
  std::vector<int32_t> arena_;
  std::vector<uint32_t> offsets_ = {0};
  std::vector<std::vector<Call>> calls_;
  // The ids of the sets, found by their contents.
  struct SetHash {
    using is_transparent = void;
    const Determinizer* d;
    size_t operator()(absl::Span<const int32_t> set) const {
      return absl::HashOf(set);
    }
    size_t operator()(int32_t id) const { return (*this)(d->Set(id)); }
  };
  struct SetEq {
    using is_transparent = void;
    const Determinizer* d;
    absl::Span<const int32_t> Get(absl::Span<const int32_t> set) const {
      return set;
    }
    absl::Span<const int32_t> Get(int32_t id) const { return d->Set(id); }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Get(a) == Get(b);
    }
  };
  absl::flat_hash_set<int32_t, SetHash, SetEq> ids_{0, SetHash{this},
                                                    SetEq{this}};
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  // Scratch space, kept between states.
  std::vector<int32_t> todo_;
  std::vector<int32_t> closed_;
  std::vector<std::pair<int32_t, int32_t>> done_;  // (class, DFA state)
};

std::vector<bool> ReachableRules(const Grammar& g) {
  std::vector<bool> rules(g.num_rules(), false);
  std::vector<bool> exprs(g.num_exprs(), false);
  std::vector<ExprId> todo;
  rules[g.root()] = true;
  todo.push_back(g.rule(g.root()).body);
  while (!todo.empty()) {
    ExprId id = todo.back();
    todo.pop_back();
    if (exprs[id]) continue;
    exprs[id] = true;
    const Expr& e = g.expr(id);
    if (e.kind == ExprKind::kRef && !rules[e.rule]) {
      rules[e.rule] = true;
      todo.push_back(g.rule(e.rule).body);
    }
    for (ExprId c : e.children) todo.push_back(c);
  }
  return rules;
}

}  // namespace

namespace internal {
// trim.cc: removes unproductive calls and dead states, sets the finishing
// flags, refuses loops that consume nothing.
absl::Status Trim(std::vector<RuleDfa>* rules, RuleId root);
}  // namespace internal

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
    const Grammar& grammar, const CompileLimits& limits) {
  RETURN_IF_ERROR(grammar.Validate());
  const absl::Time deadline = absl::Now() + limits.time_budget;
  auto compiled = std::make_shared<CompiledGrammar>();
  compiled->rules_.resize(grammar.num_rules());
  compiled->root_ = grammar.root();
  const std::vector<bool> reachable = ReachableRules(grammar);
  int64_t states_left = limits.max_dfa_states;
  for (RuleId r = 0; r < grammar.num_rules(); ++r) {
    RuleDfa& dfa = compiled->rules_[r];
    dfa.name = grammar.rule(r).name;
    NfaBuilder nfa(grammar, limits.max_nfa_states);
    // An unreachable rule compiles to the empty language.
    RETURN_IF_ERROR(nfa.Build(reachable[r] ? grammar.rule(r).body : -1));
    Determinizer det(&nfa.states(), &dfa);
    absl::Status status = det.Run(&states_left, deadline);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("rule '", dfa.name,
                                                      "': ", status.message()));
    }
  }
  RETURN_IF_ERROR(internal::Trim(&compiled->rules_, compiled->root_));
  for (RuleDfa& dfa : compiled->rules_) {
    if (dfa.calls.empty()) {
      dfa.fingerprint = absl::HashOf(dfa.start, dfa.num_classes, dfa.byte_class,
                                     dfa.next, dfa.flags) |
                        1;
    }
  }
  for (const RuleDfa& dfa : compiled->rules_) {
    compiled->num_states_ += dfa.num_states();
    compiled->memory_bytes_ += static_cast<int64_t>(
        dfa.next.size() * sizeof(int32_t) + dfa.calls.size() * sizeof(Call) +
        dfa.call_begin.size() * sizeof(int32_t) + dfa.flags.size());
  }
  return std::shared_ptr<const CompiledGrammar>(std::move(compiled));
}

}  // namespace paceline::engine::grammar
