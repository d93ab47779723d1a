#ifndef PACELINE_CHAT_JINJA_EVAL_H_
#define PACELINE_CHAT_JINJA_EVAL_H_

// The evaluator: runs a Program against its variables as jinja2 renders it
// in an ImmutableSandboxedEnvironment. Scoping follows jinja2: a for loop's
// body and a macro call get their own frame (so `set` inside them does not
// leak out), `if` does not. One Evaluator per render; not thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace paceline::chat::jinja {

struct EvalLimits {
  int64_t max_loop_iterations = 1'000'000;
  int max_depth = 100;
  size_t max_output_bytes = size_t{16} << 20;
  absl::Time now = absl::UnixEpoch();
};

// A scope: variables set in it, and the scope it reads through to.
struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;

  const Value* Find(absl::string_view name) const;
  void Set(const std::string& name, Value v);
};
using FramePtr = std::shared_ptr<Frame>;

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  int line = 0;

  // Positional `i`, else keyword `name`; nullptr when neither was given.
  const Value* Get(size_t i, absl::string_view name) const;
};

class Namespace;

class Evaluator {
 public:
  explicit Evaluator(const EvalLimits& limits) : limits_(limits) {}
  // Breaks the reference cycles a render may have made (a namespace holding
  // itself), so every value of the render is freed.
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Keeps `frame` (the scope of a macro) alive until the render ends.
  void KeepAlive(FramePtr frame) { macro_frames_.push_back(std::move(frame)); }
  // Clears `ns` when the render ends.
  void Track(std::shared_ptr<Namespace> ns) {
    namespaces_.push_back(std::move(ns));
  }

  // Renders `program` with `globals` as the outermost variables.
  absl::StatusOr<std::string> Render(const Program& program, FramePtr globals);

  // For built-ins and callables.
  absl::StatusOr<Value> CallValue(const Value& callee, CallArgs& args);
  absl::StatusOr<std::string> RenderBody(const Body& body, FramePtr frame);
  // Calls the macro `def` (a kMacro or kCallBlock statement) whose scope is
  // `closure`; `caller` (may be null) is the call block it is called from.
  absl::StatusOr<Value> CallMacro(const Stmt& def, const FramePtr& closure,
                                  CallArgs& args, const Value* caller);
  absl::Status CountIterations(int64_t n);
  // Fails when `bytes` more output would pass the output limit.
  absl::Status ReserveOutput(size_t bytes);
  absl::Status EnterCall();
  void LeaveCall() { --call_depth_; }
  const EvalLimits& limits() const { return limits_; }
  // "line L: what" as InvalidArgument.
  absl::Status Error(int line, absl::string_view what) const;

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::Status Exec(const Body& body, const FramePtr& frame, std::string* out);
  absl::Status ExecStmt(const Stmt& s, const FramePtr& frame, std::string* out);
  absl::Status ExecIf(const Stmt& s, const FramePtr& frame, std::string* out);
  absl::Status ExecFor(const Stmt& s, const FramePtr& frame, std::string* out);
  absl::Status ExecSet(const Stmt& s, const FramePtr& frame);
  absl::Status ExecSetBlock(const Stmt& s, const FramePtr& frame);
  // `set`'s assignment of `v`: to the names, or to `ns.attr` of a
  // namespace() (the only attribute assignment jinja2 allows).
  absl::Status SetTarget(const Stmt& s, Value v, const FramePtr& frame);
  absl::Status ExecCallBlock(const Stmt& s, const FramePtr& frame,
                             std::string* out);
  absl::Status ExecFilterBlock(const Stmt& s, const FramePtr& frame,
                               std::string* out);
  absl::Status Assign(const std::vector<std::string>& targets, const Value& v,
                      Frame* frame, int line);
  absl::Status Append(std::string* out, absl::string_view text);

  absl::StatusOr<Value> Eval(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalInner(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalName(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCollection(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalSlice(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCall(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalFilter(const Expr& e, const FramePtr& frame,
                                   const Value* input);
  absl::StatusOr<Value> EvalTest(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCompare(const Expr& e, const FramePtr& frame);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first,
                                    const FramePtr& frame);

  EvalLimits limits_;
  int64_t iterations_ = 0;
  size_t output_bytes_ = 0;
  int call_depth_ = 0;
  int depth_ = 0;  // Exec + Eval recursion
  Flow flow_ = Flow::kNormal;
  std::vector<FramePtr> macro_frames_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_EVAL_H_
