#include "engine/sampling/grammar/regex.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/regex_syntax.h"

// Three steps. The parser (regex_syntax.h) turns the pattern into a small
// syntax tree (or the first error); in search mode EdgeTrimmer simplifies
// the tree's unanchored ends; the lowering turns it into grammar
// expressions.
//
// Anchors are exact, not special-cased. A subpattern's matches depend on
// two facts about where it is matched: whether it starts at the start of
// the text (s) and whether it ends at the end (e), since ^ holds only at
// position 0 and $ only at the end. So a subpattern that contains an
// anchor lowers to four expressions n[s,e], its non-empty matches in each
// context, plus four flags z[s,e], whether it can match the empty string
// there. Concatenation then reads
//   n[s,e](XY) = n[s,0](X) n[0,e](Y)
//              | n[s,e](Y)   where z[s,0](X)
//              | n[s,e](X)   where z[0,e](Y)
//   z[s,e](XY) = z[s,e](X) and z[s,e](Y)
// and the whole pattern is n[1,1] (whole-text mode) or, in search mode,
//   .* n[0,0] .* | n[1,0] .* | .* n[0,1] | n[1,1]   (plus the empty cases).
// Both anchors are positive, so a match in context (0,e) is also one in
// (1,e) (and likewise for e); that is why n[s,e] may also match the empty
// string where z[s,e] holds without breaking these formulas, and why an
// anchor-free subpattern needs one plain expression for all four contexts.

namespace paceline::engine::grammar {
namespace {

using regex_internal::Complement;
using regex_internal::MakeNode;
using regex_internal::Node;
using regex_internal::NodeKind;
using regex_internal::Ranges;

// Search mode lets any text follow the match, so a trailing part Q of the
// pattern without anchors can give way to a Q' with Q'.* = Q.* (a nullable
// Q to nothing, X{n,m} to X{n}), and likewise at the front, without
// changing the language; the automaton gets smaller (\w{1,1000} becomes
// \w). The context of the rest (whether it ends at the end of the text)
// is unchanged: it does exactly when Q and Q' both match empty there.
class EdgeTrimmer {
 public:
  explicit EdgeTrimmer(std::vector<Node>* nodes) : nodes_(*nodes) {}

  // The pattern `id` trimmed at its right (or left) edge.
  int32_t Trim(int32_t id, bool right) {
    Node node = nodes_[id];
    switch (node.kind) {
      case NodeKind::kClass:
      case NodeKind::kStart:
      case NodeKind::kEnd:
        return id;
      case NodeKind::kRepeat:
        if (Anchored(id) || node.min == node.max) return id;
        node.max = node.min;
        return node.min == 0 ? Add(MakeNode(NodeKind::kSeq))
                             : Add(std::move(node));
      case NodeKind::kAlt:
        for (int32_t& c : node.children) c = Trim(c, right);
        return Add(std::move(node));
      case NodeKind::kSeq: {
        std::vector<int32_t>& items = node.children;
        if (!right) std::reverse(items.begin(), items.end());
        while (!items.empty() && !Anchored(items.back()) &&
               Nullable(items.back())) {
          items.pop_back();
        }
        if (!items.empty()) items.back() = Trim(items.back(), right);
        if (!right) std::reverse(items.begin(), items.end());
        return Add(std::move(node));
      }
    }
    return id;
  }

 private:
  int32_t Add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  bool Anchored(int32_t id) const {
    const Node& node = nodes_[id];
    if (node.kind == NodeKind::kStart || node.kind == NodeKind::kEnd) {
      return true;
    }
    for (int32_t c : node.children) {
      if (Anchored(c)) return true;
    }
    return false;
  }

  bool Nullable(int32_t id) const {
    const Node& node = nodes_[id];
    switch (node.kind) {
      case NodeKind::kClass:
        return false;
      case NodeKind::kStart:
      case NodeKind::kEnd:
        return true;
      case NodeKind::kRepeat:
        return node.min == 0 || Nullable(node.children[0]);
      case NodeKind::kAlt:
        for (int32_t c : node.children) {
          if (Nullable(c)) return true;
        }
        return false;
      case NodeKind::kSeq:
        for (int32_t c : node.children) {
          if (!Nullable(c)) return false;
        }
        return true;
    }
    return false;
  }

  std::vector<Node>& nodes_;
};

// The lowering (see the note at the top).
class Lowerer {
 public:
  Lowerer(Grammar* g, const std::vector<Node>& nodes,
          const RegexOptions& options)
      : g_(g), nodes_(nodes), options_(options), start_(g->num_exprs()) {}

  absl::StatusOr<ExprId> Lower(int32_t root);

 private:
  // Index of the context (s, e): s = starts at the start of the text,
  // e = ends at its end.
  static int Ctx(int s, int e) { return s * 2 + e; }

  struct Lowered {
    bool anchored = false;
    std::array<ExprId, 4> n{};  // non-empty matches (see the note at top)
    std::array<bool, 4> z{};    // matches the empty string
  };

  Lowered Plain(ExprId e, bool nullable) {
    Lowered out;
    out.n.fill(e);
    out.z.fill(nullable);
    return out;
  }

  absl::StatusOr<Lowered> LowerNode(int32_t id);
  Lowered Concat(const Lowered& x, const Lowered& y);
  Lowered RepeatOf(const Lowered& x, int32_t min, int32_t max);
  absl::StatusOr<ExprId> Emit(const Ranges& ranges);
  ExprId Seq(std::vector<ExprId> items);
  ExprId Alt(std::vector<ExprId> items);
  absl::Status CheckNodes() const;
  absl::Status CheckTreeSize(ExprId root) const;

  Grammar* const g_;
  const std::vector<Node>& nodes_;
  const RegexOptions& options_;
  const int32_t start_;  // g_->num_exprs() before this pattern
  ExprId empty_ = -1;
  ExprId nothing_ = -1;
  // Shared expressions: one per distinct class, sequence and alternation.
  std::map<std::vector<uint32_t>, ExprId> emitted_;
  std::map<std::pair<bool, std::vector<ExprId>>, ExprId> combined_;
};

absl::StatusOr<ExprId> Lowerer::Lower(int32_t root) {
  empty_ = g_->Empty();
  nothing_ = g_->Nothing();
  ASSIGN_OR_RETURN(Lowered r, LowerNode(root));
  ExprId result = -1;
  if (!options_.search) {
    result = r.anchored
                 ? Alt({r.n[Ctx(1, 1)], r.z[Ctx(1, 1)] ? empty_ : nothing_})
                 : r.n[Ctx(1, 1)];
  } else {
    ASSIGN_OR_RETURN(ExprId any, Emit(Complement({})));
    const ExprId star = g_->Star(any);
    if (!r.anchored) {
      result = Seq({star, r.n[0], star});
    } else {
      std::vector<ExprId> terms = {Seq({star, r.n[Ctx(0, 0)], star}),
                                   Seq({r.n[Ctx(1, 0)], star}),
                                   Seq({star, r.n[Ctx(0, 1)]}), r.n[Ctx(1, 1)]};
      // An empty match inside a non-empty text (at its start, its end or
      // between) makes every text match; one only in the empty text adds
      // just that.
      if (r.z[Ctx(0, 0)] || r.z[Ctx(1, 0)] || r.z[Ctx(0, 1)]) {
        terms.push_back(star);
      } else if (r.z[Ctx(1, 1)]) {
        terms.push_back(empty_);
      }
      result = Alt(std::move(terms));
    }
  }
  RETURN_IF_ERROR(CheckNodes());
  RETURN_IF_ERROR(CheckTreeSize(result));
  return result;
}

absl::StatusOr<Lowerer::Lowered> Lowerer::LowerNode(int32_t id) {
  const Node& node = nodes_[id];
  switch (node.kind) {
    case NodeKind::kClass: {
      ASSIGN_OR_RETURN(ExprId e, Emit(node.ranges));
      return Plain(e, false);
    }
    case NodeKind::kStart:
    case NodeKind::kEnd: {
      Lowered out = Plain(nothing_, false);
      out.anchored = true;
      for (int s = 0; s < 2; ++s) {
        for (int e = 0; e < 2; ++e) {
          out.z[Ctx(s, e)] = node.kind == NodeKind::kStart ? s : e;
        }
      }
      return out;
    }
    case NodeKind::kSeq: {
      // Runs of anchor-free items become one plain sequence each.
      Lowered out = Plain(empty_, true);
      std::vector<ExprId> run;
      bool run_nullable = true;
      auto flush = [&]() {
        if (run.empty()) return;
        out = Concat(out, Plain(Seq(std::move(run)), run_nullable));
        run.clear();
        run_nullable = true;
      };
      for (int32_t child : node.children) {
        ASSIGN_OR_RETURN(Lowered c, LowerNode(child));
        if (c.anchored) {
          flush();
          out = Concat(out, c);
        } else {
          run.push_back(c.n[0]);
          run_nullable = run_nullable && c.z[0];
        }
      }
      flush();
      RETURN_IF_ERROR(CheckNodes());
      return out;
    }
    case NodeKind::kAlt: {
      std::vector<Lowered> children;
      bool anchored = false;
      for (int32_t child : node.children) {
        ASSIGN_OR_RETURN(Lowered c, LowerNode(child));
        anchored = anchored || c.anchored;
        children.push_back(std::move(c));
      }
      Lowered out;
      out.anchored = anchored;
      for (int i = 0; i < 4; ++i) {
        std::vector<ExprId> items;
        out.z[i] = false;
        for (const Lowered& c : children) {
          items.push_back(c.n[i]);
          out.z[i] = out.z[i] || c.z[i];
        }
        out.n[i] = anchored || i == 0 ? Alt(std::move(items)) : out.n[0];
      }
      RETURN_IF_ERROR(CheckNodes());
      return out;
    }
    case NodeKind::kRepeat: {
      ASSIGN_OR_RETURN(Lowered c, LowerNode(node.children[0]));
      return RepeatOf(c, node.min, node.max);
    }
  }
  return absl::InternalError("regex: unknown syntax node");
}

Lowerer::Lowered Lowerer::Concat(const Lowered& x, const Lowered& y) {
  if (!x.anchored && !y.anchored) {
    return Plain(Seq({x.n[0], y.n[0]}), x.z[0] && y.z[0]);
  }
  Lowered out;
  out.anchored = true;
  for (int s = 0; s < 2; ++s) {
    for (int e = 0; e < 2; ++e) {
      std::vector<ExprId> terms = {Seq({x.n[Ctx(s, 0)], y.n[Ctx(0, e)]})};
      if (x.z[Ctx(s, 0)]) terms.push_back(y.n[Ctx(s, e)]);
      if (y.z[Ctx(0, e)]) terms.push_back(x.n[Ctx(s, e)]);
      out.n[Ctx(s, e)] = Alt(std::move(terms));
      out.z[Ctx(s, e)] = x.z[Ctx(s, e)] && y.z[Ctx(s, e)];
    }
  }
  return out;
}

// A non-empty match of X{min,max} is k >= 1 non-empty iterations, the
// first in context (s,0), the middle ones in (0,0), the last in (0,e) (one
// alone: (s,e)); empty iterations make up the count to min when X can
// match empty at the first's start or the last's end.
Lowerer::Lowered Lowerer::RepeatOf(const Lowered& x, int32_t min, int32_t max) {
  if (max == 0) return Plain(empty_, true);
  if (!x.anchored) {
    return Plain(g_->Repeat(x.n[0], min, max), min == 0 || x.z[0]);
  }
  Lowered out;
  out.anchored = true;
  for (int s = 0; s < 2; ++s) {
    for (int e = 0; e < 2; ++e) {
      const bool fill = x.z[Ctx(s, 0)] || x.z[Ctx(0, e)];
      const int32_t kmin = fill ? 1 : std::max(min, 1);
      std::vector<ExprId> terms;
      if (kmin <= 1) terms.push_back(x.n[Ctx(s, e)]);
      if (max == kUnbounded || max >= 2) {
        const ExprId middle =
            g_->Repeat(x.n[Ctx(0, 0)], std::max(kmin, 2) - 2,
                       max == kUnbounded ? kUnbounded : max - 2);
        terms.push_back(Seq({x.n[Ctx(s, 0)], middle, x.n[Ctx(0, e)]}));
      }
      out.n[Ctx(s, e)] = Alt(std::move(terms));
      out.z[Ctx(s, e)] = min == 0 || x.z[Ctx(s, e)];
    }
  }
  return out;
}

absl::StatusOr<ExprId> Lowerer::Emit(const Ranges& ranges) {
  if (ranges.empty()) return nothing_;
  std::vector<uint32_t> key;
  for (CodepointRange r : ranges) {
    key.push_back(r.lo);
    key.push_back(r.hi);
  }
  auto it = emitted_.find(key);
  if (it != emitted_.end()) return it->second;
  const ExprId e =
      options_.emit ? options_.emit(g_, ranges) : g_->Codepoints(ranges);
  emitted_.emplace(std::move(key), e);
  RETURN_IF_ERROR(CheckNodes());
  return e;
}

ExprId Lowerer::Seq(std::vector<ExprId> items) {
  auto key = std::make_pair(false, items);
  auto it = combined_.find(key);
  if (it != combined_.end()) return it->second;
  const ExprId e = g_->Seq(std::move(items));
  combined_.emplace(std::move(key), e);
  return e;
}

ExprId Lowerer::Alt(std::vector<ExprId> items) {
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
  auto key = std::make_pair(true, items);
  auto it = combined_.find(key);
  if (it != combined_.end()) return it->second;
  const ExprId e = g_->Alt(std::move(items));
  combined_.emplace(std::move(key), e);
  return e;
}

absl::Status Lowerer::CheckNodes() const {
  if (g_->num_exprs() - start_ > options_.max_nodes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("regex: the pattern needs more than %d grammar nodes",
                        options_.max_nodes));
  }
  return absl::OkStatus();
}

// The size of `root` as a tree with every repetition unrolled (kUnbounded:
// min + 1 copies), capped just past the limit.
absl::Status Lowerer::CheckTreeSize(ExprId root) const {
  const int64_t cap = int64_t{options_.max_nodes} + 1;
  // Keyed by id, not a vector over g_: the grammar may already be large.
  std::unordered_map<ExprId, int64_t> size;
  auto known = [&size](ExprId id) { return size.count(id) != 0; };
  // Post-order over the DAG without recursion.
  std::vector<std::pair<ExprId, bool>> stack = {{root, false}};
  while (!stack.empty()) {
    auto [id, expanded] = stack.back();
    stack.pop_back();
    if (known(id)) continue;
    const Expr& e = g_->expr(id);
    if (!expanded) {
      stack.push_back({id, true});
      for (ExprId c : e.children) {
        if (!known(c)) stack.push_back({c, false});
      }
      continue;
    }
    int64_t total = 1;
    for (ExprId c : e.children) total = std::min(cap, total + size[c]);
    if (e.kind == ExprKind::kRepeat) {
      const int64_t copies = e.max == kUnbounded ? e.min + 1 : e.max;
      total = std::min(cap, 1 + size[e.children[0]] * copies);
    }
    size[id] = total;
  }
  if (size[root] > options_.max_nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "regex: the pattern expands to more than %d grammar nodes (nested "
        "or large repetitions)",
        options_.max_nodes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExprId> AddRegex(Grammar* g, absl::string_view pattern,
                                const RegexOptions& options) {
  ASSIGN_OR_RETURN(regex_internal::Syntax syntax,
                   regex_internal::ParseRegex(pattern, options.max_repeat));
  int32_t root = syntax.root;
  if (options.search) {
    EdgeTrimmer trimmer(&syntax.nodes);
    root = trimmer.Trim(trimmer.Trim(root, /*right=*/true), /*right=*/false);
  }
  Lowerer lowerer(g, syntax.nodes, options);
  return lowerer.Lower(root);
}

}  // namespace paceline::engine::grammar
