#include "engine/sampling/grammar/counted_strings.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
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

}  // namespace

CountedStrings::CountedStrings(const TokenTrie& vocab)
    : vocab_(vocab), model_(Model()) {
  if (model_ == nullptr) return;
  const RuleDfa& d = model_->rule(model_->root());
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
  // is no bound, where more characters change nothing).
  std::vector<uint8_t> runs;  // bytes where either automaton's class changes
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || rule.byte_class[b] != rule.byte_class[b - 1] ||
        d.byte_class[b] != d.byte_class[b - 1]) {
      runs.push_back(static_cast<uint8_t>(b));
    }
  }
  using Triple = std::tuple<int32_t, int32_t, int64_t>;  // rule, model, count
  absl::flat_hash_set<Triple> visited;
  std::vector<Triple> queue = {{rule.start, d.start, 0}};
  visited.insert(queue[0]);
  for (size_t i = 0; i < queue.size(); ++i) {
    const auto [s, b, c] = queue[i];
    if (rule.has_calls(s) || (rule.flags[s] & 7) != (d.flags[b] & 7)) {
      return nullptr;
    }
    if (b != d.start && Boundary(d, b)) {
      if (counted->count[s] >= 0 && counted->count[s] != c) return nullptr;
      counted->count[s] = c;
    }
    for (uint8_t x : runs) {
      const int32_t ns = rule.Next(s, x);
      const int32_t nb = d.Next(b, x);
      bool alive = nb != kDead;
      int64_t nc = c;
      if (alive && b != d.start) {
        if (d.accepting(nb)) {
          alive = c >= min && c <= max;
        } else {
          alive = c < max;
          if (Boundary(d, nb)) nc = bounded ? c + 1 : std::min(c + 1, min);
        }
      }
      if (alive != (ns != kDead)) return nullptr;
      if (!alive) continue;
      const Triple next = {ns, nb, nc};
      if (visited.insert(next).second) queue.push_back(next);
    }
  }
  // A state met both at a boundary and inside a character is not one.
  for (const auto& [s, b, c] : visited) {
    if (counted->count[s] >= 0 && !(b != d.start && Boundary(d, b))) {
      return nullptr;
    }
  }
  return counted;
}

}  // namespace paceline::engine::grammar
