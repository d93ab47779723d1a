#ifndef PACELINE_CHAT_JINJA_PARSER_IMPL_H_
#define PACELINE_CHAT_JINJA_PARSER_IMPL_H_

// The parser's internals, shared by parser.cc (statements) and
// parser_expr.cc (expressions). Not for use outside the parser.

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace paceline::chat::jinja {

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  absl::StatusOr<Body> ParseTemplate();

 private:
  friend class DepthGuard;

  // Tokens.
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t n = 1) const {
    return tokens_[std::min(pos_ + n, tokens_.size() - 1)];
  }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsName(absl::string_view name) const {
    return cur().type == Tok::kName && cur().text == name;
  }
  bool IsOp(absl::string_view op) const {
    return cur().type == Tok::kOp && cur().text == op;
  }
  bool SkipOp(absl::string_view op);
  bool SkipName(absl::string_view name);
  absl::Status Fail(const Token& at, absl::string_view what) const;
  absl::Status Unexpected() const;
  absl::Status ExpectOp(absl::string_view op);
  absl::Status ExpectName(absl::string_view name);
  absl::StatusOr<std::string> ExpectAnyName();
  absl::Status ExpectBlockEnd();
  absl::Status Enter();
  void Leave() { --depth_; }

  // Statements (parser.cc).
  absl::StatusOr<Body> ParseBody(std::initializer_list<absl::string_view> ends,
                                 std::string* end_found);
  absl::StatusOr<StmtPtr> ParseStatement();
  absl::StatusOr<StmtPtr> ParseIf();
  absl::StatusOr<StmtPtr> ParseFor();
  absl::StatusOr<StmtPtr> ParseSet();
  absl::StatusOr<StmtPtr> ParseMacro();
  absl::StatusOr<StmtPtr> ParseCallBlock();
  absl::StatusOr<StmtPtr> ParseFilterBlock();
  absl::StatusOr<StmtPtr> ParseScope();
  absl::StatusOr<std::vector<std::string>> ParseTargets(
      absl::string_view end_name);
  absl::Status ParseSignature(std::vector<Param>* params);
  absl::StatusOr<Body> ParseBlockBody(absl::string_view end);

  // Expressions (parser_expr.cc).
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr,
                                     absl::string_view extra_end = "",
                                     bool explicit_parens = false);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);
  absl::StatusOr<ExprPtr> ParseCondExpr();
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseList();
  absl::StatusOr<ExprPtr> ParseDict();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscribed();
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr node);
  absl::Status ParseCallArgs(Expr* call);
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr node, bool start_inline);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);
  absl::StatusOr<std::string> ParseDottedName();
  bool IsTupleEnd(absl::string_view extra_end) const;

  // A node at `at` with `args` as children; fails when the tree gets too
  // deep.
  absl::StatusOr<ExprPtr> Make(Expr::Type type, const Token& at,
                               std::vector<ExprPtr> args,
                               std::string name = {});
  absl::Status CheckDepth(Expr* node);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int max_depth_;
  int depth_ = 0;
  int soft_ = 0;   // > 0 inside if tests/bodies and inline ifs
  int loops_ = 0;  // enclosing for loops (break and continue need one)
};

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_PARSER_IMPL_H_
