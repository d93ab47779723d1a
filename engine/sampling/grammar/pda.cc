#include "engine/sampling/grammar/pda.h"

#include <algorithm>
#include <vector>

namespace paceline::engine::grammar {
namespace {

// Pops frames that can only return.
void Normalize(const CompiledGrammar& g, Stack* s) {
  while (s->size() > 1 && g.rule(s->back().rule).final_only(s->back().state)) {
    s->pop_back();
  }
}

bool Add(Stack s, std::vector<Stack>* out) {
  if (std::find(out->begin(), out->end(), s) != out->end()) return true;
  if (out->size() >= kMaxStacks) return false;
  out->push_back(std::move(s));
  return true;
}

// Step below a stack, counting the calls and returns followed against
// `budget` (an ambiguous grammar has exponentially many such paths).
bool StepWithin(const CompiledGrammar& g, const Stack& stack, uint8_t byte,
                std::vector<Stack>* out, size_t* budget) {
  if (*budget == 0) return false;
  --*budget;
  const Frame top = stack.back();
  const RuleDfa& d = g.rule(top.rule);
  bool ok = true;
  const int32_t t = d.Next(top.state, byte);
  if (t != RuleDfa::kDead) {
    Stack next = stack;
    next.back().state = t;
    Normalize(g, &next);
    ok &= Add(std::move(next), out);
  }
  for (const Call* c = d.calls_begin(top.state); c != d.calls_end(top.state);
       ++c) {
    Stack next = stack;
    const Frame callee{c->rule, g.rule(c->rule).start};
    if (d.final_only(c->ret)) {
      next.back() = callee;
    } else if (next.size() >= kMaxStackDepth) {
      ok = false;
      continue;
    } else {
      next.back().state = c->ret;
      next.push_back(callee);
    }
    ok &= StepWithin(g, next, byte, out, budget);
  }
  if (d.accepting(top.state) && stack.size() > 1) {
    Stack below = stack;
    below.pop_back();
    ok &= StepWithin(g, below, byte, out, budget);
  }
  return ok;
}

}  // namespace

bool Step(const CompiledGrammar& g, const Stack& stack, uint8_t byte,
          std::vector<Stack>* out) {
  size_t budget = kMaxStepPaths;
  return StepWithin(g, stack, byte, out, &budget);
}

bool StepAll(const CompiledGrammar& g, const std::vector<Stack>& in,
             uint8_t byte, std::vector<Stack>* out) {
  out->clear();
  // One budget for the whole configuration: up to kMaxStacks stacks, each
  // with its own, made a step cost up to a million paths (a fuzzer's
  // nested `l6 ::= l7 l6?` took seconds a token).
  size_t budget = kMaxStepPaths;
  bool ok = true;
  for (const Stack& s : in) ok &= StepWithin(g, s, byte, out, &budget);
  return ok;
}

bool CanFinish(const CompiledGrammar& g, const Stack& stack) {
  for (const Frame& f : stack) {
    if (!g.rule(f.rule).can_finish(f.state)) return false;
  }
  return true;
}

bool AnyCanFinish(const CompiledGrammar& g, const std::vector<Stack>& stacks) {
  for (const Stack& s : stacks) {
    if (CanFinish(g, s)) return true;
  }
  return false;
}

std::vector<Stack> InitialStacks(const CompiledGrammar& g) {
  Stack s;
  s.push_back({g.root(), g.rule(g.root()).start});
  return {s};
}

}  // namespace paceline::engine::grammar
