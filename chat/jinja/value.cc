#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::chat::jinja {

const Value* DictData::Find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (Equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::FindStr(absl::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_str() && k.str() == key) return &v;
  }
  return nullptr;
}

std::optional<Value> Object::Attr(absl::string_view /*name*/) const {
  return std::nullopt;
}

absl::StatusOr<Value> Object::Call(CallArgs& /*args*/,
                                   Evaluator& /*ev*/) const {
  return absl::InvalidArgumentError(
      absl::StrCat("'", TypeName(), "' object is not callable"));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}

Value Value::Str(std::string s) {
  Value v;
  v.kind_ = Kind::kStr;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::Markup(std::string s) {
  Value v = Str(std::move(s));
  v.b_ = true;
  return v;
}

namespace {

constexpr uint64_t kMaxWeight = uint64_t{1} << 62;

void AddWeight(const Value& item, uint64_t* weight, int* depth) {
  *weight = std::min(kMaxWeight, *weight + Weight(item));
  *depth = std::max(*depth, 1 + Depth(item));
}

}  // namespace

uint64_t Weight(const Value& v) {
  switch (v.kind()) {
    case Kind::kStr:
      return v.str().size() + 1;
    case Kind::kList:
      return v.list().weight;
    case Kind::kDict:
      return v.dict().weight;
    default:
      return 1;
  }
}

int Depth(const Value& v) {
  if (v.is_list()) return v.list().depth;
  if (v.is_dict()) return v.dict().depth;
  return 0;
}

Value Value::List(std::vector<Value> items, SeqKind seq) {
  Value v;
  v.kind_ = Kind::kList;
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->seq = seq;
  for (const Value& item : data->items) {
    AddWeight(item, &data->weight, &data->depth);
  }
  v.list_ = std::move(data);
  return v;
}

Value Value::Dict(std::vector<std::pair<Value, Value>> items) {
  Value v;
  v.kind_ = Kind::kDict;
  auto data = std::make_shared<DictData>();
  data->items = std::move(items);
  for (const auto& [key, item] : data->items) {
    AddWeight(key, &data->weight, &data->depth);
    AddWeight(item, &data->weight, &data->depth);
  }
  v.dict_ = std::move(data);
  return v;
}

Value Value::FromObject(std::shared_ptr<Object> obj) {
  Value v;
  v.kind_ = Kind::kObject;
  v.obj_ = std::move(obj);
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  using json = nlohmann::ordered_json;
  switch (j.type()) {
    case json::value_t::null:
      return None();
    case json::value_t::boolean:
      return Bool(j.get<bool>());
    case json::value_t::number_integer:
      return Int(j.get<int64_t>());
    case json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Int(static_cast<int64_t>(u));
      }
      return Float(static_cast<double>(u));
    }
    case json::value_t::number_float:
      return Float(j.get<double>());
    case json::value_t::string:
      return Str(j.get<std::string>());
    case json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        items.emplace_back(Str(k), FromJson(e));
      }
      return Dict(std::move(items));
    }
    default:
      return None();
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kStr:
      return !s_->empty();
    case Kind::kList:
      return list_->seq == SeqKind::kGenerator || !list_->items.empty();
    case Kind::kDict:
      return !dict_->items.empty();
    case Kind::kObject:
      return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kList:
      return list_->seq == SeqKind::kTuple       ? "tuple"
             : list_->seq == SeqKind::kGenerator ? "generator"
                                                 : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return obj_->TypeName();
  }
  return "?";
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kStr:
      return a.str() == b.str();
    case Kind::kList: {
      if (&a.list() == &b.list()) return true;
      bool a_tuple = a.list().seq == SeqKind::kTuple;
      bool b_tuple = b.list().seq == SeqKind::kTuple;
      if (a.list().seq == SeqKind::kGenerator || a_tuple != b_tuple) {
        return false;
      }
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!Equal(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    }
    case Kind::kObject:
      return a.object() == b.object();
    default:
      return false;
  }
}

absl::StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_str() && b.is_str()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.list().seq == b.list().seq &&
      a.list().seq != SeqKind::kGenerator) {
    size_t n = std::min(a.items().size(), b.items().size());
    for (size_t i = 0; i < n; ++i) {
      if (Equal(a.items()[i], b.items()[i])) continue;
      return Less(a.items()[i], b.items()[i]);
    }
    return a.items().size() < b.items().size();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("TypeError: '<' not supported between instances of '",
                   a.TypeName(), "' and '", b.TypeName(), "'"));
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res =
      std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci: [-]D[.DDD]e[+-]XX
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  int exp = std::atoi(sci.c_str() + e + 1);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  int decpt = exp + 1;  // digits d1d2... times 10^(decpt - ndigits)
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+',
                  exp < 0 ? -exp : exp);
    return out + ebuf;
  }
  if (decpt <= 0) {
    return out + "0." + std::string(-decpt, '0') + digits;
  }
  if (static_cast<size_t>(decpt) >= digits.size()) {
    return out + digits + std::string(decpt - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, decpt) + "." + digits.substr(decpt);
}

namespace {

bool IsPrintable(uint32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp < 0x7f) return true;
  engine::CodepointFlags f = engine::GetCodepointFlags(cp);
  return !(f.is_control() || f.is_undefined() || f.is_separator());
}

void AppendEscaped(uint32_t cp, std::string* out) {
  char buf[16];
  if (cp < 0x100) {
    std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
  }
  out->append(buf);
}

std::string StrRepr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : Codepoints(s)) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (IsPrintable(cp)) {
      engine::AppendUtf8(cp, &out);
    } else {
      AppendEscaped(cp, &out);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Kind::kInt:
      return absl::StrCat(v.as_int());
    case Kind::kFloat:
      return FloatRepr(v.as_double());
    case Kind::kStr:
      return StrRepr(v.str());
    case Kind::kList: {
      if (v.list().seq == SeqKind::kGenerator) return "<generator object>";
      bool tuple = v.list().seq == SeqKind::kTuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i > 0) out += ", ";
        out += Repr(v.items()[i]);
      }
      if (tuple && v.items().size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, Repr(k), ": ", Repr(e));
      }
      return out + "}";
    }
    case Kind::kObject:
      return absl::StrCat("<", v.object()->TypeName(), ">");
  }
  return "";
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kStr:
      return v.str();
    default:
      return Repr(v);
  }
}

std::vector<uint32_t> Codepoints(absl::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    engine::Utf8Scan scan = engine::ScanUtf8(s.substr(i));
    out.push_back(scan.kind == engine::Utf8Scan::kValid
                      ? scan.codepoint
                      : engine::kReplacementCodepoint);
    i += scan.length > 0 ? scan.length : 1;
  }
  return out;
}

std::string FromCodepoints(const std::vector<uint32_t>& cps, size_t begin,
                           size_t end) {
  std::string out;
  for (size_t i = begin; i < end && i < cps.size(); ++i) {
    engine::AppendUtf8(cps[i], &out);
  }
  return out;
}

size_t CodepointCount(absl::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

bool IsPySpace(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20)) return true;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace paceline::chat::jinja
