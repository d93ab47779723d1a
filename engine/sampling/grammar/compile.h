#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_COMPILE_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_COMPILE_H_

// A Grammar compiled to a recursive transition network: one deterministic
// automaton per rule over bytes and calls.
//
// Design. Each rule body becomes a Thompson NFA whose edges are byte
// ranges, epsilons and calls (a reference to a rule), then a DFA by subset
// construction in which "call rule Q" is one more input symbol: a DFA state
// has byte transitions (through the rule's byte classes) and call edges
// (Q, return state). The runtime (pda.h) keeps a stack of frames
// (rule, state): a byte either moves the top frame, or enters a callee
// (the frame keeps the return state, the callee's start is pushed) or, from
// an accepting state, returns to the frame below. Regular parts of a
// grammar (a JSON key, a number, a string body) therefore cost one table
// lookup per byte; only references cost a push or a pop.
//
// After construction the network is trimmed: a rule that derives no finite
// string is unproductive and every call to it is removed; a state from
// which no accepting state is reachable is removed with the edges into it.
// So every live configuration can still complete, and a token mask never
// leads a request into a dead end.
//
// Refused at compile time (InvalidArgument naming the rule): left recursion
// and any loop of calls that consumes nothing (the runtime could not
// terminate), a root that matches nothing, and grammars past the limits.
//
// Thread-safety: a CompiledGrammar is immutable; share it freely.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/sampling/grammar/grammar.h"

namespace paceline::engine::grammar {

struct CompileLimits {
  int64_t max_nfa_states = 4'000'000;  // per rule
  int64_t max_dfa_states = 400'000;    // all rules together
  absl::Duration time_budget = absl::Seconds(5);
};

struct Call {
  RuleId rule = -1;
  int32_t ret = -1;  // the caller's state once the callee returns
};

// One rule's automaton. States are 0..num_states-1; kDead marks "no
// transition".
struct RuleDfa {
  static constexpr int32_t kDead = -1;
  static constexpr uint8_t kAccepting = 1;  // the rule may end here
  static constexpr uint8_t kCanFinish = 2;  // ...or after empty callees
  static constexpr uint8_t kFinalOnly = 4;  // accepting, nothing leaves

  std::string name;
  // A hash of the automaton when the rule calls nothing (its token masks
  // then depend on it alone and may be shared across grammars,
  // mask_tables.h); 0 otherwise.
  uint64_t fingerprint = 0;
  int32_t start = 0;
  int32_t num_classes = 1;
  std::array<uint8_t, 256> byte_class{};  // byte -> class
  std::vector<int32_t> next;        // [state * num_classes + class] -> state
  std::vector<int32_t> call_begin;  // [state], [state + 1]: range in calls
  std::vector<Call> calls;
  std::vector<uint8_t> flags;  // [state]

  int32_t num_states() const { return static_cast<int32_t>(flags.size()); }
  int32_t Next(int32_t state, uint8_t byte) const {
    return next[static_cast<size_t>(state) * num_classes + byte_class[byte]];
  }
  bool accepting(int32_t s) const { return flags[s] & kAccepting; }
  bool can_finish(int32_t s) const { return flags[s] & kCanFinish; }
  bool final_only(int32_t s) const { return flags[s] & kFinalOnly; }
  const Call* calls_begin(int32_t s) const {
    return calls.data() + call_begin[s];
  }
  const Call* calls_end(int32_t s) const {
    return calls.data() + call_begin[s + 1];
  }
  bool has_calls(int32_t s) const { return call_begin[s] != call_begin[s + 1]; }
};

class CompiledGrammar {
 public:
  const RuleDfa& rule(RuleId id) const { return rules_[id]; }
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }
  RuleId root() const { return root_; }
  int64_t num_states() const { return num_states_; }
  // Heap bytes the automata hold (for cache accounting).
  int64_t memory_bytes() const { return memory_bytes_; }

 private:
  friend absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
      const Grammar&, const CompileLimits&);
  std::vector<RuleDfa> rules_;
  RuleId root_ = -1;
  int64_t num_states_ = 0;
  int64_t memory_bytes_ = 0;
};

// Errors: InvalidArgument for an invalid or refused grammar (the message
// names the rule), ResourceExhausted past `limits` (what and how much).
absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
    const Grammar& grammar, const CompileLimits& limits = {});

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_COMPILE_H_
