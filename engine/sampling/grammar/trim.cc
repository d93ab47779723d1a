// Compile's last pass (compile.h): trimming, the finishing flags and the
// check that every loop of calls consumes input.

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/compile.h"

namespace paceline::engine::grammar::internal {
namespace {

struct CallSite {
  RuleId rule;
  int32_t state;
  int32_t ret;
};

// Marks live states (an accepting state is reachable through byte edges
// and calls to productive rules) and productive rules (their start is
// live), by a worklist over reversed edges.
class Liveness {
 public:
  explicit Liveness(const std::vector<RuleDfa>& rules) : rules_(rules) {
    const size_t n = rules.size();
    live_.resize(n);
    byte_preds_.resize(n);
    call_preds_.resize(n);
    sites_.resize(n);
    productive_.assign(n, false);
    for (size_t r = 0; r < n; ++r) Index(static_cast<RuleId>(r));
  }

  void Run() {
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (int32_t s = 0; s < rules_[r].num_states(); ++s) {
        if (rules_[r].accepting(s)) Mark(static_cast<RuleId>(r), s);
      }
    }
    while (!todo_.empty()) {
      auto [r, s] = todo_.back();
      todo_.pop_back();
      for (int32_t p : byte_preds_[r][s]) Mark(r, p);
      for (const CallSite& c : call_preds_[r][s]) {
        if (productive_[c.rule]) Mark(r, c.state);
      }
      if (s == rules_[r].start && !productive_[r]) {
        productive_[r] = true;
        for (const CallSite& c : sites_[r]) {
          if (live_[c.rule][c.ret]) Mark(c.rule, c.state);
        }
      }
    }
  }

  bool live(RuleId r, int32_t s) const { return live_[r][s]; }
  bool productive(RuleId r) const { return productive_[r]; }

 private:
  void Index(RuleId r) {
    const RuleDfa& d = rules_[r];
    live_[r].assign(d.num_states(), false);
    byte_preds_[r].resize(d.num_states());
    call_preds_[r].resize(d.num_states());
    for (int32_t s = 0; s < d.num_states(); ++s) {
      for (int32_t c = 0; c < d.num_classes; ++c) {
        int32_t t = d.next[static_cast<size_t>(s) * d.num_classes + c];
        if (t == RuleDfa::kDead) continue;
        // Classes leading to the same state from s: s listed once.
        std::vector<int32_t>& preds = byte_preds_[r][t];
        if (preds.empty() || preds.back() != s) preds.push_back(s);
      }
      for (const Call* c = d.calls_begin(s); c != d.calls_end(s); ++c) {
        // Indexed by the return state (for its liveness) and by the callee
        // (for its productivity); `rule` is the caller here.
        call_preds_[r][c->ret].push_back({c->rule, s, c->ret});
        sites_[c->rule].push_back({r, s, c->ret});
      }
    }
  }

  void Mark(RuleId r, int32_t s) {
    if (live_[r][s]) return;
    live_[r][s] = true;
    todo_.push_back({r, s});
  }

  const std::vector<RuleDfa>& rules_;
  std::vector<std::vector<bool>> live_;
  std::vector<std::vector<std::vector<int32_t>>> byte_preds_;
  // [rule][return state]: the call sites returning there, `rule` = callee.
  std::vector<std::vector<std::vector<CallSite>>> call_preds_;
  std::vector<std::vector<CallSite>> sites_;  // [callee]: its call sites
  std::vector<bool> productive_;
  std::vector<std::pair<RuleId, int32_t>> todo_;
};

void Prune(const Liveness& live, RuleId r, RuleDfa* d) {
  std::vector<Call> calls;
  std::vector<int32_t> begin(d->num_states() + 1, 0);
  for (int32_t s = 0; s < d->num_states(); ++s) {
    begin[s] = static_cast<int32_t>(calls.size());
    int32_t* row = d->next.data() + static_cast<size_t>(s) * d->num_classes;
    for (int32_t c = 0; c < d->num_classes; ++c) {
      if (!live.live(r, s) ||
          (row[c] != RuleDfa::kDead && !live.live(r, row[c]))) {
        row[c] = RuleDfa::kDead;
      }
    }
    if (!live.live(r, s)) {
      d->flags[s] = 0;
      continue;
    }
    bool leaves = false;
    for (int32_t c = 0; c < d->num_classes; ++c) {
      leaves |= row[c] != RuleDfa::kDead;
    }
    for (const Call* c = d->calls_begin(s); c != d->calls_end(s); ++c) {
      if (live.productive(c->rule) && live.live(r, c->ret)) {
        calls.push_back(*c);
        leaves = true;
      }
    }
    if (d->accepting(s) && !leaves) d->flags[s] |= RuleDfa::kFinalOnly;
  }
  begin[d->num_states()] = static_cast<int32_t>(calls.size());
  d->calls = std::move(calls);
  d->call_begin = std::move(begin);
}

void SetCanFinish(std::vector<RuleDfa>* rules) {
  for (RuleDfa& d : *rules) {
    for (int32_t s = 0; s < d.num_states(); ++s) {
      if (d.accepting(s)) d.flags[s] |= RuleDfa::kCanFinish;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (RuleDfa& d : *rules) {
      for (int32_t s = 0; s < d.num_states(); ++s) {
        if (d.can_finish(s)) continue;
        for (const Call* c = d.calls_begin(s); c != d.calls_end(s); ++c) {
          const RuleDfa& callee = (*rules)[c->rule];
          if (callee.can_finish(callee.start) && d.can_finish(c->ret)) {
            d.flags[s] |= RuleDfa::kCanFinish;
            changed = true;
            break;
          }
        }
      }
    }
  }
}

// A cycle among "enter the callee's start" and "skip an empty callee"
// moves consumes nothing: the runtime would never terminate on it.
absl::Status CheckEmptyLoops(const std::vector<RuleDfa>& rules) {
  std::vector<int64_t> base(rules.size() + 1, 0);
  for (size_t r = 0; r < rules.size(); ++r) {
    base[r + 1] = base[r] + rules[r].num_states();
  }
  std::vector<uint8_t> color(base.back(), 0);  // 0 new, 1 open, 2 done
  struct Item {
    RuleId rule;
    int32_t state;
    int32_t next_edge;  // 2 per call: enter, skip
  };
  for (size_t r0 = 0; r0 < rules.size(); ++r0) {
    for (int32_t s0 = 0; s0 < rules[r0].num_states(); ++s0) {
      if (color[base[r0] + s0] != 0) continue;
      std::vector<Item> stack = {{static_cast<RuleId>(r0), s0, 0}};
      color[base[r0] + s0] = 1;
      while (!stack.empty()) {
        Item& it = stack.back();
        const RuleDfa& d = rules[it.rule];
        const int32_t num_calls =
            d.call_begin[it.state + 1] - d.call_begin[it.state];
        if (it.next_edge >= 2 * num_calls) {
          color[base[it.rule] + it.state] = 2;
          stack.pop_back();
          continue;
        }
        const Call& c = d.calls[d.call_begin[it.state] + it.next_edge / 2];
        const bool enter = it.next_edge % 2 == 0;
        ++it.next_edge;
        const RuleDfa& callee = rules[c.rule];
        if (!enter && !callee.can_finish(callee.start)) continue;
        Item next =
            enter ? Item{c.rule, callee.start, 0} : Item{it.rule, c.ret, 0};
        uint8_t& mark = color[base[next.rule] + next.state];
        if (mark == 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "rule '", rules[next.rule].name,
              "' can reach itself without consuming input (left recursion, "
              "or a repetition of something that may be empty)"));
        }
        if (mark == 0) {
          mark = 1;
          stack.push_back(next);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Trim(std::vector<RuleDfa>* rules, RuleId root) {
  Liveness live(*rules);
  live.Run();
  if (!live.productive(root)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the grammar matches no string (rule '",
                     (*rules)[root].name, "' never completes)"));
  }
  for (size_t r = 0; r < rules->size(); ++r) {
    Prune(live, static_cast<RuleId>(r), &(*rules)[r]);
  }
  SetCanFinish(rules);
  return CheckEmptyLoops(*rules);
}

}  // namespace paceline::engine::grammar::internal
