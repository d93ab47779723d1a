// The parser's statements: the template body and each `{% tag %}`.
#include "chat/jinja/parser.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/jinja/parser_impl.h"

namespace paceline::chat::jinja {

bool Parser::SkipOp(absl::string_view op) {
  if (!IsOp(op)) return false;
  Advance();
  return true;
}

bool Parser::SkipName(absl::string_view name) {
  if (!IsName(name)) return false;
  Advance();
  return true;
}

absl::Status Parser::Fail(const Token& at, absl::string_view what) const {
  return SyntaxError(at.line, at.column, what);
}

absl::Status Parser::Unexpected() const {
  switch (cur().type) {
    case Tok::kEof:
      return Fail(cur(), "unexpected end of template");
    case Tok::kBlockEnd:
      return Fail(cur(), "unexpected end of statement block");
    case Tok::kVarEnd:
      return Fail(cur(), "unexpected end of print statement");
    case Tok::kText:
      return Fail(cur(), "unexpected template data");
    default:
      return Fail(cur(), absl::StrCat("unexpected '", cur().text, "'"));
  }
}

absl::Status Parser::ExpectOp(absl::string_view op) {
  if (SkipOp(op)) return absl::OkStatus();
  if (cur().type == Tok::kEof || cur().type == Tok::kBlockEnd ||
      cur().type == Tok::kVarEnd) {
    return Fail(cur(), absl::StrCat("expected '", op, "'"));
  }
  return Fail(cur(),
              absl::StrCat("expected '", op, "', got '", cur().text, "'"));
}

absl::Status Parser::ExpectName(absl::string_view name) {
  if (SkipName(name)) return absl::OkStatus();
  return Fail(cur(), absl::StrCat("expected '", name, "'"));
}

absl::StatusOr<std::string> Parser::ExpectAnyName() {
  if (cur().type != Tok::kName) return Fail(cur(), "expected a name");
  std::string name = cur().text;
  Advance();
  return name;
}

absl::Status Parser::ExpectBlockEnd() {
  SkipOp(":");
  if (cur().type != Tok::kBlockEnd) {
    return Fail(cur(), "expected the end of the statement block");
  }
  Advance();
  return absl::OkStatus();
}

absl::Status Parser::Enter() {
  if (++depth_ > max_depth_) {
    --depth_;
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template: line ", cur().line, ", column ", cur().column,
        ": nesting depth limit (", max_depth_, ") reached"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Body> Parser::ParseTemplate() {
  std::string end;
  ASSIGN_OR_RETURN(Body body, ParseBody({}, &end));
  if (cur().type != Tok::kEof) return Unexpected();
  return body;
}

absl::StatusOr<Body> Parser::ParseBody(
    std::initializer_list<absl::string_view> ends, std::string* end_found) {
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::kEof) {
      if (ends.size() == 0) return body;
      return Fail(t, absl::StrCat("unexpected end of template, expected '",
                                  *ends.begin(), "'"));
    }
    if (t.type == Tok::kText) {
      auto stmt = std::make_unique<Stmt>();
      stmt->type = Stmt::Type::kText;
      stmt->text = t.text;
      body.push_back(std::move(stmt));
      Advance();
    } else if (t.type == Tok::kVarBegin) {
      auto stmt = std::make_unique<Stmt>();
      stmt->type = Stmt::Type::kOutput;
      stmt->line = t.line;
      stmt->column = t.column;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true));
      stmt->exprs.push_back(std::move(e));
      if (cur().type != Tok::kVarEnd) return Unexpected();
      Advance();
      body.push_back(std::move(stmt));
    } else if (t.type == Tok::kBlockBegin) {
      Advance();
      for (absl::string_view end : ends) {
        if (IsName(end)) {
          *end_found = std::string(end);
          Advance();
          return body;
        }
      }
      ASSIGN_OR_RETURN(StmtPtr stmt, ParseStatement());
      if (stmt != nullptr) body.push_back(std::move(stmt));
    } else {
      return Unexpected();
    }
  }
}

absl::StatusOr<Body> Parser::ParseBlockBody(absl::string_view end) {
  std::string found;
  RETURN_IF_ERROR(ExpectBlockEnd());
  ASSIGN_OR_RETURN(Body body, ParseBody({end}, &found));
  RETURN_IF_ERROR(ExpectBlockEnd());
  return body;
}

absl::StatusOr<StmtPtr> Parser::ParseStatement() {
  if (cur().type != Tok::kName) return Fail(cur(), "tag name expected");
  RETURN_IF_ERROR(Enter());
  const Token& t = cur();
  absl::StatusOr<StmtPtr> stmt;
  if (t.text == "if") {
    stmt = ParseIf();
  } else if (t.text == "for") {
    stmt = ParseFor();
  } else if (t.text == "set") {
    stmt = ParseSet();
  } else if (t.text == "macro") {
    stmt = ParseMacro();
  } else if (t.text == "call") {
    stmt = ParseCallBlock();
  } else if (t.text == "filter") {
    stmt = ParseFilterBlock();
  } else if (t.text == "generation") {
    stmt = ParseScope();
  } else if (t.text == "break" || t.text == "continue") {
    if (loops_ == 0) {
      stmt = Fail(t, absl::StrCat("'", t.text, "' outside of a loop"));
    } else {
      auto s = std::make_unique<Stmt>();
      s->type = t.text == "break" ? Stmt::Type::kBreak : Stmt::Type::kContinue;
      Advance();
      absl::Status end = ExpectBlockEnd();
      stmt = end.ok() ? absl::StatusOr<StmtPtr>(std::move(s)) : end;
    }
  } else {
    stmt = Fail(t, absl::StrCat("unknown tag '", t.text, "'"));
  }
  Leave();
  return stmt;
}

absl::StatusOr<StmtPtr> Parser::ParseIf() {
  auto stmt = std::make_unique<Stmt>();
  stmt->type = Stmt::Type::kIf;
  stmt->line = cur().line;
  Advance();
  ++soft_;
  std::string end = "elif";
  while (end == "elif") {
    ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false));
    stmt->exprs.push_back(std::move(test));
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, ParseBody({"elif", "else", "endif"}, &end));
    stmt->bodies.push_back(std::move(body));
  }
  if (end == "else") {
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, ParseBody({"endif"}, &end));
    stmt->bodies.push_back(std::move(body));
  }
  --soft_;
  RETURN_IF_ERROR(ExpectBlockEnd());
  return stmt;
}

absl::StatusOr<std::vector<std::string>> Parser::ParseTargets(
    absl::string_view end_name) {
  std::vector<std::string> names;
  bool parens = SkipOp("(");
  do {
    if (!parens && (IsName(end_name) || IsOp("="))) break;
    ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
    names.push_back(std::move(name));
  } while (SkipOp(","));
  if (parens) RETURN_IF_ERROR(ExpectOp(")"));
  if (names.empty()) return Fail(cur(), "expected an assignment target");
  return names;
}

absl::StatusOr<StmtPtr> Parser::ParseFor() {
  auto stmt = std::make_unique<Stmt>();
  stmt->type = Stmt::Type::kFor;
  stmt->line = cur().line;
  stmt->column = cur().column;
  Advance();
  ASSIGN_OR_RETURN(stmt->targets, ParseTargets("in"));
  RETURN_IF_ERROR(ExpectName("in"));
  int saved_soft = soft_;
  soft_ = 0;
  ASSIGN_OR_RETURN(ExprPtr iter, ParseTuple(false, "recursive"));
  stmt->exprs.push_back(std::move(iter));
  ExprPtr filter;
  if (SkipName("if")) {
    ASSIGN_OR_RETURN(filter, ParseExpression());
  }
  stmt->exprs.push_back(std::move(filter));
  if (IsName("recursive"))
    return Fail(cur(), "recursive loops are not supported");
  RETURN_IF_ERROR(ExpectBlockEnd());
  ++loops_;
  std::string end;
  ASSIGN_OR_RETURN(Body body, ParseBody({"endfor", "else"}, &end));
  --loops_;
  stmt->bodies.push_back(std::move(body));
  if (end == "else") {
    ASSIGN_OR_RETURN(Body else_body, ParseBlockBody("endfor"));
    stmt->bodies.push_back(std::move(else_body));
  } else {
    RETURN_IF_ERROR(ExpectBlockEnd());
    stmt->bodies.emplace_back();
  }
  soft_ = saved_soft;
  return stmt;
}

absl::StatusOr<StmtPtr> Parser::ParseSet() {
  auto stmt = std::make_unique<Stmt>();
  stmt->line = cur().line;
  stmt->column = cur().column;
  Advance();
  if (cur().type == Tok::kName && peek().type == Tok::kOp &&
      peek().text == ".") {
    stmt->name = cur().text;
    Advance();
    Advance();
    ASSIGN_OR_RETURN(std::string attr, ExpectAnyName());
    stmt->targets.push_back(std::move(attr));
  } else {
    ASSIGN_OR_RETURN(stmt->targets, ParseTargets(""));
  }
  if (SkipOp("=")) {
    stmt->type = Stmt::Type::kSet;
    ASSIGN_OR_RETURN(ExprPtr value, ParseTuple(true));
    stmt->exprs.push_back(std::move(value));
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }
  stmt->type = Stmt::Type::kSetBlock;
  ExprPtr filter;
  if (IsOp("|")) {
    ASSIGN_OR_RETURN(filter, ParseFilter(nullptr, false));
  }
  stmt->exprs.push_back(std::move(filter));
  ASSIGN_OR_RETURN(Body body, ParseBlockBody("endset"));
  stmt->bodies.push_back(std::move(body));
  return stmt;
}

absl::Status Parser::ParseSignature(std::vector<Param>* params) {
  RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!params->empty()) RETURN_IF_ERROR(ExpectOp(","));
    Param p;
    ASSIGN_OR_RETURN(p.name, ExpectAnyName());
    if (SkipOp("=")) {
      ASSIGN_OR_RETURN(p.default_value, ParseExpression());
    } else if (!params->empty() && params->back().default_value != nullptr) {
      return Fail(cur(), "non-default argument follows default argument");
    }
    params->push_back(std::move(p));
  }
  Advance();
  return absl::OkStatus();
}

absl::StatusOr<StmtPtr> Parser::ParseMacro() {
  auto stmt = std::make_unique<Stmt>();
  stmt->type = Stmt::Type::kMacro;
  stmt->line = cur().line;
  stmt->column = cur().column;
  Advance();
  ASSIGN_OR_RETURN(stmt->name, ExpectAnyName());
  int saved_soft = soft_, saved_loops = loops_;
  soft_ = loops_ = 0;
  RETURN_IF_ERROR(ParseSignature(&stmt->params));
  ASSIGN_OR_RETURN(Body body, ParseBlockBody("endmacro"));
  stmt->bodies.push_back(std::move(body));
  soft_ = saved_soft;
  loops_ = saved_loops;
  return stmt;
}

absl::StatusOr<StmtPtr> Parser::ParseCallBlock() {
  auto stmt = std::make_unique<Stmt>();
  stmt->type = Stmt::Type::kCallBlock;
  stmt->line = cur().line;
  stmt->column = cur().column;
  Advance();
  int saved_soft = soft_, saved_loops = loops_;
  soft_ = loops_ = 0;
  if (IsOp("(")) RETURN_IF_ERROR(ParseSignature(&stmt->params));
  const Token& at = cur();
  ASSIGN_OR_RETURN(ExprPtr call, ParseExpression());
  if (call->type != Expr::Type::kCall) return Fail(at, "expected call");
  stmt->exprs.push_back(std::move(call));
  ASSIGN_OR_RETURN(Body body, ParseBlockBody("endcall"));
  stmt->bodies.push_back(std::move(body));
  soft_ = saved_soft;
  loops_ = saved_loops;
  return stmt;
}

absl::StatusOr<StmtPtr> Parser::ParseFilterBlock() {
  auto stmt = std::make_unique<Stmt>();
  stmt->type = Stmt::Type::kFilterBlock;
  stmt->line = cur().line;
  stmt->column = cur().column;
  Advance();
  ASSIGN_OR_RETURN(ExprPtr filter, ParseFilter(nullptr, true));
  stmt->exprs.push_back(std::move(filter));
  ASSIGN_OR_RETURN(Body body, ParseBlockBody("endfilter"));
  stmt->bodies.push_back(std::move(body));
  return stmt;
}

absl::StatusOr<StmtPtr> Parser::ParseScope() {
  auto stmt = std::make_unique<Stmt>();
  stmt->type = Stmt::Type::kScope;
  Advance();
  ASSIGN_OR_RETURN(Body body, ParseBlockBody("endgeneration"));
  stmt->bodies.push_back(std::move(body));
  return stmt;
}

absl::StatusOr<std::unique_ptr<Program>> ParseProgram(std::vector<Token> tokens,
                                                      int max_depth) {
  Parser parser(std::move(tokens), max_depth);
  ASSIGN_OR_RETURN(Body body, parser.ParseTemplate());
  auto program = std::make_unique<Program>();
  program->body = std::move(body);
  return program;
}

}  // namespace paceline::chat::jinja
