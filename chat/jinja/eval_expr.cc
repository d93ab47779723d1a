// The evaluator's expressions.
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/eval.h"
#include "chat/jinja/objects.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::chat::jinja {
namespace {

// A value the template made (not one it was given, or a part of one) stays
// within the output limit by weight and within the depth limit: a list
// holding a list twice, doubled 40 times, is small in memory but would take
// 2^40 steps to print, compare or serialize.
absl::Status CheckMade(const Expr& e, const Value& v, const EvalLimits& l) {
  if (e.type == Expr::Type::kName || e.type == Expr::Type::kLiteral ||
      e.type == Expr::Type::kGetAttr || e.type == Expr::Type::kGetItem) {
    return absl::OkStatus();
  }
  if (Weight(v) > l.max_output_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: line ", e.line, ": a value over the ",
                     "output size limit (", l.max_output_bytes, " bytes)"));
  }
  if (Depth(v) > l.max_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: line ", e.line, ": a value nested past ",
                     "the depth limit (", l.max_depth, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Value> Evaluator::Eval(const Expr& e, const FramePtr& frame) {
  if (++depth_ > 4 * limits_.max_depth) {
    --depth_;
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: nesting depth limit (", limits_.max_depth,
                     ") reached"));
  }
  absl::StatusOr<Value> v = EvalInner(e, frame);
  --depth_;
  if (v.ok()) RETURN_IF_ERROR(CheckMade(e, *v, limits_));
  if (!v.ok() && v.status().code() == absl::StatusCode::kInvalidArgument &&
      !absl::StartsWith(v.status().message(), "chat template:")) {
    return Error(e.line, v.status().message());
  }
  return v;
}

absl::StatusOr<Value> Evaluator::EvalInner(const Expr& e,
                                           const FramePtr& frame) {
  switch (e.type) {
    case Expr::Type::kLiteral:
      return e.value;
    case Expr::Type::kName:
      return EvalName(e, frame);
    case Expr::Type::kList:
    case Expr::Type::kTuple:
    case Expr::Type::kDict:
      return EvalCollection(e, frame);
    case Expr::Type::kGetAttr: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
      return GetAttr(obj, e.name);
    }
    case Expr::Type::kGetItem: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
      ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], frame));
      return GetItem(obj, key);
    }
    case Expr::Type::kSlice:
      return EvalSlice(e, frame);
    case Expr::Type::kCall:
      return EvalCall(e, frame);
    case Expr::Type::kFilter:
      return EvalFilter(e, frame, nullptr);
    case Expr::Type::kTest:
      return EvalTest(e, frame);
    case Expr::Type::kNot: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Type::kNeg:
    case Expr::Type::kPos: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
      if (v.is_undefined()) return UndefinedError(v);
      if (!v.is_number()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "TypeError: bad operand type for unary -: '", v.TypeName(), "'"));
      }
      if (e.type == Expr::Type::kPos) {
        return v.is_float() ? v : Value::Int(v.as_int());
      }
      if (v.is_float()) return Value::Float(-v.as_double());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) {
        return absl::InvalidArgumentError("OverflowError: integer overflow");
      }
      return Value::Int(-v.as_int());
    }
    case Expr::Type::kBinary: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
      ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], frame));
      return BinaryOp(e.name, a, b, *this);
    }
    case Expr::Type::kAnd: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
      if (!a.Truthy()) return a;
      return Eval(*e.args[1], frame);
    }
    case Expr::Type::kOr: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
      if (a.Truthy()) return a;
      return Eval(*e.args[1], frame);
    }
    case Expr::Type::kCompare:
      return EvalCompare(e, frame);
    case Expr::Type::kCond: {
      ASSIGN_OR_RETURN(Value cond, Eval(*e.args[0], frame));
      if (cond.Truthy()) return Eval(*e.args[1], frame);
      if (e.args[2] == nullptr) {
        return Value::Undefined("the inline if-expression on line " +
                                std::to_string(e.line) +
                                " evaluated to false and no else section "
                                "was defined.");
      }
      return Eval(*e.args[2], frame);
    }
  }
  return Value();
}

absl::StatusOr<Value> Evaluator::EvalName(const Expr& e,
                                          const FramePtr& frame) {
  const Value* v = frame->Find(e.name);
  if (v == nullptr) return Value::Undefined("'" + e.name + "' is undefined");
  return *v;
}

absl::StatusOr<Value> Evaluator::EvalCollection(const Expr& e,
                                                const FramePtr& frame) {
  std::vector<Value> items;
  items.reserve(e.args.size());
  for (const ExprPtr& a : e.args) {
    ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
    items.push_back(std::move(v));
  }
  if (e.type == Expr::Type::kList) return Value::List(std::move(items));
  if (e.type == Expr::Type::kTuple) {
    return Value::List(std::move(items), SeqKind::kTuple);
  }
  std::vector<std::pair<Value, Value>> pairs;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    bool replaced = false;
    for (auto& [k, v] : pairs) {
      if (Equal(k, items[i])) {
        v = items[i + 1];
        replaced = true;
      }
    }
    if (!replaced) pairs.emplace_back(items[i], items[i + 1]);
  }
  return Value::Dict(std::move(pairs));
}

namespace {

// Python's slice.indices for a sequence of length n.
absl::Status SliceIndices(const Value* start, const Value* stop,
                          const Value* step, int64_t n,
                          std::vector<int64_t>* out) {
  for (const Value* v : {start, stop, step}) {
    if (v != nullptr && !v->is_none() && !v->is_int() && !v->is_bool()) {
      return absl::InvalidArgumentError(
          "TypeError: slice indices must be integers or None");
    }
  }
  auto given = [](const Value* v) { return v != nullptr && !v->is_none(); };
  int64_t st = given(step) ? step->as_int() : 1;
  if (st == 0) {
    return absl::InvalidArgumentError("ValueError: slice step cannot be zero");
  }
  int64_t lower = st < 0 ? -1 : 0, upper = st < 0 ? n - 1 : n;
  auto clamp = [&](const Value* v, int64_t dflt) {
    if (!given(v)) return dflt;
    int64_t i = v->as_int();
    if (i < 0) {
      i += n;
      if (i < lower) i = lower;
    } else if (i > upper) {
      i = upper;
    }
    return i;
  };
  int64_t b = clamp(start, st < 0 ? upper : lower);
  int64_t e = clamp(stop, st < 0 ? lower : upper);
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out->push_back(i);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Value> Evaluator::EvalSlice(const Expr& e,
                                           const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
  Value parts[3];
  const Value* ptrs[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i) {
    if (e.args[i + 1] == nullptr) continue;
    ASSIGN_OR_RETURN(parts[i], Eval(*e.args[i + 1], frame));
    ptrs[i] = &parts[i];
  }
  if (obj.is_undefined()) return UndefinedError(obj);
  std::vector<int64_t> idx;
  if (obj.is_str()) {
    std::vector<uint32_t> cps = Codepoints(obj.str());
    RETURN_IF_ERROR(SliceIndices(ptrs[0], ptrs[1], ptrs[2],
                                 static_cast<int64_t>(cps.size()), &idx));
    std::string out;
    for (int64_t i : idx) engine::AppendUtf8(cps[i], &out);
    return Value::Str(std::move(out));
  }
  if (obj.is_list() && obj.list().seq != SeqKind::kGenerator) {
    RETURN_IF_ERROR(SliceIndices(ptrs[0], ptrs[1], ptrs[2],
                                 static_cast<int64_t>(obj.items().size()),
                                 &idx));
    std::vector<Value> items;
    for (int64_t i : idx) items.push_back(obj.items()[i]);
    return Value::List(std::move(items), obj.list().seq);
  }
  return Value::Undefined("the value cannot be sliced");
}

absl::StatusOr<CallArgs> Evaluator::EvalArgs(const Expr& e, size_t first,
                                             const FramePtr& frame) {
  CallArgs args;
  args.line = e.line;
  for (size_t i = first; i < e.args.size(); ++i) {
    if (e.args[i] == nullptr) continue;
    ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], frame));
    args.pos.push_back(std::move(v));
  }
  for (const auto& [k, a] : e.kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
    args.kw.emplace_back(k, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Evaluator::CallValue(const Value& callee,
                                           CallArgs& args) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (!callee.is_callable()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TypeError: '", callee.TypeName(), "' object is not callable"));
  }
  return callee.object()->Call(args, *this);
}

absl::StatusOr<Value> Evaluator::EvalCall(const Expr& e,
                                          const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0], frame));
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
  return CallValue(callee, args);
}

absl::StatusOr<Value> Evaluator::EvalFilter(const Expr& e,
                                            const FramePtr& frame,
                                            const Value* input) {
  Value v;
  if (e.args[0] != nullptr) {
    if (e.args[0]->type == Expr::Type::kFilter) {
      ASSIGN_OR_RETURN(v, EvalFilter(*e.args[0], frame, input));
    } else {
      ASSIGN_OR_RETURN(v, Eval(*e.args[0], frame));
    }
  } else if (input != nullptr) {
    v = *input;
  }
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
  return ApplyFilter(e.name, v, args, *this);
}

absl::StatusOr<Value> Evaluator::EvalTest(const Expr& e,
                                          const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
  ASSIGN_OR_RETURN(bool result, ApplyTest(e.name, v, args, *this));
  return Value::Bool(result);
}

absl::StatusOr<Value> Evaluator::EvalCompare(const Expr& e,
                                             const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], frame));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1], frame));
    const std::string& op = e.ops[i];
    bool result;
    if (op == "==" || op == "!=") {
      result = Equal(left, right) == (op == "==");
    } else if (op == "in" || op == "notin") {
      ASSIGN_OR_RETURN(bool in, Contains(right, left));
      result = in == (op == "in");
    } else {
      if (left.is_undefined()) return UndefinedError(left);
      if (right.is_undefined()) return UndefinedError(right);
      if (op == "<") {
        ASSIGN_OR_RETURN(result, Less(left, right));
      } else if (op == ">") {
        ASSIGN_OR_RETURN(result, Less(right, left));
      } else if (op == "<=") {
        ASSIGN_OR_RETURN(bool gt, Less(right, left));
        result = !gt;
        if (!left.is_number() || !right.is_number()) {
          ASSIGN_OR_RETURN(bool lt, Less(left, right));
          result = lt || Equal(left, right);
        }
      } else {
        ASSIGN_OR_RETURN(bool lt, Less(left, right));
        result = !lt;
        if (!left.is_number() || !right.is_number()) {
          ASSIGN_OR_RETURN(bool gt, Less(right, left));
          result = gt || Equal(left, right);
        }
      }
    }
    if (!result) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

}  // namespace paceline::chat::jinja
