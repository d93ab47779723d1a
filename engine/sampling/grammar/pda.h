#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_PDA_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_PDA_H_

// The runtime of a compiled grammar (compile.h): a set of stacks of frames.
//
// A frame is (rule, state); the top frame is the innermost rule being
// matched, each frame below holds the state its rule resumes in when the
// rule above returns. A grammar may be ambiguous (two alternatives that
// read the same prefix through different rules), so the configuration is a
// set of stacks, deduplicated; a byte is allowed when some stack can take
// it.
//
// Two normalizations keep stacks short: a call whose return state is
// final-only (nothing follows the callee in that rule) replaces the
// caller's frame instead of pushing on it (so right recursion, e.g. a GBNF
// list `items ::= item items | item`, runs in constant depth), and a frame
// that reaches a final-only state returns at once.

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "engine/sampling/grammar/compile.h"

namespace paceline::engine::grammar {

struct Frame {
  RuleId rule = 0;
  int32_t state = 0;
  friend bool operator==(const Frame& a, const Frame& b) {
    return a.rule == b.rule && a.state == b.state;
  }
};

// 16 frames inline: nested grammars run 10-20 deep, and a step copies its
// stacks (a heap allocation each past the inline size).
using Stack = absl::InlinedVector<Frame, 16>;

// Limits on one configuration; past them a step keeps what fits and
// reports the overflow (the caller decides: a matcher fails the request).
inline constexpr size_t kMaxStackDepth = 2048;
inline constexpr size_t kMaxStacks = 256;
// Calls and returns one Step, or one StepAll over all its stacks, may
// follow: an ambiguous grammar (GBNF's `l1 ::= l2 l2?` nested) has
// exponentially many paths to the same stacks.
inline constexpr size_t kMaxStepPaths = 4096;

// Appends to `out` (deduplicated) every stack `stack` becomes after
// `byte`. Returns false when a limit cut something off.
bool Step(const CompiledGrammar& g, const Stack& stack, uint8_t byte,
          std::vector<Stack>* out);

// Steps every stack of `in` into `out` (cleared first).
bool StepAll(const CompiledGrammar& g, const std::vector<Stack>& in,
             uint8_t byte, std::vector<Stack>* out);

// The grammar may end here: every frame can finish.
bool CanFinish(const CompiledGrammar& g, const Stack& stack);
bool AnyCanFinish(const CompiledGrammar& g, const std::vector<Stack>& stacks);

// The root's initial configuration.
std::vector<Stack> InitialStacks(const CompiledGrammar& g);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_PDA_H_
