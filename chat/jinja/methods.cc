// Python's str, dict and list methods (the safe ones).
#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/objects.h"
#include "chat/jinja/pyformat.h"
#include "chat/jinja/strings.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::chat::jinja {
namespace {

constexpr absl::string_view kStrMethods[] = {
    "strip",      "lstrip",     "rstrip",    "split",    "rsplit",
    "startswith", "endswith",   "replace",   "upper",    "lower",
    "title",      "capitalize", "find",      "rfind",    "index",
    "rindex",     "count",      "join",      "format",   "isdigit",
    "isalpha",    "isalnum",    "isspace",   "islower",  "isupper",
    "splitlines", "isnumeric",  "isdecimal", "swapcase", "casefold"};
constexpr absl::string_view kDictMethods[] = {"items", "keys", "values", "get",
                                              "copy"};
constexpr absl::string_view kListMethods[] = {"index", "count", "copy", "pop"};

template <size_t N>
bool In(const absl::string_view (&names)[N], absl::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

absl::Status ArgType(absl::string_view method, absl::string_view want,
                     const Value& got) {
  return absl::InvalidArgumentError(absl::StrCat("TypeError: ", method,
                                                 "() argument must be ", want,
                                                 ", not ", got.TypeName()));
}

// Optional str argument (None counts as absent).
absl::StatusOr<std::optional<std::string>> OptStr(const CallArgs& args,
                                                  size_t i,
                                                  absl::string_view name,
                                                  absl::string_view method) {
  const Value* v = args.Get(i, name);
  if (v == nullptr || v->is_none()) return std::optional<std::string>();
  if (!v->is_str()) return ArgType(method, "str or None", *v);
  return std::optional<std::string>(v->str());
}

absl::StatusOr<std::string> NeedStr(const CallArgs& args, size_t i,
                                    absl::string_view name,
                                    absl::string_view method) {
  const Value* v = args.Get(i, name);
  if (v == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("TypeError: ", method, "() takes at least 1 argument"));
  }
  if (!v->is_str()) return ArgType(method, "str", *v);
  return v->str();
}

int64_t OptInt(const CallArgs& args, size_t i, absl::string_view name,
               int64_t dflt) {
  const Value* v = args.Get(i, name);
  return v != nullptr && (v->is_int() || v->is_bool()) ? v->as_int() : dflt;
}

Value StrList(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& p : parts) items.push_back(Value::Str(std::move(p)));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> AffixTest(const std::string& s, const CallArgs& args,
                                bool prefix) {
  const Value* v = args.Get(0, "prefix");
  std::vector<Value> options;
  if (v != nullptr && v->is_str()) {
    options.push_back(*v);
  } else if (v != nullptr && v->is_list() && v->list().seq == SeqKind::kTuple) {
    options = v->items();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("TypeError: ", prefix ? "startswith" : "endswith",
                     " first arg must be str or a tuple of str"));
  }
  for (const Value& o : options) {
    if (!o.is_str()) return ArgType("startswith", "str", o);
    if (prefix ? absl::StartsWith(s, o.str()) : absl::EndsWith(s, o.str())) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

absl::StatusOr<Value> StrJoin(const std::string& sep, const CallArgs& args,
                              Evaluator& ev) {
  const Value* v = args.Get(0, "iterable");
  if (v == nullptr)
    return absl::InvalidArgumentError(
        "TypeError: join() takes exactly one argument");
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_str()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TypeError: sequence item ", i, ": expected str instance, ",
          items[i].TypeName(), " found"));
    }
    if (i > 0) out += sep;
    out += items[i].str();
    RETURN_IF_ERROR(CheckSize(out.size(), ev));
  }
  return Value::Str(std::move(out));
}

bool AllOf(const std::string& s, bool (*pred)(uint32_t)) {
  std::vector<uint32_t> cps = Codepoints(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

absl::StatusOr<Value> StrMethod(const std::string& s, absl::string_view name,
                                CallArgs& args, Evaluator& ev) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ASSIGN_OR_RETURN(auto chars, OptStr(args, 0, "chars", name));
    return Value::Str(PyStrip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ASSIGN_OR_RETURN(auto sep, OptStr(args, 0, "sep", name));
    if (sep.has_value() && sep->empty()) {
      return absl::InvalidArgumentError("ValueError: empty separator");
    }
    return StrList(
        PySplit(s, sep, OptInt(args, 1, "maxsplit", -1), name == "rsplit"));
  }
  if (name == "splitlines") return StrList(PySplitLines(s));
  if (name == "startswith" || name == "endswith") {
    return AffixTest(s, args, name == "startswith");
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(std::string old, NeedStr(args, 0, "old", name));
    ASSIGN_OR_RETURN(std::string repl, NeedStr(args, 1, "new", name));
    int64_t count = OptInt(args, 2, "count", -1);
    size_t hits = old.empty() ? CodepointCount(s) + 1 : PyCount(s, old);
    RETURN_IF_ERROR(CheckSize(s.size() + hits * repl.size(), ev));
    return Value::Str(PyReplace(s, old, repl, count));
  }
  if (name == "upper") return Value::Str(PyUpper(s));
  if (name == "lower" || name == "casefold") return Value::Str(PyLower(s));
  if (name == "title") return Value::Str(PyTitle(s));
  if (name == "capitalize") return Value::Str(PyCapitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (uint32_t c : Codepoints(s)) {
      std::string one;
      engine::AppendUtf8(c, &one);
      out += PyIsUpper(one) ? PyLower(one) : PyUpper(one);
    }
    return Value::Str(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" ||
      name == "rindex") {
    ASSIGN_OR_RETURN(std::string sub, NeedStr(args, 0, "sub", name));
    int64_t at = PyFind(s, sub, name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) {
      return absl::InvalidArgumentError("ValueError: substring not found");
    }
    return Value::Int(at);
  }
  if (name == "count") {
    ASSIGN_OR_RETURN(std::string sub, NeedStr(args, 0, "sub", name));
    return Value::Int(PyCount(s, sub));
  }
  if (name == "join") return StrJoin(s, args, ev);
  if (name == "format") {
    ASSIGN_OR_RETURN(Value v, BraceFormat(s, args));
    RETURN_IF_ERROR(CheckSize(v.str().size(), ev));
    return v;
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
    return Value::Bool(
        AllOf(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  }
  if (name == "isalpha") {
    return Value::Bool(AllOf(s, [](uint32_t c) {
      return engine::GetCodepointFlags(c).is_letter();
    }));
  }
  if (name == "isalnum") {
    return Value::Bool(AllOf(s, [](uint32_t c) {
      engine::CodepointFlags f = engine::GetCodepointFlags(c);
      return f.is_letter() || f.is_number();
    }));
  }
  if (name == "isspace") return Value::Bool(AllOf(s, IsPySpace));
  if (name == "islower") return Value::Bool(PyIsLower(s));
  if (name == "isupper") return Value::Bool(PyIsUpper(s));
  return absl::InvalidArgumentError(absl::StrCat("unknown str method ", name));
}

absl::StatusOr<Value> DictMethod(const Value& self, absl::string_view name,
                                 CallArgs& args) {
  const DictData& d = self.dict();
  if (name == "get") {
    const Value* key = args.Get(0, "key");
    if (key == nullptr)
      return absl::InvalidArgumentError(
          "TypeError: get expected at least 1 argument");
    if (const Value* v = d.Find(*key)) return *v;
    const Value* dflt = args.Get(1, "default");
    return dflt != nullptr ? *dflt : Value::None();
  }
  if (name == "copy") return Value::Dict(d.items);
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    if (name == "keys") {
      out.push_back(k);
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::List({k, v}, SeqKind::kTuple));
    }
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> ListMethod(const Value& self, absl::string_view name,
                                 CallArgs& args) {
  const std::vector<Value>& items = self.items();
  if (name == "copy") return Value::List(items);
  if (name == "pop") {
    if (self.list().seq != SeqKind::kList) {
      return absl::InvalidArgumentError("AttributeError: no attribute 'pop'");
    }
    int64_t n = static_cast<int64_t>(items.size());
    int64_t i = OptInt(args, 0, "index", -1);
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return absl::InvalidArgumentError("IndexError: pop index out of range");
    // Python mutates the list in place, and the sandbox allows list.pop.
    auto& mutable_items = const_cast<std::vector<Value>&>(items);
    Value v = mutable_items[i];
    mutable_items.erase(mutable_items.begin() + i);
    return v;
  }
  const Value* x = args.Get(0, "value");
  if (x == nullptr)
    return absl::InvalidArgumentError("TypeError: expected 1 argument");
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equal(items[i], *x)) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index")
    return absl::InvalidArgumentError("ValueError: value is not in list");
  return Value::Int(count);
}

}  // namespace

std::optional<Value> BoundMethod(const Value& self, absl::string_view name) {
  bool ok = (self.is_str() && In(kStrMethods, name)) ||
            (self.is_dict() && In(kDictMethods, name)) ||
            (self.is_list() && self.list().seq != SeqKind::kGenerator &&
             In(kListMethods, name));
  if (!ok) return std::nullopt;
  std::string method(name);
  return MakeNative(method, [self, method](CallArgs& args, Evaluator& ev) {
    return CallMethod(self, method, args, ev);
  });
}

absl::StatusOr<Value> CallMethod(const Value& self, absl::string_view name,
                                 CallArgs& args, Evaluator& ev) {
  if (self.is_str()) return StrMethod(self.str(), name, args, ev);
  if (self.is_dict()) return DictMethod(self, name, args);
  return ListMethod(self, name, args);
}

}  // namespace paceline::chat::jinja
