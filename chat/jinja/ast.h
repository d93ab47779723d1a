#ifndef PACELINE_CHAT_JINJA_AST_H_
#define PACELINE_CHAT_JINJA_AST_H_

// The parsed template: statements and expressions as jinja2's parser builds
// them. Every node records its source line and column for runtime errors.
// The parser bounds the depth of every tree (ChatTemplateLimits::max_depth),
// so walking or destroying one recursively is safe.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace paceline::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    kLiteral,  // value
    kName,     // name
    kList,     // args
    kTuple,    // args
    kDict,     // args: key, value, key, value, ...
    kGetAttr,  // args[0].name
    kGetItem,  // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null = omitted)
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // name(args[0], args[1..], kwargs); args[0] null in blocks
    kTest,     // name(args[0], args[1..], kwargs)
    kNot,      // not args[0]
    kNeg,      // -args[0]
    kPos,      // +args[0]
    kBinary,   // args[0] name args[1]: + - * / // % ** ~
    kAnd,      // args[0] and args[1]
    kOr,       // args[0] or args[1]
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ...
    kCond,     // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Type type;
  int line = 0;
  int column = 0;
  int depth = 1;  // the height of this tree
  Value value;
  std::string name;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // null when none
};

struct Stmt {
  enum class Type {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // exprs[i] -> bodies[i]; a final body without expr: else
    kFor,          // for targets in exprs[0] (if exprs[1]) bodies[0] else [1]
    kSet,          // targets (a name, names, or exprs[1] = ns.attr) = exprs[0]
    kSetBlock,     // targets[0] = bodies[0] rendered, filtered by exprs[0]
    kMacro,        // name(params) bodies[0]
    kCallBlock,    // exprs[0] is the call; caller(params) is bodies[0]
    kFilterBlock,  // exprs[0] is the filter chain; bodies[0] its input
    kBreak,
    kContinue,
    kScope,  // bodies[0] in its own scope ({% generation %})
  };
  Type type;
  int line = 0;
  int column = 0;
  std::string text;
  std::string name;
  std::vector<std::string> targets;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  std::vector<Param> params;
};

struct Program {
  Body body;
};

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_AST_H_
