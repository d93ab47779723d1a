// The evaluator's statements.
#include "chat/jinja/eval.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/objects.h"

namespace paceline::chat::jinja {

const Value* Frame::Find(absl::string_view name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
    for (const auto& [k, v] : f->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Frame::Set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

const Value* CallArgs::Get(size_t i, absl::string_view name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

Evaluator::~Evaluator() {
  for (const auto& ns : namespaces_) ns->Clear();
}

absl::Status Evaluator::Error(int line, absl::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template: line ", line, ": ", what));
}

absl::Status Evaluator::CountIterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: loop iteration limit (",
                     limits_.max_loop_iterations, ") reached"));
  }
  return absl::OkStatus();
}

absl::Status Evaluator::ReserveOutput(size_t bytes) {
  if (bytes > limits_.max_output_bytes ||
      output_bytes_ + bytes > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: output size limit (",
                     limits_.max_output_bytes, " bytes) reached"));
  }
  output_bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status Evaluator::EnterCall() {
  if (call_depth_ >= limits_.max_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: macro call depth limit (",
                     limits_.max_depth, ") reached"));
  }
  ++call_depth_;
  return absl::OkStatus();
}

absl::Status Evaluator::Append(std::string* out, absl::string_view text) {
  RETURN_IF_ERROR(ReserveOutput(text.size()));
  out->append(text.data(), text.size());
  return absl::OkStatus();
}

absl::StatusOr<std::string> Evaluator::Render(const Program& program,
                                              FramePtr globals) {
  auto frame = std::make_shared<Frame>();
  frame->parent = std::move(globals);
  std::string out;
  RETURN_IF_ERROR(Exec(program.body, frame, &out));
  return out;
}

absl::StatusOr<std::string> Evaluator::RenderBody(const Body& body,
                                                  FramePtr frame) {
  std::string out;
  RETURN_IF_ERROR(Exec(body, frame, &out));
  return out;
}

absl::Status Evaluator::Exec(const Body& body, const FramePtr& frame,
                             std::string* out) {
  if (++depth_ > 4 * limits_.max_depth) {
    --depth_;
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: nesting depth limit (", limits_.max_depth,
                     ") reached"));
  }
  absl::Status status;
  for (const StmtPtr& s : body) {
    status = ExecStmt(*s, frame, out);
    if (!status.ok() || flow_ != Flow::kNormal) break;
  }
  --depth_;
  return status;
}

absl::Status Evaluator::ExecStmt(const Stmt& s, const FramePtr& frame,
                                 std::string* out) {
  switch (s.type) {
    case Stmt::Type::kText:
      return Append(out, s.text);
    case Stmt::Type::kOutput: {
      ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[0], frame));
      return Append(out, ToStr(v));
    }
    case Stmt::Type::kIf:
      return ExecIf(s, frame, out);
    case Stmt::Type::kFor:
      return ExecFor(s, frame, out);
    case Stmt::Type::kSet:
      return ExecSet(s, frame);
    case Stmt::Type::kSetBlock:
      return ExecSetBlock(s, frame);
    case Stmt::Type::kMacro:
      KeepAlive(frame);
      frame->Set(s.name,
                 Value::FromObject(std::make_shared<MacroObject>(&s, frame)));
      return absl::OkStatus();
    case Stmt::Type::kCallBlock:
      return ExecCallBlock(s, frame, out);
    case Stmt::Type::kFilterBlock:
      return ExecFilterBlock(s, frame, out);
    case Stmt::Type::kBreak:
      flow_ = Flow::kBreak;
      return absl::OkStatus();
    case Stmt::Type::kContinue:
      flow_ = Flow::kContinue;
      return absl::OkStatus();
    case Stmt::Type::kScope: {
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      return Exec(s.bodies[0], inner, out);
    }
  }
  return absl::OkStatus();
}

absl::Status Evaluator::ExecIf(const Stmt& s, const FramePtr& frame,
                               std::string* out) {
  for (size_t i = 0; i < s.bodies.size(); ++i) {
    if (i < s.exprs.size()) {
      ASSIGN_OR_RETURN(Value test, Eval(*s.exprs[i], frame));
      if (!test.Truthy()) continue;
    }
    return Exec(s.bodies[i], frame, out);
  }
  return absl::OkStatus();
}

absl::Status Evaluator::ExecFor(const Stmt& s, const FramePtr& frame,
                                std::string* out) {
  ASSIGN_OR_RETURN(Value iterable, Eval(*s.exprs[0], frame));
  absl::StatusOr<std::vector<Value>> all = Iterate(iterable);
  if (!all.ok()) return Error(s.line, all.status().message());
  RETURN_IF_ERROR(CountIterations(static_cast<int64_t>(all->size())));
  auto items = std::make_shared<std::vector<Value>>();
  if (s.exprs[1] == nullptr) {
    *items = *std::move(all);
  } else {
    for (Value& item : *all) {
      auto probe = std::make_shared<Frame>();
      probe->parent = frame;
      RETURN_IF_ERROR(Assign(s.targets, item, probe.get(), s.line));
      ASSIGN_OR_RETURN(Value keep, Eval(*s.exprs[1], probe));
      if (keep.Truthy()) items->push_back(std::move(item));
    }
  }
  for (size_t i = 0; i < items->size(); ++i) {
    auto inner = std::make_shared<Frame>();
    inner->parent = frame;
    RETURN_IF_ERROR(Assign(s.targets, (*items)[i], inner.get(), s.line));
    inner->Set("loop",
               Value::FromObject(std::make_shared<LoopObject>(items, i)));
    RETURN_IF_ERROR(Exec(s.bodies[0], inner, out));
    Flow flow = flow_;
    flow_ = Flow::kNormal;
    if (flow == Flow::kBreak) break;
  }
  if (items->empty()) return Exec(s.bodies[1], frame, out);
  return absl::OkStatus();
}

absl::Status Evaluator::Assign(const std::vector<std::string>& targets,
                               const Value& v, Frame* frame, int line) {
  if (targets.size() == 1) {
    frame->Set(targets[0], v);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Value>> parts = Iterate(v);
  if (!parts.ok()) return Error(line, parts.status().message());
  if (parts->size() != targets.size()) {
    return Error(line, absl::StrCat("ValueError: cannot unpack ", parts->size(),
                                    " values into ", targets.size()));
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    frame->Set(targets[i], (*parts)[i]);
  }
  return absl::OkStatus();
}

absl::Status Evaluator::SetTarget(const Stmt& s, Value v,
                                  const FramePtr& frame) {
  if (s.name.empty()) return Assign(s.targets, v, frame.get(), s.line);
  const Value* ns = frame->Find(s.name);
  auto* target = ns != nullptr && ns->is_object()
                     ? dynamic_cast<Namespace*>(ns->object())
                     : nullptr;
  if (target == nullptr) {
    return Error(s.line, "cannot assign attribute on non-namespace object");
  }
  target->Set(s.targets[0], std::move(v));
  return absl::OkStatus();
}

absl::Status Evaluator::ExecSet(const Stmt& s, const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[0], frame));
  return SetTarget(s, std::move(v), frame);
}

absl::Status Evaluator::ExecSetBlock(const Stmt& s, const FramePtr& frame) {
  auto inner = std::make_shared<Frame>();
  inner->parent = frame;
  ASSIGN_OR_RETURN(std::string text, RenderBody(s.bodies[0], inner));
  Value v = Value::Str(std::move(text));
  if (s.exprs[0] != nullptr) {
    ASSIGN_OR_RETURN(v, EvalFilter(*s.exprs[0], frame, &v));
  }
  return SetTarget(s, std::move(v), frame);
}

absl::Status Evaluator::ExecCallBlock(const Stmt& s, const FramePtr& frame,
                                      std::string* out) {
  const Expr& call = *s.exprs[0];
  ASSIGN_OR_RETURN(Value callee, Eval(*call.args[0], frame));
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, 1, frame));
  KeepAlive(frame);
  Value caller = Value::FromObject(std::make_shared<MacroObject>(&s, frame));
  args.kw.emplace_back("caller", caller);
  ASSIGN_OR_RETURN(Value result, CallValue(callee, args));
  return Append(out, ToStr(result));
}

absl::Status Evaluator::ExecFilterBlock(const Stmt& s, const FramePtr& frame,
                                        std::string* out) {
  auto inner = std::make_shared<Frame>();
  inner->parent = frame;
  ASSIGN_OR_RETURN(std::string text, RenderBody(s.bodies[0], inner));
  Value v = Value::Str(std::move(text));
  ASSIGN_OR_RETURN(Value result, EvalFilter(*s.exprs[0], frame, &v));
  return Append(out, ToStr(result));
}

absl::StatusOr<Value> Evaluator::CallMacro(const Stmt& def,
                                           const FramePtr& closure,
                                           CallArgs& args,
                                           const Value* /*caller*/) {
  RETURN_IF_ERROR(EnterCall());
  auto frame = std::make_shared<Frame>();
  frame->parent = closure;
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < def.params.size()) {
      frame->Set(def.params[i].name, args.pos[i]);
    } else {
      varargs.push_back(args.pos[i]);
    }
  }
  std::vector<std::pair<Value, Value>> kwargs;
  for (auto& [k, v] : args.kw) {
    bool is_param = k == "caller";
    for (const Param& p : def.params) is_param |= p.name == k;
    if (is_param) {
      frame->Set(k, v);
    } else {
      kwargs.emplace_back(Value::Str(k), v);
    }
  }
  absl::Status status;
  for (size_t i = args.pos.size(); i < def.params.size() && status.ok(); ++i) {
    const Param& p = def.params[i];
    bool given = false;
    for (const auto& kv : frame->vars) given |= kv.first == p.name;
    if (given) continue;
    if (p.default_value == nullptr) {
      frame->Set(p.name, Value::Undefined(absl::StrCat("parameter '", p.name,
                                                       "' was not provided")));
      continue;
    }
    absl::StatusOr<Value> d = Eval(*p.default_value, frame);
    if (d.ok()) {
      frame->Set(p.name, *std::move(d));
    } else {
      status = d.status();
    }
  }
  frame->Set("varargs", Value::List(std::move(varargs), SeqKind::kTuple));
  frame->Set("kwargs", Value::Dict(std::move(kwargs)));
  absl::StatusOr<std::string> text = status.ok()
                                         ? RenderBody(def.bodies[0], frame)
                                         : absl::StatusOr<std::string>(status);
  LeaveCall();
  if (!text.ok()) return text.status();
  return Value::Str(*std::move(text));
}

}  // namespace paceline::chat::jinja
