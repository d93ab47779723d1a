#include "engine/sampling/grammar/grammar.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace paceline::engine::grammar {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

// Sorted, merged, surrogates removed, clipped to kMaxCodepoint.
std::vector<CodepointRange> NormalizeCodepoints(
    std::vector<CodepointRange> ranges) {
  std::vector<CodepointRange> cut;
  for (CodepointRange r : ranges) {
    if (r.lo > r.hi || r.lo > kMaxCodepoint) continue;
    r.hi = std::min(r.hi, kMaxCodepoint);
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      cut.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) cut.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) cut.push_back({kSurrogateHi + 1, r.hi});
  }
  std::sort(cut.begin(), cut.end(),
            [](CodepointRange a, CodepointRange b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (CodepointRange r : cut) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

// The largest code point whose UTF-8 form has `len` bytes.
uint32_t MaxOfLength(int len) {
  static constexpr uint32_t kMax[] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  return kMax[len];
}

int Utf8Length(uint32_t cp) {
  return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4;
}

Expr Make(ExprKind kind) {
  Expr e;
  e.kind = kind;
  return e;
}

int Encode(uint32_t cp, uint8_t out[4]) {
  int len = Utf8Length(cp);
  if (len == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = len - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[len] | cp);
  return len;
}

// [lo, hi] with both ends of the same UTF-8 length: split until every
// continuation position spans either one byte or its full 80-BF range, so
// each piece is one sequence of ranges (the classic construction).
void SplitSameLength(uint32_t lo, uint32_t hi,
                     std::vector<std::vector<ByteRange>>* out) {
  int len = Utf8Length(lo);
  for (int i = 1; i < len; ++i) {
    uint32_t mask = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        SplitSameLength(lo, lo | mask, out);
        SplitSameLength((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        SplitSameLength(lo, (hi & ~mask) - 1, out);
        SplitSameLength(hi & ~mask, hi, out);
        return;
      }
    }
  }
  uint8_t a[4];
  uint8_t b[4];
  Encode(lo, a);
  Encode(hi, b);
  std::vector<ByteRange> seq(len);
  for (int i = 0; i < len; ++i) seq[i] = {a[i], b[i]};
  out->push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<ByteRange>> Utf8Sequences(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<ByteRange>> out;
  for (int len = 1; len <= 4 && lo <= hi; ++len) {
    uint32_t top = MaxOfLength(len);
    if (lo > top) continue;
    uint32_t end = std::min(hi, top);
    SplitSameLength(lo, end, &out);
    lo = end + 1;
  }
  return out;
}

ExprId Grammar::Add(Expr expr) {
  exprs_.push_back(std::move(expr));
  return static_cast<ExprId>(exprs_.size() - 1);
}

ExprId Grammar::Empty() { return Add(Make(ExprKind::kEmpty)); }

ExprId Grammar::Nothing() { return Add(Make(ExprKind::kNothing)); }

ExprId Grammar::Bytes(std::vector<ByteRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](ByteRange a, ByteRange b) { return a.lo < b.lo; });
  std::vector<ByteRange> merged;
  for (ByteRange r : ranges) {
    if (r.lo > r.hi) continue;
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (merged.empty()) return Nothing();
  Expr e = Make(ExprKind::kBytes);
  e.ranges = std::move(merged);
  return Add(std::move(e));
}

ExprId Grammar::Literal(absl::string_view bytes) {
  std::vector<ExprId> items;
  items.reserve(bytes.size());
  for (char c : bytes) items.push_back(Byte(static_cast<uint8_t>(c)));
  return Seq(std::move(items));
}

ExprId Grammar::Codepoints(std::vector<CodepointRange> ranges) {
  std::vector<ExprId> alternatives;
  std::vector<ByteRange> ascii;
  for (CodepointRange r : NormalizeCodepoints(std::move(ranges))) {
    for (const std::vector<ByteRange>& seq : Utf8Sequences(r.lo, r.hi)) {
      if (seq.size() == 1) {
        ascii.push_back(seq[0]);
        continue;
      }
      std::vector<ExprId> items;
      for (ByteRange b : seq) items.push_back(Bytes({b}));
      alternatives.push_back(Seq(std::move(items)));
    }
  }
  if (!ascii.empty()) alternatives.insert(alternatives.begin(), Bytes(ascii));
  return Alt(std::move(alternatives));
}

ExprId Grammar::NotCodepoints(std::vector<CodepointRange> ranges) {
  std::vector<CodepointRange> complement;
  uint32_t next = 0;
  for (CodepointRange r : NormalizeCodepoints(std::move(ranges))) {
    if (r.lo > next) complement.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
  return Codepoints(std::move(complement));
}

ExprId Grammar::Seq(std::vector<ExprId> items) {
  std::vector<ExprId> kept;
  for (ExprId id : items) {
    const Expr& e = exprs_[id];
    if (e.kind == ExprKind::kNothing) return Nothing();
    if (e.kind == ExprKind::kEmpty) continue;
    if (e.kind == ExprKind::kSeq) {
      kept.insert(kept.end(), e.children.begin(), e.children.end());
    } else {
      kept.push_back(id);
    }
  }
  if (kept.empty()) return Empty();
  if (kept.size() == 1) return kept[0];
  Expr e = Make(ExprKind::kSeq);
  e.children = std::move(kept);
  return Add(std::move(e));
}

ExprId Grammar::Alt(std::vector<ExprId> items) {
  std::vector<ExprId> kept;
  for (ExprId id : items) {
    if (exprs_[id].kind != ExprKind::kNothing) kept.push_back(id);
  }
  if (kept.empty()) return Nothing();
  if (kept.size() == 1) return kept[0];
  Expr e = Make(ExprKind::kAlt);
  e.children = std::move(kept);
  return Add(std::move(e));
}

ExprId Grammar::Repeat(ExprId item, int32_t min, int32_t max) {
  if (max == 0) return Empty();
  if (min == 1 && max == 1) return item;
  const ExprKind kind = exprs_[item].kind;
  if (kind == ExprKind::kEmpty) return item;
  if (kind == ExprKind::kNothing) return min == 0 ? Empty() : item;
  Expr e = Make(ExprKind::kRepeat);
  e.min = min;
  e.max = max;
  e.children = {item};
  return Add(std::move(e));
}

RuleId Grammar::AddRule(std::string name) {
  rules_.push_back(Rule{std::move(name), -1});
  return static_cast<RuleId>(rules_.size() - 1);
}

void Grammar::SetRule(RuleId rule, ExprId body) { rules_[rule].body = body; }

ExprId Grammar::Ref(RuleId rule) {
  Expr e = Make(ExprKind::kRef);
  e.rule = rule;
  return Add(std::move(e));
}

RuleId Grammar::FindRule(absl::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].name == name) return static_cast<RuleId>(i);
  }
  return -1;
}

absl::Status Grammar::Validate() const {
  const int32_t n = num_exprs();
  if (root_ < 0 || root_ >= num_rules()) {
    return absl::InvalidArgumentError("the grammar has no root rule");
  }
  for (const Rule& r : rules_) {
    if (r.body < 0 || r.body >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule '", r.name, "' is referenced but never defined"));
    }
  }
  for (const Expr& e : exprs_) {
    for (ExprId c : e.children) {
      if (c < 0 || c >= n) {
        return absl::InvalidArgumentError("an expression names no node");
      }
    }
    if (e.kind == ExprKind::kRef && (e.rule < 0 || e.rule >= num_rules())) {
      return absl::InvalidArgumentError("a reference names no rule");
    }
    if (e.kind == ExprKind::kRepeat &&
        (e.children.size() != 1 || e.min < 0 ||
         (e.max != kUnbounded && e.max < e.min))) {
      return absl::InvalidArgumentError(
          absl::StrFormat("a repetition {%d,%d} is malformed", e.min, e.max));
    }
  }
  return absl::OkStatus();
}

namespace {

std::string ByteText(uint8_t b) {
  if (b >= 0x20 && b < 0x7F && b != ']' && b != '\\' && b != '-' && b != '^' &&
      b != '"') {
    return std::string(1, static_cast<char>(b));
  }
  return absl::StrFormat("\\x%02X", b);
}

void Print(const Grammar& g, ExprId id, std::string* out) {
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case ExprKind::kEmpty:
      absl::StrAppend(out, "\"\"");
      return;
    case ExprKind::kNothing:
      absl::StrAppend(out, "[]");
      return;
    case ExprKind::kBytes:
      absl::StrAppend(out, "[");
      for (ByteRange r : e.ranges) {
        absl::StrAppend(out, ByteText(r.lo));
        if (r.hi != r.lo) absl::StrAppend(out, "-", ByteText(r.hi));
      }
      absl::StrAppend(out, "]");
      return;
    case ExprKind::kSeq:
    case ExprKind::kAlt:
      absl::StrAppend(out, "(");
      for (size_t i = 0; i < e.children.size(); ++i) {
        if (i > 0) absl::StrAppend(out, e.kind == ExprKind::kAlt ? " | " : " ");
        Print(g, e.children[i], out);
      }
      absl::StrAppend(out, ")");
      return;
    case ExprKind::kRepeat:
      Print(g, e.children[0], out);
      if (e.max == kUnbounded) {
        absl::StrAppend(out, "{", e.min, ",}");
      } else {
        absl::StrAppend(out, "{", e.min, ",", e.max, "}");
      }
      return;
    case ExprKind::kRef:
      absl::StrAppend(out, g.rule(e.rule).name);
      return;
  }
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (const Rule& r : rules_) {
    absl::StrAppend(&out, r.name, " ::= ");
    if (r.body >= 0) Print(*this, r.body, &out);
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace paceline::engine::grammar
