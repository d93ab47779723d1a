// Attribute and item access, iteration, operators and globals.
#include "chat/jinja/builtins.h"

#include <cmath>
#include <ctime>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/jinja/objects.h"
#include "chat/jinja/pyformat.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::chat::jinja {

absl::Status UndefinedError(const Value& undefined) {
  std::string hint = undefined.is_undefined() ? undefined.undefined_hint() : "";
  if (hint.empty()) hint = "value is undefined";
  return absl::InvalidArgumentError(absl::StrCat("UndefinedError: ", hint));
}

namespace {

std::string Describe(const Value& v) {
  return v.is_dict() ? "dict object" : v.TypeName() + " object";
}

bool IsUnsafe(const Value& obj, absl::string_view name) {
  if (absl::StartsWith(name, "_")) return true;
  if (obj.is_dict()) {
    return name == "clear" || name == "pop" || name == "popitem" ||
           name == "setdefault" || name == "update";
  }
  if (obj.is_list() && obj.list().seq == SeqKind::kList) {
    return name == "append" || name == "reverse" || name == "insert" ||
           name == "sort" || name == "extend" || name == "remove";
  }
  return false;
}

Value UnsafeUndefined(const Value& obj, absl::string_view name) {
  return Value::Undefined(absl::StrCat("SecurityError: access to attribute '",
                                       name, "' of '", obj.TypeName(),
                                       "' object is unsafe."));
}

}  // namespace

absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (IsUnsafe(obj, name)) return UnsafeUndefined(obj, name);
  if (obj.is_object()) {
    std::optional<Value> v = obj.object()->Attr(name);
    if (v.has_value()) return *std::move(v);
  } else if (std::optional<Value> m = BoundMethod(obj, name); m.has_value()) {
    return *std::move(m);
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().FindStr(name)) return *v;
  }
  return Value::Undefined(
      absl::StrCat("'", Describe(obj), "' has no attribute '", name, "'"));
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(key)) return *v;
  } else if ((obj.is_list() && obj.list().seq != SeqKind::kGenerator) ||
             obj.is_str()) {
    if (key.is_int() || key.is_bool()) {
      int64_t n = obj.is_str() ? static_cast<int64_t>(CodepointCount(obj.str()))
                               : static_cast<int64_t>(obj.items().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        if (obj.is_list()) return obj.items()[i];
        std::vector<uint32_t> cps = Codepoints(obj.str());
        return Value::Str(FromCodepoints(cps, i, i + 1));
      }
      return Value::Undefined(
          absl::StrCat(Describe(obj), " has no element ", key.as_int()));
    }
  }
  if (key.is_str()) {
    if (IsUnsafe(obj, key.str())) return UnsafeUndefined(obj, key.str());
    if (obj.is_object()) {
      std::optional<Value> v = obj.object()->Attr(key.str());
      if (v.has_value()) return *std::move(v);
    } else if (std::optional<Value> m = BoundMethod(obj, key.str())) {
      return *std::move(m);
    }
    return Value::Undefined(absl::StrCat(
        "'", Describe(obj), "' has no attribute '", key.str(), "'"));
  }
  return Value::Undefined(
      absl::StrCat(Describe(obj), " has no element ", Repr(key)));
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return std::vector<Value>{};
    case Kind::kList:
      return v.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& [k, e] : v.dict().items) keys.push_back(k);
      return keys;
    }
    case Kind::kStr: {
      std::vector<Value> chars;
      for (uint32_t cp : Codepoints(v.str())) {
        std::string s;
        engine::AppendUtf8(cp, &s);
        chars.push_back(Value::Str(std::move(s)));
      }
      return chars;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "TypeError: '", v.TypeName(), "' object is not iterable"));
  }
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_str()) {
    if (!item.is_str()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TypeError: 'in <string>' requires string as left operand, not ",
          item.TypeName()));
    }
    return absl::StrContains(container.str(), item.str());
  }
  if (container.is_dict()) return container.dict().Find(item) != nullptr;
  if (container.is_list()) {
    for (const Value& e : container.items()) {
      if (Equal(e, item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  return absl::InvalidArgumentError(
      absl::StrCat("TypeError: argument of type '", container.TypeName(),
                   "' is not iterable"));
}

namespace {

absl::Status TypeMismatch(absl::string_view op, const Value& a,
                          const Value& b) {
  if (a.is_str() && op == "+") {
    return absl::InvalidArgumentError(
        absl::StrCat("TypeError: can only concatenate str (not \"",
                     b.TypeName(), "\") to str"));
  }
  if (a.is_list() && op == "+") {
    return absl::InvalidArgumentError(
        absl::StrCat("TypeError: can only concatenate ", a.TypeName(),
                     " (not \"", b.TypeName(), "\") to ", a.TypeName()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("TypeError: unsupported operand type(s) for ", op, ": '",
                   a.TypeName(), "' and '", b.TypeName(), "'"));
}

}  // namespace

absl::Status CheckSize(size_t size, const Evaluator& ev) {
  if (size <= ev.limits().max_output_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("chat template: output size limit (",
                   ev.limits().max_output_bytes, " bytes) reached by a value"));
}

namespace {

absl::Status Overflow() {
  return absl::InvalidArgumentError("OverflowError: integer overflow");
}

absl::StatusOr<Value> Repeat(const Value& seq, int64_t n, Evaluator& ev) {
  if (n <= 0) return seq.is_str() ? Value::Str("") : Value::List({});
  // A list's weight, not its length: [x] * n holds x n times.
  uint64_t unit = seq.is_str() ? seq.str().size() : Weight(seq);
  if (unit != 0 &&
      static_cast<uint64_t>(n) > ev.limits().max_output_bytes / unit) {
    return CheckSize(ev.limits().max_output_bytes + 1, ev);
  }
  if (seq.is_str()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::Str(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < n; ++i) {
    items.insert(items.end(), seq.items().begin(), seq.items().end());
  }
  return Value::List(std::move(items), seq.list().seq);
}

absl::StatusOr<Value> IntOp(absl::string_view op, int64_t x, int64_t y) {
  int64_t r;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) return Overflow();
  } else if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) return Overflow();
  } else if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) return Overflow();
  } else if (op == "/") {
    if (y == 0)
      return absl::InvalidArgumentError("ZeroDivisionError: division by zero");
    return Value::Float(static_cast<double>(x) / static_cast<double>(y));
  } else if (op == "//" || op == "%") {
    if (y == 0) {
      return absl::InvalidArgumentError(
          "ZeroDivisionError: integer division or modulo by zero");
    }
    if (x == std::numeric_limits<int64_t>::min() && y == -1) return Overflow();
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    r = op == "//" ? q : m;
  } else {  // **
    if (y < 0) return Value::Float(std::pow(static_cast<double>(x), y));
    r = 1;
    for (int64_t i = 0; i < y; ++i) {
      if (__builtin_mul_overflow(r, x, &r)) return Overflow();
      if (r == 0 || r == 1) break;
    }
    if (r == 1 && x == -1 && y % 2 == 1) r = -1;
  }
  return Value::Int(r);
}

absl::StatusOr<Value> FloatOp(absl::string_view op, double x, double y) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0)
    return absl::InvalidArgumentError(
        "ZeroDivisionError: float division by zero");
  if (op == "/") return Value::Float(x / y);
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  if (op == "%") return Value::Float(m);
  return Value::Float(std::floor(x / y));
}

}  // namespace

absl::StatusOr<Value> BinaryOp(absl::string_view op, const Value& a,
                               const Value& b, Evaluator& ev) {
  if (op == "~") {
    std::string s = ToStr(a);
    s += ToStr(b);
    RETURN_IF_ERROR(CheckSize(s.size(), ev));
    return Value::Str(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float() || (op == "**" && b.as_int() < 0)) {
      return FloatOp(op, a.as_double(), b.as_double());
    }
    return IntOp(op, a.as_int(), b.as_int());
  }
  if (op == "+" && a.is_str() && b.is_str()) {
    RETURN_IF_ERROR(CheckSize(a.str().size() + b.str().size(), ev));
    if (a.is_markup() || b.is_markup()) {
      return Value::Markup(
          absl::StrCat(a.is_markup() ? a.str() : HtmlEscape(a.str()),
                       b.is_markup() ? b.str() : HtmlEscape(b.str())));
    }
    return Value::Str(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list() && a.list().seq == b.list().seq &&
      a.list().seq != SeqKind::kGenerator) {
    RETURN_IF_ERROR(CheckSize(Weight(a) + Weight(b), ev));
    std::vector<Value> items = a.items();
    items.insert(items.end(), b.items().begin(), b.items().end());
    return Value::List(std::move(items), a.list().seq);
  }
  if (op == "*" && (a.is_str() || a.is_list()) && (b.is_int() || b.is_bool())) {
    return Repeat(a, b.as_int(), ev);
  }
  if (op == "*" && (b.is_str() || b.is_list()) && (a.is_int() || a.is_bool())) {
    return Repeat(b, a.as_int(), ev);
  }
  if (op == "%" && a.is_str()) return PercentFormat(a.str(), b);
  return TypeMismatch(op, a, b);
}

namespace {

absl::StatusOr<Value> Range(CallArgs& args, Evaluator& ev) {
  int64_t start = 0, stop = 0, step = 1;
  for (const Value& v : args.pos) {
    if (!v.is_int() && !v.is_bool()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TypeError: '", v.TypeName(),
                       "' object cannot be interpreted as an integer"));
    }
  }
  if (args.pos.size() == 1) {
    stop = args.pos[0].as_int();
  } else if (args.pos.size() == 2 || args.pos.size() == 3) {
    start = args.pos[0].as_int();
    stop = args.pos[1].as_int();
    if (args.pos.size() == 3) step = args.pos[2].as_int();
  } else {
    return absl::InvalidArgumentError(
        "TypeError: range expected 1 to 3 arguments");
  }
  if (step == 0)
    return absl::InvalidArgumentError(
        "ValueError: range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (items.size() >= 100000) {
      return absl::InvalidArgumentError(
          "OverflowError: Range too big. The sandbox blocks ranges larger than "
          "MAX_RANGE (100000).");
    }
    RETURN_IF_ERROR(ev.CountIterations(1));
    items.push_back(Value::Int(i));
  }
  return Value::List(std::move(items));
}

absl::StatusOr<Value> MakeDictFrom(CallArgs& args) {
  std::vector<std::pair<Value, Value>> items;
  if (!args.pos.empty() && args.pos[0].is_dict())
    items = args.pos[0].dict().items;
  for (auto& [k, v] : args.kw) items.emplace_back(Value::Str(k), v);
  return Value::Dict(std::move(items));
}

absl::StatusOr<Value> MakeNamespace(CallArgs& args, Evaluator& ev) {
  auto ns = std::make_shared<Namespace>();
  ev.Track(ns);
  if (!args.pos.empty() && args.pos[0].is_dict()) {
    for (const auto& [k, v] : args.pos[0].dict().items) {
      if (k.is_str()) ns->Set(k.str(), v);
    }
  }
  for (auto& [k, v] : args.kw) ns->Set(k, v);
  return Value::FromObject(std::move(ns));
}

absl::StatusOr<Value> RaiseException(CallArgs& args, Evaluator&) {
  std::string msg = args.pos.empty() ? "" : ToStr(args.pos[0]);
  return absl::InvalidArgumentError(
      absl::StrCat("chat template: raise_exception: ", msg));
}

absl::StatusOr<Value> StrftimeNow(CallArgs& args, Evaluator& ev) {
  const Value* fmt = args.Get(0, "format");
  if (fmt == nullptr || !fmt->is_str()) {
    return absl::InvalidArgumentError(
        "TypeError: strftime_now needs a format string");
  }
  return Value::Str(Strftime(fmt->str(), ev.limits().now));
}

}  // namespace

void AddGlobals(Frame* frame) {
  frame->Set("range", MakeNative("range", Range));
  frame->Set("dict", MakeNative("dict", [](CallArgs& a, Evaluator&) {
               return MakeDictFrom(a);
             }));
  frame->Set("namespace", MakeNative("namespace", MakeNamespace));
  frame->Set("raise_exception", MakeNative("raise_exception", RaiseException));
  frame->Set("strftime_now", MakeNative("strftime_now", StrftimeNow));
}

}  // namespace paceline::chat::jinja
