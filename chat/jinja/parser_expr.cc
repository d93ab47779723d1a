// The parser's expressions, with jinja2's precedence (lowest first):
// inline if, or, and, not, comparisons (in, not in), + -, ~, * / // %, **,
// unary - +, then postfix (. [] ()), filters and tests.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/parser_impl.h"

namespace paceline::chat::jinja {

// Counts one level of parser recursion for the life of the guard.
class DepthGuard {
 public:
  explicit DepthGuard(Parser* p) : p_(p), status_(p->Enter()) {}
  ~DepthGuard() {
    if (status_.ok()) p_->Leave();
  }
  const absl::Status& status() const { return status_; }

 private:
  Parser* p_;
  absl::Status status_;
};

#define PACELINE_JINJA_GUARD()  \
  DepthGuard depth_guard(this); \
  if (!depth_guard.status().ok()) return depth_guard.status()

absl::Status Parser::CheckDepth(Expr* node) {
  int depth = 0;
  for (const ExprPtr& a : node->args) {
    if (a != nullptr) depth = std::max(depth, a->depth);
  }
  for (const auto& [name, a] : node->kwargs) {
    if (a != nullptr) depth = std::max(depth, a->depth);
  }
  node->depth = depth + 1;
  if (node->depth > max_depth_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template: line ", node->line, ", column ", node->column,
        ": expression nesting depth limit (", max_depth_, ") reached"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::Make(Expr::Type type, const Token& at,
                                     std::vector<ExprPtr> args,
                                     std::string name) {
  auto e = std::make_unique<Expr>();
  e->type = type;
  e->line = at.line;
  e->column = at.column;
  e->args = std::move(args);
  e->name = std::move(name);
  RETURN_IF_ERROR(CheckDepth(e.get()));
  return e;
}

namespace {
std::vector<ExprPtr> Args(ExprPtr a, ExprPtr b = nullptr, ExprPtr c = nullptr) {
  std::vector<ExprPtr> v;
  v.push_back(std::move(a));
  if (b != nullptr) v.push_back(std::move(b));
  if (c != nullptr) v.push_back(std::move(c));
  return v;
}
}  // namespace

bool Parser::IsTupleEnd(absl::string_view extra_end) const {
  if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || IsOp(")")) {
    return true;
  }
  return !extra_end.empty() && IsName(extra_end);
}

absl::StatusOr<ExprPtr> Parser::ParseTuple(bool with_condexpr,
                                           absl::string_view extra_end,
                                           bool explicit_parens) {
  const Token& at = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
    items.push_back(std::move(e));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) return Unexpected();
  }
  return Make(Expr::Type::kTuple, at, std::move(items));
}

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  PACELINE_JINJA_GUARD();
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

absl::StatusOr<ExprPtr> Parser::ParseCondExpr() {
  ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
  while (IsName("if")) {
    const Token& at = cur();
    Advance();
    ++soft_;
    ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr else_expr;
    if (SkipName("else")) {
      PACELINE_JINJA_GUARD();
      ASSIGN_OR_RETURN(else_expr, ParseCondExpr());
    }
    --soft_;
    std::vector<ExprPtr> args;
    args.push_back(std::move(cond));
    args.push_back(std::move(expr1));
    args.push_back(std::move(else_expr));
    ASSIGN_OR_RETURN(expr1, Make(Expr::Type::kCond, at, std::move(args)));
  }
  return expr1;
}

absl::StatusOr<ExprPtr> Parser::ParseOr() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (IsName("or")) {
    const Token& at = cur();
    Advance();
    ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    ASSIGN_OR_RETURN(left, Make(Expr::Type::kOr, at,
                                Args(std::move(left), std::move(right))));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseAnd() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (IsName("and")) {
    const Token& at = cur();
    Advance();
    ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    ASSIGN_OR_RETURN(left, Make(Expr::Type::kAnd, at,
                                Args(std::move(left), std::move(right))));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (IsName("not")) {
    PACELINE_JINJA_GUARD();
    const Token& at = cur();
    Advance();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    return Make(Expr::Type::kNot, at, Args(std::move(operand)));
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  const Token& at = cur();
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  std::vector<ExprPtr> operands;
  std::vector<std::string> ops;
  operands.push_back(std::move(first));
  while (true) {
    std::string op;
    if (cur().type == Tok::kOp &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
         cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      Advance();
    } else if (IsName("in")) {
      op = "in";
      Advance();
    } else if (IsName("not") && peek().type == Tok::kName &&
               peek().text == "in") {
      op = "notin";
      Advance();
      Advance();
    } else {
      break;
    }
    ASSIGN_OR_RETURN(ExprPtr next, ParseMath1());
    operands.push_back(std::move(next));
    ops.push_back(std::move(op));
  }
  if (ops.empty()) return std::move(operands[0]);
  ASSIGN_OR_RETURN(ExprPtr cmp,
                   Make(Expr::Type::kCompare, at, std::move(operands)));
  cmp->ops = std::move(ops);
  return cmp;
}

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    const Token& at = cur();
    Advance();
    ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    ASSIGN_OR_RETURN(left,
                     Make(Expr::Type::kBinary, at,
                          Args(std::move(left), std::move(right)), at.text));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
  while (IsOp("~")) {
    const Token& at = cur();
    Advance();
    ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
    ASSIGN_OR_RETURN(left, Make(Expr::Type::kBinary, at,
                                Args(std::move(left), std::move(right)), "~"));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
  ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const Token& at = cur();
    Advance();
    ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    ASSIGN_OR_RETURN(left,
                     Make(Expr::Type::kBinary, at,
                          Args(std::move(left), std::move(right)), at.text));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (IsOp("**")) {
    const Token& at = cur();
    Advance();
    ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    ASSIGN_OR_RETURN(left, Make(Expr::Type::kBinary, at,
                                Args(std::move(left), std::move(right)), "**"));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  PACELINE_JINJA_GUARD();
  const Token& at = cur();
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    Expr::Type type = IsOp("-") ? Expr::Type::kNeg : Expr::Type::kPos;
    Advance();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    ASSIGN_OR_RETURN(node, Make(type, at, Args(std::move(operand))));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& t = cur();
  if (t.type == Tok::kName) {
    ExprPtr node;
    if (t.text == "true" || t.text == "True" || t.text == "false" ||
        t.text == "False") {
      ASSIGN_OR_RETURN(node, Make(Expr::Type::kLiteral, t, {}));
      node->value = Value::Bool(t.text == "true" || t.text == "True");
    } else if (t.text == "none" || t.text == "None") {
      ASSIGN_OR_RETURN(node, Make(Expr::Type::kLiteral, t, {}));
      node->value = Value::None();
    } else {
      ASSIGN_OR_RETURN(node, Make(Expr::Type::kName, t, {}, t.text));
    }
    Advance();
    return node;
  }
  if (t.type == Tok::kString) {
    std::string s;
    while (cur().type == Tok::kString) {
      s += cur().text;
      Advance();
    }
    ASSIGN_OR_RETURN(ExprPtr node, Make(Expr::Type::kLiteral, t, {}));
    node->value = Value::Str(std::move(s));
    return node;
  }
  if (t.type == Tok::kInt || t.type == Tok::kFloat) {
    ASSIGN_OR_RETURN(ExprPtr node, Make(Expr::Type::kLiteral, t, {}));
    node->value = t.type == Tok::kInt ? Value::Int(t.int_value)
                                      : Value::Float(t.float_value);
    Advance();
    return node;
  }
  if (IsOp("(")) {
    Advance();
    ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(true, "", true));
    RETURN_IF_ERROR(ExpectOp(")"));
    return node;
  }
  if (IsOp("[")) return ParseList();
  if (IsOp("{")) return ParseDict();
  return Unexpected();
}

absl::StatusOr<ExprPtr> Parser::ParseList() {
  const Token& at = cur();
  Advance();
  std::vector<ExprPtr> items;
  while (!IsOp("]")) {
    if (!items.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("]")) break;
    ASSIGN_OR_RETURN(ExprPtr e, ParseExpression());
    items.push_back(std::move(e));
  }
  Advance();
  return Make(Expr::Type::kList, at, std::move(items));
}

absl::StatusOr<ExprPtr> Parser::ParseDict() {
  const Token& at = cur();
  Advance();
  std::vector<ExprPtr> items;
  while (!IsOp("}")) {
    if (!items.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("}")) break;
    ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
    RETURN_IF_ERROR(ExpectOp(":"));
    ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    items.push_back(std::move(key));
    items.push_back(std::move(value));
  }
  Advance();
  return Make(Expr::Type::kDict, at, std::move(items));
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
    } else if (IsName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  const Token& at = cur();
  if (SkipOp(".")) {
    if (cur().type == Tok::kName) {
      std::string attr = cur().text;
      Advance();
      return Make(Expr::Type::kGetAttr, at, Args(std::move(node)), attr);
    }
    if (cur().type != Tok::kInt) return Fail(cur(), "expected name or number");
    ASSIGN_OR_RETURN(ExprPtr index, Make(Expr::Type::kLiteral, cur(), {}));
    index->value = Value::Int(cur().int_value);
    Advance();
    return Make(Expr::Type::kGetItem, at,
                Args(std::move(node), std::move(index)));
  }
  Advance();  // [
  std::vector<ExprPtr> subs;
  while (!IsOp("]")) {
    if (!subs.empty()) {
      RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
    }
    ASSIGN_OR_RETURN(ExprPtr sub, ParseSubscribed());
    subs.push_back(std::move(sub));
  }
  RETURN_IF_ERROR(ExpectOp("]"));
  if (subs.empty()) return Fail(at, "expected a subscript");
  ExprPtr index;
  if (subs.size() == 1) {
    index = std::move(subs[0]);
  } else {
    // x[a:b, c] would index with a tuple holding a slice object, which
    // values cannot be (jinja2 fails to compile it but for constants).
    for (const ExprPtr& sub : subs) {
      if (sub->type == Expr::Type::kSlice) {
        return Fail(at, "a slice inside a tuple subscript is not supported");
      }
    }
    ASSIGN_OR_RETURN(index, Make(Expr::Type::kTuple, at, std::move(subs)));
  }
  if (index->type == Expr::Type::kSlice) {
    index->args[0] = std::move(node);
    RETURN_IF_ERROR(CheckDepth(index.get()));
    return index;
  }
  return Make(Expr::Type::kGetItem, at,
              Args(std::move(node), std::move(index)));
}

absl::StatusOr<ExprPtr> Parser::ParseSubscribed() {
  const Token& at = cur();
  ExprPtr start, stop, step;
  if (!IsOp(":")) {
    ASSIGN_OR_RETURN(start, ParseExpression());
    if (!IsOp(":")) return start;
  }
  Advance();  // :
  if (!IsOp("]") && !IsOp(",") && !IsOp(":")) {
    ASSIGN_OR_RETURN(stop, ParseExpression());
  }
  if (SkipOp(":") && !IsOp("]") && !IsOp(",")) {
    ASSIGN_OR_RETURN(step, ParseExpression());
  }
  auto e = std::make_unique<Expr>();
  e->type = Expr::Type::kSlice;
  e->line = at.line;
  e->column = at.column;
  e->args.resize(4);
  e->args[1] = std::move(start);
  e->args[2] = std::move(stop);
  e->args[3] = std::move(step);
  return e;
}

absl::Status Parser::ParseCallArgs(Expr* call) {
  RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!IsOp(")")) {
    if (!first) {
      RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    first = false;
    if (IsOp("*") || IsOp("**")) {
      return Fail(cur(), "*args and **kwargs are not supported");
    }
    if (cur().type == Tok::kName && peek().type == Tok::kOp &&
        peek().text == "=") {
      std::string key = cur().text;
      Advance();
      Advance();
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!call->kwargs.empty()) {
        return Fail(cur(), "positional argument follows keyword argument");
      }
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->args.push_back(std::move(value));
    }
  }
  Advance();
  return CheckDepth(call);
}

absl::StatusOr<ExprPtr> Parser::ParseCall(ExprPtr node) {
  ASSIGN_OR_RETURN(ExprPtr call,
                   Make(Expr::Type::kCall, cur(), Args(std::move(node))));
  RETURN_IF_ERROR(ParseCallArgs(call.get()));
  return call;
}

absl::StatusOr<std::string> Parser::ParseDottedName() {
  ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
  while (IsOp(".")) {
    Advance();
    ASSIGN_OR_RETURN(std::string part, ExpectAnyName());
    absl::StrAppend(&name, ".", part);
  }
  return name;
}

absl::StatusOr<ExprPtr> Parser::ParseFilter(ExprPtr node, bool start_inline) {
  while (IsOp("|") || start_inline) {
    if (!start_inline) Advance();
    start_inline = false;
    const Token& at = cur();
    ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    if (soft_ == 0 && !IsKnownFilter(name)) {
      return Fail(at, absl::StrCat("no filter named '", name, "'"));
    }
    std::vector<ExprPtr> args;
    args.push_back(std::move(node));
    auto filter = std::make_unique<Expr>();
    filter->type = Expr::Type::kFilter;
    filter->line = at.line;
    filter->column = at.column;
    filter->name = std::move(name);
    filter->args = std::move(args);
    if (IsOp("(")) {
      RETURN_IF_ERROR(ParseCallArgs(filter.get()));
    } else {
      RETURN_IF_ERROR(CheckDepth(filter.get()));
    }
    node = std::move(filter);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseTest(ExprPtr node) {
  const Token& at = cur();
  Advance();  // is
  bool negated = SkipName("not");
  const Token& name_at = cur();
  ASSIGN_OR_RETURN(std::string name, ParseDottedName());
  if (soft_ == 0 && !IsKnownTest(name)) {
    return Fail(name_at, absl::StrCat("no test named '", name, "'"));
  }
  auto test = std::make_unique<Expr>();
  test->type = Expr::Type::kTest;
  test->line = at.line;
  test->column = at.column;
  test->name = std::move(name);
  test->args.push_back(std::move(node));
  if (IsOp("(")) {
    RETURN_IF_ERROR(ParseCallArgs(test.get()));
  } else {
    bool arg_start = cur().type == Tok::kName || cur().type == Tok::kString ||
                     cur().type == Tok::kInt || cur().type == Tok::kFloat ||
                     IsOp("[") || IsOp("{");
    if (arg_start && !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Fail(cur(), "you cannot chain tests with is");
      PACELINE_JINJA_GUARD();
      ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      test->args.push_back(std::move(arg));
    }
    RETURN_IF_ERROR(CheckDepth(test.get()));
  }
  if (!negated) return test;
  return Make(Expr::Type::kNot, at, Args(std::move(test)));
}

}  // namespace paceline::chat::jinja
