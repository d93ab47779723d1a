#ifndef PACELINE_CHAT_JINJA_OBJECTS_H_
#define PACELINE_CHAT_JINJA_OBJECTS_H_

// The object values: namespaces, loop objects, macros, bound methods and
// native functions.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/eval.h"
#include "chat/jinja/value.h"

namespace paceline::chat::jinja {

// jinja2's namespace(): the one mutable value (`set ns.attr = ...`).
class Namespace : public Object {
 public:
  std::string TypeName() const override { return "Namespace"; }
  std::optional<Value> Attr(absl::string_view name) const override;
  void Set(const std::string& name, Value v);
  void Clear() { attrs_.clear(); }

 private:
  std::vector<std::pair<std::string, Value>> attrs_;
};

// `loop` inside a for loop.
class LoopObject : public Object {
 public:
  LoopObject(std::shared_ptr<const std::vector<Value>> items, size_t index)
      : items_(std::move(items)), index_(index) {}
  std::string TypeName() const override { return "LoopContext"; }
  std::optional<Value> Attr(absl::string_view name) const override;

 private:
  std::shared_ptr<const std::vector<Value>> items_;
  size_t index_;
};

class MacroObject : public Object {
 public:
  // `closure` is held weakly (a frame holds its macros, so a strong
  // pointer would be a cycle); the Evaluator keeps it alive for the render.
  MacroObject(const Stmt* def, const FramePtr& closure)
      : def_(def), closure_(closure) {}
  std::string TypeName() const override { return "Macro"; }
  std::optional<Value> Attr(absl::string_view name) const override;
  bool callable() const override { return true; }
  absl::StatusOr<Value> Call(CallArgs& args, Evaluator& ev) const override;

 private:
  const Stmt* def_;
  std::weak_ptr<Frame> closure_;
};

using NativeFn = std::function<absl::StatusOr<Value>(CallArgs&, Evaluator&)>;

class NativeFunction : public Object {
 public:
  NativeFunction(std::string name, NativeFn fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  absl::StatusOr<Value> Call(CallArgs& args, Evaluator& ev) const override {
    return fn_(args, ev);
  }

 private:
  std::string name_;
  NativeFn fn_;
};

Value MakeNative(std::string name, NativeFn fn);

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_OBJECTS_H_
