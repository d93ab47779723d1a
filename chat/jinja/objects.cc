#include "chat/jinja/objects.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paceline::chat::jinja {

std::optional<Value> Namespace::Attr(absl::string_view name) const {
  for (const auto& [k, v] : attrs_) {
    if (k == name) return v;
  }
  return std::nullopt;
}

void Namespace::Set(const std::string& name, Value v) {
  for (auto& [k, old] : attrs_) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  attrs_.emplace_back(name, std::move(v));
}

std::optional<Value> LoopObject::Attr(absl::string_view name) const {
  int64_t n = static_cast<int64_t>(items_->size());
  int64_t i = static_cast<int64_t>(index_);
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(n - i);
  if (name == "revindex0") return Value::Int(n - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i == n - 1);
  if (name == "length") return Value::Int(n);
  if (name == "depth") return Value::Int(1);
  if (name == "depth0") return Value::Int(0);
  if (name == "previtem") {
    if (i == 0) return Value::Undefined("there is no previous item");
    return (*items_)[index_ - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= n) return Value::Undefined("there is no next item");
    return (*items_)[index_ + 1];
  }
  if (name == "cycle") {
    size_t index = index_;
    return MakeNative(
        "cycle", [index](CallArgs& args, Evaluator&) -> absl::StatusOr<Value> {
          if (args.pos.empty()) {
            return absl::InvalidArgumentError(
                "TypeError: no items for cycling given");
          }
          return args.pos[index % args.pos.size()];
        });
  }
  return std::nullopt;
}

std::optional<Value> MacroObject::Attr(absl::string_view name) const {
  if (name == "name") return Value::Str(def_->name);
  return std::nullopt;
}

absl::StatusOr<Value> MacroObject::Call(CallArgs& args, Evaluator& ev) const {
  FramePtr closure = closure_.lock();
  if (closure == nullptr) {
    return absl::InvalidArgumentError("macro called after its render ended");
  }
  return ev.CallMacro(*def_, closure, args, nullptr);
}

Value MakeNative(std::string name, NativeFn fn) {
  return Value::FromObject(
      std::make_shared<NativeFunction>(std::move(name), std::move(fn)));
}

}  // namespace paceline::chat::jinja
