#include "engine/sampling/grammar/counted_strings.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/hash/hash.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/row_sampling_math.h"

namespace paceline::engine::grammar {
namespace {

// A JSON string, its characters written as json_text.h writes them: any
// character from U+0020 but '"' and '\' as itself, those two and the
// controls with a short escape as \" \\ \b \f \n \r \t, any control as
// \u00XX (hex digits in either case).
std::shared_ptr<const CompiledGrammar> Model() {
  Grammar g;
  const ExprId plain = g.Codepoints(
      {{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, kMaxCodepoint}});
  const ExprId letter = g.Bytes({{'"', '"'},
                                 {'\\', '\\'},
                                 {'b', 'b'},
                                 {'f', 'f'},
                                 {'n', 'n'},
                                 {'r', 'r'},
                                 {'t', 't'}});
  const ExprId control = g.Seq({g.Literal("u00"), g.Bytes({{'0', '1'}}),
                                g.Bytes({{'0', '9'}, {'a', 'f'}, {'A', 'F'}})});
  const ExprId escaped = g.Seq({g.Literal("\\"), g.Alt({letter, control})});
  const RuleId root = g.AddRule("string");
  g.SetRule(root, g.Seq({g.Literal("\""), g.Star(g.Alt({plain, escaped})),
                         g.Literal("\"")}));
  g.set_root(root);
  auto compiled = Compile(g);
  // A fixed grammar: it compiles.
  return compiled.ok() ? *compiled : nullptr;
}

// A model state at a character boundary inside the quotes: the closing
// quote may follow.
bool Boundary(const RuleDfa& d, int32_t s) {
  const int32_t q = d.Next(s, '"');
  return q != RuleDfa::kDead && d.accepting(q);
}

// [state]: the least state equivalent to it (Moore's refinement; the
// model is a few dozen states).
std::vector<int32_t> Representatives(const RuleDfa& d) {
  const int32_t n = d.num_states();
  std::vector<int32_t> cls(n);
  for (int32_t s = 0; s < n; ++s) cls[s] = d.flags[s] & 7;
  for (bool changed = true; changed;) {
    changed = false;
    std::map<std::vector<int32_t>, int32_t> ids;
    std::vector<int32_t> next(n);
    for (int32_t s = 0; s < n; ++s) {
      std::vector<int32_t> key = {cls[s]};
      for (int b = 0; b < 256; ++b) {
        const int32_t t = d.Next(s, static_cast<uint8_t>(b));
        key.push_back(t == RuleDfa::kDead ? -1 : cls[t]);
      }
      next[s] = ids.try_emplace(std::move(key), ids.size()).first->second;
    }
    // Refinement only splits classes: it is done when none split.
    changed = ids.size() != std::set<int32_t>(cls.begin(), cls.end()).size();
    cls = std::move(next);
  }
  std::vector<int32_t> least(n, -1);
  std::vector<int32_t> rep(n);
  for (int32_t s = 0; s < n; ++s) {
    if (least[cls[s]] < 0) least[cls[s]] = s;
    rep[s] = least[cls[s]];
  }
  return rep;
}

}  // namespace

CountedStrings::CountedStrings(const TokenTrie& vocab)
    : vocab_(vocab), model_(Model()) {
  if (model_ == nullptr) return;
  const RuleDfa& d = model_->rule(model_->root());
  representative_ = Representatives(d);
  Read(0, d.Next(d.start, '"'), 0);
  max_need_ = static_cast<int64_t>(by_need_.size()) - 1;
  if (max_need_ < 0) max_need_ = 0;
  std::vector<uint32_t> bits(MaskWords(vocab.vocab_size()), 0);
  for (int64_t need = 0; need <= max_need_; ++need) {
    if (need < static_cast<int64_t>(by_need_.size())) {
      for (int32_t id : by_need_[need]) bits[id >> 5] |= 1u << (id & 31);
    }
    within_.push_back(bits);
  }
  by_need_.clear();
}

void CountedStrings::Read(int32_t node, int32_t state, int64_t chars) {
  const RuleDfa& d = model_->rule(model_->root());
  const uint32_t end = vocab_.end(node);
  for (uint32_t c = node + 1; c < end; c = vocab_.end(c)) {
    const int32_t next = d.Next(state, vocab_.byte(c));
    if (next == RuleDfa::kDead) continue;
    if (d.accepting(next)) {  // the closing quote
      for (int32_t id : vocab_.subtree_tokens(c)) {
        closings_.push_back(
            {chars, id, static_cast<uint32_t>(vocab_.depth(c))});
      }
      max_chars_ = std::max(max_chars_, chars);
      continue;
    }
    const bool boundary = Boundary(d, next);
    const int64_t read = chars + (boundary ? 1 : 0);
    const int64_t need = boundary ? read : read + 1;
    if (!vocab_.tokens(c).empty()) {
      if (static_cast<int64_t>(by_need_.size()) <= need) {
        by_need_.resize(need + 1);
      }
      for (int32_t id : vocab_.tokens(c)) by_need_[need].push_back(id);
    }
    Read(c, next, read);
  }
}

uint64_t CountedStrings::FillKey(int64_t m, int64_t r) const {
  return absl::HashOf(std::min(m, max_chars_ + 1),
                      std::min(r, std::max(max_need_, max_chars_)));
}

std::shared_ptr<const CountedRule> CountedStrings::Recognize(
    const RuleDfa& rule) const {
  if (model_ == nullptr) return nullptr;
  if (rule.fingerprint != 0) {
    absl::MutexLock lock(&mu_);
    auto it = recognized_.find(rule.fingerprint);
    if (it != recognized_.end()) return it->second;
  }
  std::shared_ptr<const CountedRule> found = Prove(rule);
  if (rule.fingerprint != 0) {
    absl::MutexLock lock(&mu_);
    recognized_.try_emplace(rule.fingerprint, found);
  }
  return found;
}

std::shared_ptr<const CountedRule> CountedStrings::Prove(
    const RuleDfa& rule) const {
  const RuleDfa& d = model_->rule(model_->root());
  constexpr int32_t kDead = RuleDfa::kDead;
  // The bounds, read along "a"s: the first count the quote may close, the
  // last count alive (or a loop: no bound).
  auto counted = std::make_shared<CountedRule>();
  int64_t min = -1;
  bool bounded = true;
  int64_t k = 0;
  std::vector<char> seen(rule.num_states(), 0);
  for (int32_t s = rule.Next(rule.start, '"'); s != kDead;
       s = rule.Next(s, 'a'), ++k) {
    if (seen[s]) {
      bounded = false;
      break;
    }
    seen[s] = 1;
    const int32_t q = rule.Next(s, '"');
    if (min < 0 && q != kDead && rule.accepting(q)) min = k;
  }
  if (min < 0) return nullptr;
  const int64_t max = bounded ? k - 1 : CountedRule::kUnbounded;
  counted->min = min;
  counted->max = max;
  counted->count.assign(rule.num_states(), -1);

  // The product with the model and a counter (clamped at min when there
  // is no bound, where more characters change nothing). Each rule state
  // is paired with one (model state, count); a second pairing refuses the
  // rule (sound, if perhaps too strict for an automaton with equivalent
  // states).
  std::vector<uint8_t> runs;  // bytes where either automaton's class changes
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || rule.byte_class[b] != rule.byte_class[b - 1] ||
        d.byte_class[b] != d.byte_class[b - 1]) {
      runs.push_back(static_cast<uint8_t>(b));
    }
  }
  std::vector<int32_t> model(rule.num_states(), -1);  // [rule state]
  std::vector<int64_t> chars(rule.num_states(), -1);  // [rule state]
  const int32_t start = representative_[d.start];
  std::vector<int32_t> queue = {rule.start};
  model[rule.start] = start;
  chars[rule.start] = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const int32_t s = queue[i];
    const int32_t b = model[s];
    const int64_t c = chars[s];
    if (rule.has_calls(s) || (rule.flags[s] & 7) != (d.flags[b] & 7)) {
      return nullptr;
    }
    if (b != start && Boundary(d, b)) counted->count[s] = c;
    for (uint8_t x : runs) {
      const int32_t ns = rule.Next(s, x);
      const int32_t nb = d.Next(b, x);
      bool alive = nb != kDead;
      int64_t nc = c;
      if (alive && b != start) {
        if (d.accepting(nb)) {  // closed: the count no longer matters
          alive = c >= min && c <= max;
          nc = 0;
        } else {
          alive = c < max;
          if (Boundary(d, nb)) nc = bounded ? c + 1 : std::min(c + 1, min);
        }
      }
      if (alive != (ns != kDead)) return nullptr;
      if (!alive) continue;
      const int32_t rb = representative_[nb];
      if (model[ns] < 0) {
        model[ns] = rb;
        chars[ns] = nc;
        queue.push_back(ns);
      } else if (model[ns] != rb || chars[ns] != nc) {
        return nullptr;
      }
    }
  }
  return counted;
}

}  // namespace paceline::engine::grammar
