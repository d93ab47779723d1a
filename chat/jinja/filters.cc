// jinja2's filters and tests.
#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/pyformat.h"
#include "chat/jinja/strings.h"

namespace paceline::chat::jinja {
namespace {

constexpr absl::string_view kFilters[] = {
    "abs",        "attr",    "capitalize", "count",    "d",     "default",
    "dictsort",   "e",       "escape",     "first",    "float", "format",
    "indent",     "int",     "items",      "join",     "last",  "length",
    "list",       "lower",   "map",        "max",      "min",   "reject",
    "rejectattr", "replace", "reverse",    "round",    "safe",  "select",
    "selectattr", "sort",    "string",     "sum",      "title", "tojson",
    "trim",       "unique",  "upper",      "wordcount"};
constexpr absl::string_view kTests[] = {
    "defined",     "undefined", "none",    "string",   "number",
    "integer",     "float",     "mapping", "iterable", "sequence",
    "boolean",     "true",      "false",   "even",     "odd",
    "divisibleby", "eq",        "equalto", "==",       "ne",
    "!=",          "lt",        "<",       "le",       "<=",
    "gt",          ">",         "ge",      ">=",       "lessthan",
    "greaterthan", "in",        "sameas",  "callable", "lower",
    "upper",       "escaped",   "filter",  "test"};

template <size_t N>
bool In(const absl::string_view (&names)[N], absl::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

bool ArgBool(const CallArgs& args, size_t i, absl::string_view name,
             bool dflt) {
  const Value* v = args.Get(i, name);
  return v == nullptr ? dflt : v->Truthy();
}

// jinja2's make_attrgetter: "a.b.0" looks up each part as an item.
absl::StatusOr<Value> GetPath(const Value& obj, const std::string& path) {
  Value v = obj;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    int64_t index;
    Value key = absl::SimpleAtoi(part, &index) ? Value::Int(index)
                                               : Value::Str(std::string(part));
    ASSIGN_OR_RETURN(v, GetItem(v, key));
  }
  return v;
}

absl::StatusOr<Value> Length(const Value& v) {
  if (v.is_undefined()) return Value::Int(0);
  if (v.is_str())
    return Value::Int(static_cast<int64_t>(CodepointCount(v.str())));
  if (v.is_list() && v.list().seq != SeqKind::kGenerator) {
    return Value::Int(static_cast<int64_t>(v.items().size()));
  }
  if (v.is_dict())
    return Value::Int(static_cast<int64_t>(v.dict().items.size()));
  return absl::InvalidArgumentError(absl::StrCat(
      "TypeError: object of type '", v.TypeName(), "' has no len()"));
}

// Sort key: the attribute, lower-cased for strings unless case-sensitive.
absl::StatusOr<Value> SortKey(const Value& v, const Value* attribute,
                              bool case_sensitive) {
  Value k = v;
  if (attribute != nullptr && !attribute->is_none()) {
    ASSIGN_OR_RETURN(k, GetPath(v, ToStr(*attribute)));
  }
  if (!case_sensitive && k.is_str()) return Value::Str(PyLower(k.str()));
  return k;
}

absl::Status SortValues(std::vector<Value>* items, std::vector<Value>* keys,
                        bool reverse) {
  std::vector<size_t> order(items->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    absl::StatusOr<bool> less =
        reverse ? Less((*keys)[b], (*keys)[a]) : Less((*keys)[a], (*keys)[b]);
    if (!less.ok()) error = less.status();
    return less.ok() && *less;
  });
  RETURN_IF_ERROR(error);
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back((*items)[i]);
  *items = std::move(sorted);
  return absl::OkStatus();
}

absl::StatusOr<Value> Sort(const Value& input, CallArgs& args) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  bool reverse = ArgBool(args, 0, "reverse", false);
  bool cs = ArgBool(args, 1, "case_sensitive", false);
  const Value* attribute = args.Get(2, "attribute");
  std::vector<Value> keys;
  for (const Value& v : items) {
    ASSIGN_OR_RETURN(Value k, SortKey(v, attribute, cs));
    keys.push_back(std::move(k));
  }
  RETURN_IF_ERROR(SortValues(&items, &keys, reverse));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> DictSort(const Value& input, CallArgs& args) {
  if (!input.is_dict()) {
    return absl::InvalidArgumentError("TypeError: dictsort needs a mapping");
  }
  bool cs = ArgBool(args, 0, "case_sensitive", false);
  const Value* by = args.Get(1, "by");
  bool by_value = by != nullptr && by->is_str() && by->str() == "value";
  bool reverse = ArgBool(args, 2, "reverse", false);
  std::vector<Value> items, keys;
  for (const auto& [k, v] : input.dict().items) {
    items.push_back(Value::List({k, v}, SeqKind::kTuple));
    ASSIGN_OR_RETURN(Value key, SortKey(by_value ? v : k, nullptr, cs));
    keys.push_back(std::move(key));
  }
  RETURN_IF_ERROR(SortValues(&items, &keys, reverse));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> Unique(const Value& input, CallArgs& args) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  bool cs = ArgBool(args, 0, "case_sensitive", false);
  const Value* attribute = args.Get(1, "attribute");
  std::vector<Value> out, seen;
  for (const Value& v : items) {
    ASSIGN_OR_RETURN(Value k, SortKey(v, attribute, cs));
    bool dup = false;
    for (const Value& s : seen) dup |= Equal(s, k);
    if (dup) continue;
    seen.push_back(k);
    out.push_back(v);
  }
  return Value::List(std::move(out), SeqKind::kGenerator);
}

absl::StatusOr<Value> MinMax(const Value& input, CallArgs& args, bool max) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  bool cs = ArgBool(args, 0, "case_sensitive", false);
  const Value* attribute = args.Get(1, "attribute");
  if (items.empty()) return Value::Undefined("no items for min/max");
  size_t best = 0;
  ASSIGN_OR_RETURN(Value best_key, SortKey(items[0], attribute, cs));
  for (size_t i = 1; i < items.size(); ++i) {
    ASSIGN_OR_RETURN(Value k, SortKey(items[i], attribute, cs));
    ASSIGN_OR_RETURN(bool better, max ? Less(best_key, k) : Less(k, best_key));
    if (better) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

absl::StatusOr<Value> Join(const Value& input, CallArgs& args, Evaluator& ev) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  const Value* sep = args.Get(0, "d");
  std::string d = sep != nullptr ? ToStr(*sep) : "";
  const Value* attribute = args.Get(1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value v = items[i];
    if (attribute != nullptr && !attribute->is_none()) {
      ASSIGN_OR_RETURN(v, GetPath(v, ToStr(*attribute)));
    }
    if (i > 0) out += d;
    out += ToStr(v);
    RETURN_IF_ERROR(CheckSize(out.size(), ev));
  }
  return Value::Str(std::move(out));
}

absl::StatusOr<Value> Indent(const Value& input, CallArgs& args,
                             Evaluator& ev) {
  const Value* width = args.Get(0, "width");
  std::string indention =
      width == nullptr ? "    "
      : width->is_str()
          ? width->str()
          : std::string(std::clamp<int64_t>(width->as_int(), 0, 1000), ' ');
  bool first = ArgBool(args, 1, "first", false);
  bool blank = ArgBool(args, 2, "blank", false);
  std::string s = absl::StrCat(ToStr(input), "\n");
  std::vector<std::string> lines = PySplitLines(s);
  RETURN_IF_ERROR(CheckSize(s.size() + lines.size() * indention.size(), ev));
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      rv += "\n";
      if (blank || !lines[i].empty()) rv += indention;
    }
    rv += lines[i];
  }
  if (first) rv = absl::StrCat(indention, rv);
  return input.is_markup() ? Value::Markup(std::move(rv))
                           : Value::Str(std::move(rv));
}

absl::StatusOr<Value> ToInt(const Value& input, CallArgs& args) {
  const Value* dflt = args.Get(0, "default");
  Value fallback = dflt != nullptr ? *dflt : Value::Int(0);
  if (input.is_int() || input.is_bool()) return Value::Int(input.as_int());
  if (input.is_float()) {
    double d = input.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return fallback;
    return Value::Int(static_cast<int64_t>(d));
  }
  if (input.is_str()) {
    std::string s = PyStrip(input.str(), std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    int64_t i;
    if (absl::SimpleAtoi(s, &i)) return Value::Int(i);
    double d;
    if (absl::SimpleAtod(s, &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(d));
    }
  }
  return fallback;
}

absl::StatusOr<Value> ToFloat(const Value& input, CallArgs& args) {
  const Value* dflt = args.Get(0, "default");
  Value fallback = dflt != nullptr ? *dflt : Value::Float(0);
  if (input.is_number()) return Value::Float(input.as_double());
  if (input.is_str()) {
    double d;
    std::string s = PyStrip(input.str(), std::nullopt, true, true);
    if (absl::SimpleAtod(s, &d)) return Value::Float(d);
  }
  return fallback;
}

absl::StatusOr<Value> ToJsonFilter(const Value& input, CallArgs& args,
                                   Evaluator& ev) {
  JsonOptions opts;
  const Value* indent = args.Get(1, "indent");
  if (indent != nullptr && !indent->is_none()) {
    if (indent->is_str()) {
      opts.indent_is_str = true;
      opts.indent_str = indent->str();
    } else {
      opts.indent =
          static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 1000));
    }
    opts.item_sep = std::string(1, ',');
  }
  const Value* seps = args.Get(2, "separators");
  if (seps != nullptr && !seps->is_none()) {
    if (!seps->is_list() || seps->items().size() != 2 ||
        !seps->items()[0].is_str() || !seps->items()[1].is_str()) {
      return absl::InvalidArgumentError(
          "ValueError: separators must be a pair of strings");
    }
    opts.item_sep = seps->items()[0].str();
    opts.key_sep = seps->items()[1].str();
  }
  opts.sort_keys = ArgBool(args, 3, "sort_keys", false);
  const Value* ensure_ascii = args.Get(0, "ensure_ascii");
  opts.ensure_ascii = ensure_ascii != nullptr && ensure_ascii->Truthy();
  ASSIGN_OR_RETURN(std::string s, ToJson(input, opts, ev.limits().max_depth,
                                         ev.limits().max_output_bytes));
  RETURN_IF_ERROR(CheckSize(s.size(), ev));
  return Value::Str(std::move(s));
}

}  // namespace

std::string HtmlEscape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

namespace {

// A str result that stays Markup when the input was.
Value SameKind(const Value& input, std::string s) {
  return input.is_markup() ? Value::Markup(std::move(s))
                           : Value::Str(std::move(s));
}

absl::StatusOr<Value> Map(const Value& input, CallArgs& args, Evaluator& ev);
absl::StatusOr<Value> Select(const Value& input, CallArgs& args, Evaluator& ev,
                             bool attr, bool keep);

absl::StatusOr<Value> Basic(absl::string_view name, const Value& input,
                            CallArgs& args, Evaluator& ev) {
  if (name == "default" || name == "d") {
    const Value* dflt = args.Get(0, "default_value");
    bool boolean = ArgBool(args, 1, "boolean", false);
    if (input.is_undefined() || (boolean && !input.Truthy())) {
      return dflt != nullptr ? *dflt : Value::Str("");
    }
    return input;
  }
  if (name == "length" || name == "count") return Length(input);
  if (name == "safe") return Value::Markup(ToStr(input));
  if (name == "string")
    return input.is_str() ? input : Value::Str(ToStr(input));
  if (name == "trim") {
    const Value* chars = args.Get(0, "chars");
    std::optional<std::string> set;
    if (chars != nullptr && !chars->is_none()) set = ToStr(*chars);
    return SameKind(input, PyStrip(ToStr(input), set, true, true));
  }
  if (name == "upper") return SameKind(input, PyUpper(ToStr(input)));
  if (name == "lower") return SameKind(input, PyLower(ToStr(input)));
  if (name == "title") return Value::Str(JinjaTitle(ToStr(input)));
  if (name == "capitalize") return Value::Str(PyCapitalize(ToStr(input)));
  if (name == "escape" || name == "e") {
    return input.is_markup() ? input : Value::Markup(HtmlEscape(ToStr(input)));
  }
  if (name == "join") return Join(input, args, ev);
  if (name == "tojson") return ToJsonFilter(input, args, ev);
  if (name == "indent") return Indent(input, args, ev);
  if (name == "int") return ToInt(input, args);
  if (name == "float") return ToFloat(input, args);
  if (name == "sort") return Sort(input, args);
  if (name == "dictsort") return DictSort(input, args);
  if (name == "unique") return Unique(input, args);
  if (name == "min" || name == "max") return MinMax(input, args, name == "max");
  if (name == "map") return Map(input, args, ev);
  if (name == "select" || name == "reject" || name == "selectattr" ||
      name == "rejectattr") {
    return Select(input, args, ev, absl::EndsWith(name, "attr"),
                  absl::StartsWith(name, "select"));
  }
  return Value::Undefined();
}

}  // namespace

bool IsKnownFilter(absl::string_view name) { return In(kFilters, name); }
bool IsKnownTest(absl::string_view name) { return In(kTests, name); }

namespace {

absl::StatusOr<Value> Sequence(absl::string_view name, const Value& input,
                               CallArgs& args, Evaluator& ev) {
  if (name == "list") {
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    return Value::List(std::move(items));
  }
  if (name == "items") {
    if (input.is_undefined()) return Value::List({}, SeqKind::kGenerator);
    if (!input.is_dict()) {
      return absl::InvalidArgumentError(
          "TypeError: Can only get item pairs from a mapping.");
    }
    std::vector<Value> items;
    for (const auto& [k, v] : input.dict().items) {
      items.push_back(Value::List({k, v}, SeqKind::kTuple));
    }
    return Value::List(std::move(items), SeqKind::kGenerator);
  }
  if (name == "first") {
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    return items.empty() ? Value::Undefined("no first item") : items[0];
  }
  if (name == "last") {
    if (input.is_list() && input.list().seq == SeqKind::kGenerator) {
      return absl::InvalidArgumentError(
          "TypeError: 'generator' object is not reversible");
    }
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    return items.empty() ? Value::Undefined("no last item") : items.back();
  }
  if (name == "reverse") {
    if (input.is_str()) {
      std::vector<uint32_t> cps = Codepoints(input.str());
      std::reverse(cps.begin(), cps.end());
      return Value::Str(FromCodepoints(cps, 0, cps.size()));
    }
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items), SeqKind::kGenerator);
  }
  if (name == "sum") {
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    const Value* attribute = args.Get(0, "attribute");
    const Value* start = args.Get(1, "start");
    Value total = start != nullptr ? *start : Value::Int(0);
    for (const Value& v : items) {
      Value x = v;
      if (attribute != nullptr && !attribute->is_none()) {
        ASSIGN_OR_RETURN(x, GetPath(v, ToStr(*attribute)));
      }
      ASSIGN_OR_RETURN(total, BinaryOp("+", total, x, ev));
    }
    return total;
  }
  if (name == "replace") {
    const Value* old = args.Get(0, "old");
    const Value* repl = args.Get(1, "new");
    if (old == nullptr || repl == nullptr) {
      return absl::InvalidArgumentError("TypeError: replace needs old and new");
    }
    const Value* count = args.Get(2, "count");
    std::string s = ToStr(input), o = ToStr(*old), r = ToStr(*repl);
    size_t hits = o.empty() ? CodepointCount(s) + 1 : PyCount(s, o);
    RETURN_IF_ERROR(CheckSize(s.size() + hits * r.size(), ev));
    return Value::Str(PyReplace(
        s, o, r, count != nullptr && !count->is_none() ? count->as_int() : -1));
  }
  if (name == "abs") {
    if (input.is_float()) return Value::Float(std::fabs(input.as_double()));
    if (input.is_number()) return Value::Int(std::llabs(input.as_int()));
    return absl::InvalidArgumentError("TypeError: bad operand type for abs()");
  }
  if (name == "round") {
    const Value* precision = args.Get(0, "precision");
    int p = precision != nullptr ? static_cast<int>(std::clamp<int64_t>(
                                       precision->as_int(), -20, 20))
                                 : 0;
    double scale = std::pow(10.0, p);
    return Value::Float(std::round(input.as_double() * scale) / scale);
  }
  if (name == "attr") {
    const Value* attr = args.Get(0, "name");
    if (attr == nullptr)
      return absl::InvalidArgumentError("TypeError: attr needs a name");
    return GetAttr(input, ToStr(*attr));
  }
  if (name == "format") {
    if (args.pos.size() == 1) return PercentFormat(ToStr(input), args.pos[0]);
    return PercentFormat(ToStr(input), Value::List(args.pos, SeqKind::kTuple));
  }
  if (name == "wordcount") {
    return Value::Int(static_cast<int64_t>(
        PySplit(ToStr(input), std::nullopt, -1, false).size()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no filter named '", name, "'"));
}

absl::StatusOr<Value> Map(const Value& input, CallArgs& args, Evaluator& ev) {
  if (!input.Truthy()) return Value::List({}, SeqKind::kGenerator);
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  std::vector<Value> out;
  const Value* attribute = nullptr;
  for (const auto& [k, v] : args.kw) {
    if (k == "attribute") attribute = &v;
  }
  if (attribute != nullptr) {
    const Value* dflt = nullptr;
    for (const auto& [k, v] : args.kw) {
      if (k == "default") dflt = &v;
    }
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value v, GetPath(item, ToStr(*attribute)));
      if (v.is_undefined() && dflt != nullptr) v = *dflt;
      out.push_back(std::move(v));
    }
    return Value::List(std::move(out), SeqKind::kGenerator);
  }
  if (args.pos.empty() || !args.pos[0].is_str()) {
    return absl::InvalidArgumentError(
        "map: a filter name or attribute= is required");
  }
  std::string filter = args.pos[0].str();
  CallArgs rest;
  rest.pos.assign(args.pos.begin() + 1, args.pos.end());
  rest.kw = args.kw;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value v, ApplyFilter(filter, item, rest, ev));
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out), SeqKind::kGenerator);
}

absl::StatusOr<Value> Select(const Value& input, CallArgs& args, Evaluator& ev,
                             bool attr, bool keep) {
  if (!input.Truthy()) return Value::List({}, SeqKind::kGenerator);
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  size_t next = 0;
  std::string attribute;
  if (attr) {
    if (args.pos.empty())
      return absl::InvalidArgumentError("TypeError: missing attribute");
    attribute = ToStr(args.pos[next++]);
  }
  std::string test;
  if (next < args.pos.size()) test = ToStr(args.pos[next++]);
  CallArgs test_args;
  test_args.pos.assign(args.pos.begin() + next, args.pos.end());
  test_args.kw = args.kw;
  std::vector<Value> out;
  for (const Value& item : items) {
    Value v = item;
    if (attr) {
      ASSIGN_OR_RETURN(v, GetPath(item, attribute));
    }
    bool pass;
    if (test.empty()) {
      pass = v.Truthy();
    } else {
      ASSIGN_OR_RETURN(pass, ApplyTest(test, v, test_args, ev));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::List(std::move(out), SeqKind::kGenerator);
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(absl::string_view name, const Value& input,
                                  CallArgs& args, Evaluator& ev) {
  if (!IsKnownFilter(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("no filter named '", name, "'"));
  }
  ASSIGN_OR_RETURN(Value v, Basic(name, input, args, ev));
  if (!v.is_undefined() || name == "default" || name == "d" || name == "min" ||
      name == "max") {
    return v;
  }
  return Sequence(name, input, args, ev);
}

absl::StatusOr<bool> ApplyTest(absl::string_view name, const Value& v,
                               CallArgs& args, Evaluator& ev) {
  const Value* arg = args.Get(0, "other");
  auto need_arg = [&]() -> absl::Status {
    if (arg != nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("TypeError: test '", name, "' needs an argument"));
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_str();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable")
    return v.is_str() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence")
    return v.is_str() || v.is_dict() || v.is_undefined() ||
           (v.is_list() && v.list().seq != SeqKind::kGenerator);
  if (name == "callable") return v.is_callable() || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "lower") return v.is_str() && PyIsLower(v.str());
  if (name == "upper") return v.is_str() && PyIsUpper(v.str());
  if (name == "filter") return v.is_str() && IsKnownFilter(v.str());
  if (name == "test") return v.is_str() && IsKnownTest(v.str());
  if (name == "even" || name == "odd") {
    if (v.is_undefined()) return UndefinedError(v);
    if (!v.is_number())
      return absl::InvalidArgumentError("TypeError: not a number");
    int64_t i = v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int();
    return (i % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    RETURN_IF_ERROR(need_arg());
    ASSIGN_OR_RETURN(Value m, BinaryOp("%", v, *arg, ev));
    return !m.Truthy();
  }
  RETURN_IF_ERROR(need_arg());
  if (name == "eq" || name == "equalto" || name == "==") return Equal(v, *arg);
  if (name == "ne" || name == "!=") return !Equal(v, *arg);
  if (name == "sameas") {
    return (v.is_none() && arg->is_none()) ||
           (v.is_bool() && arg->is_bool() && v.as_bool() == arg->as_bool()) ||
           (v.is_object() && arg->is_object() && v.object() == arg->object());
  }
  if (name == "in") return Contains(*arg, v);
  if (v.is_undefined()) return UndefinedError(v);
  if (arg->is_undefined()) return UndefinedError(*arg);
  if (name == "lt" || name == "<" || name == "lessthan") return Less(v, *arg);
  if (name == "gt" || name == ">" || name == "greaterthan")
    return Less(*arg, v);
  if (name == "le" || name == "<=") {
    ASSIGN_OR_RETURN(bool gt, Less(*arg, v));
    return !gt;
  }
  ASSIGN_OR_RETURN(bool lt, Less(v, *arg));
  return !lt;
}

}  // namespace paceline::chat::jinja
