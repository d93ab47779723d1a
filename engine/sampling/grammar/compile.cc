#include "engine/sampling/grammar/compile.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
    Intern(std::move(start));
    std::vector<std::vector<int32_t>> by_class(dfa_.num_classes);
    absl::flat_hash_map<RuleId, std::vector<int32_t>> by_call;
    for (size_t s = 0; s < sets_.size(); ++s) {
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
      for (int32_t n : sets_[s]) {
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
      for (int32_t c = 0; c < dfa_.num_classes; ++c) {
        if (by_class[c].empty()) continue;
        Closure(&by_class[c]);
        dfa_.next[s * dfa_.num_classes + c] = Intern(std::move(by_class[c]));
      }
      std::vector<Call> calls;
      for (auto& [rule, targets] : by_call) {
        Closure(&targets);
        calls.push_back({rule, Intern(std::move(targets))});
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
    std::vector<int32_t> todo;
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

  int32_t Intern(std::vector<int32_t> set) {
    auto [it, inserted] =
        ids_.try_emplace(set, static_cast<int32_t>(sets_.size()));
    if (inserted) {
      sets_.push_back(std::move(set));
      calls_.emplace_back();
      dfa_.next.resize(sets_.size() * dfa_.num_classes, RuleDfa::kDead);
    }
    return it->second;
  }

  void Finish() {
    const int32_t n = static_cast<int32_t>(sets_.size());
    dfa_.start = 0;
    dfa_.flags.assign(n, 0);
    dfa_.call_begin.assign(n + 1, 0);
    for (int32_t s = 0; s < n; ++s) {
      // The NFA's accepting state is 1.
      if (std::binary_search(sets_[s].begin(), sets_[s].end(), 1)) {
        dfa_.flags[s] |= RuleDfa::kAccepting;
      }
      dfa_.call_begin[s] = static_cast<int32_t>(dfa_.calls.size());
      dfa_.calls.insert(dfa_.calls.end(), calls_[s].begin(), calls_[s].end());
    }
    dfa_.call_begin[n] = static_cast<int32_t>(dfa_.calls.size());
  }

  const std::vector<std::vector<NfaEdge>>& nfa_;
  RuleDfa& dfa_;
  std::vector<std::vector<int32_t>> sets_;
  std::vector<std::vector<Call>> calls_;
  absl::flat_hash_map<std::vector<int32_t>, int32_t> ids_;
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
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
