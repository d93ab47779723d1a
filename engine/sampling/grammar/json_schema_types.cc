// The JSON Schema compiler's builders of each type's text
// (json_schema_compiler.h): strings (lengths, patterns, formats), numbers
// (ranges, multipleOf), arrays, objects, and the shared pieces (any value,
// whitespace).

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/json_schema_compiler.h"
#include "engine/sampling/grammar/json_schema_merge.h"
#include "engine/sampling/grammar/json_text.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/regex.h"

namespace paceline::engine::grammar::internal {
namespace {

constexpr int64_t kMaxEnumeratedMultiples = 2000;

// Formats enforced, as whole-string ECMAScript patterns: RFC 3339 dates
// (month lengths and leap years exact) and times (a leap second only as
// 23:59:60Z), RFC 4122 UUIDs, RFC 5321 mailboxes (dot-atom or quoted local
// part; a domain or an address literal), RFC 3986 URIs (IP literals loosely
// checked), RFC 791 dotted quads. The other formats the specification
// defines are refused by name (Unimplemented); formats it does not define
// are annotations, as it requires.
const char* FormatPattern(const std::string& format) {
  static const std::string kDate = [] {
    const std::string leap_year =
        "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|"
        "[13579][26])00)";
    return "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|"
           "(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|" +
           leap_year + "-02-29)";
  }();
  static const std::string kTime =
      "(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?"
      "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])|23:59:60(\\.[0-9]+)?[Zz])";
  static const std::string kDateTime = kDate + "[Tt]" + kTime;
  static const std::string kUri = [] {
    const std::string unreserved = "A-Za-z0-9\\-._~";
    const std::string sub = "!$&'()*+,;=";
    const std::string pct = "%[0-9A-Fa-f]{2}";
    const std::string pchar = "([" + unreserved + sub + ":@]|" + pct + ")";
    const std::string authority = "(([" + unreserved + sub + ":]|" + pct +
                                  ")*@)?"
                                  "(\\[[0-9A-Fa-f:.]+\\]|([" +
                                  unreserved + sub + "]|" + pct +
                                  ")*)(:[0-9]*)?";
    const std::string segment = pchar + "*";
    const std::string hier = "(//" + authority + "(/" + segment + ")*|/(" +
                             pchar + "+(/" + segment + ")*)?|" + pchar + "+(/" +
                             segment + ")*)?";
    return "[A-Za-z][A-Za-z0-9+.\\-]*:" + hier + "(\\?(" + pchar +
           "|[/?])*)?(#(" + pchar + "|[/?])*)?";
  }();
  if (format == "date") return kDate.c_str();
  if (format == "time") return kTime.c_str();
  if (format == "date-time") return kDateTime.c_str();
  if (format == "uri") return kUri.c_str();
  if (format == "uuid") {
    return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
           "[0-9a-fA-F]{12}";
  }
  if (format == "email") {
    return "([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/"
           "=?^_`{|}~-]+)*"
           "|\"([^\"\\\\\\r\\n]|\\\\[^\\r\\n])*\")"
           "@([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
           "(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
           "|\\[(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
           "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
           "|IPv6:[0-9A-Fa-f:.]+)\\])";
  }
  if (format == "ipv4") {
    return "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
           "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  }
  return nullptr;
}

// The formats the specification defines that FormatPattern does not
// enforce: refused rather than silently accepted.
bool IsUnenforcedKnownFormat(const std::string& format) {
  static const char* const kKnown[] = {
      "duration",     "hostname",     "idn-hostname",          "idn-email",
      "ipv6",         "iri",          "iri-reference",         "uri-reference",
      "uri-template", "json-pointer", "relative-json-pointer", "regex"};
  for (const char* k : kKnown) {
    if (format == k) return true;
  }
  return false;
}

absl::StatusOr<int64_t> Count(const J& s, const char* key, int64_t fallback,
                              const std::string& where) {
  if (!s.contains(key)) return fallback;
  const J& v = s[key];
  if (v.is_number_unsigned() ||
      (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return v.get<int64_t>();
  }
  if (v.is_number_float() && v.get<double>() >= 0 &&
      v.get<double>() == std::floor(v.get<double>()) &&
      v.get<double>() < 1e15) {
    return static_cast<int64_t>(v.get<double>());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", key, "' at ", where, " is not a non-negative integer"));
}

int32_t Clamp(int64_t v) {
  return static_cast<int32_t>(std::min<int64_t>(v, 1'000'000'000));
}

bool IsTrivialSchema(const J& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (!IsAnnotationKeyword(k)) return false;
  }
  return true;
}

}  // namespace

ExprId SchemaCompiler::Cached(const std::string& key,
                              ExprId (*make)(SchemaCompiler*)) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const ExprId e = make(this);
  cache_[key] = e;
  return e;
}

ExprId SchemaCompiler::Ws() {
  if (options_.whitespace == JsonSchemaOptions::Whitespace::kCompact) {
    return g_->Empty();
  }
  return Cached("ws", [](SchemaCompiler* self) {
    const RuleId rule = self->NewRule("ws");
    self->g_->SetRule(
        rule, self->g_->Repeat(
                  self->g_->Bytes(
                      {{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}),
                  0, self->options_.max_whitespace));
    return self->g_->Ref(rule);
  });
}

ExprId SchemaCompiler::Sep(char c) {
  if (options_.whitespace == JsonSchemaOptions::Whitespace::kCompact) {
    return g_->Seq(
        {g_->Byte(static_cast<uint8_t>(c)), g_->Optional(g_->Literal(" "))});
  }
  return g_->Seq({Ws(), g_->Byte(static_cast<uint8_t>(c)), Ws()});
}

ExprId SchemaCompiler::Open(char c) {
  return g_->Seq({g_->Byte(static_cast<uint8_t>(c)), Ws()});
}

ExprId SchemaCompiler::Close(char c) {
  return g_->Seq({Ws(), g_->Byte(static_cast<uint8_t>(c))});
}

ExprId SchemaCompiler::AnyString() {
  return Cached("string", [](SchemaCompiler* self) {
    const RuleId rule = self->NewRule("string");
    self->g_->SetRule(rule, JsonStringOfLength(self->g_, 0, kUnbounded));
    return self->g_->Ref(rule);
  });
}

ExprId SchemaCompiler::AnyValue() {
  return Cached("value", [](SchemaCompiler* self) {
    Grammar* g = self->g_;
    const RuleId value = self->NewRule("any-value");
    const RuleId object = self->NewRule("any-object");
    const RuleId array = self->NewRule("any-array");
    const RuleId number = self->NewRule("any-number");
    g->SetRule(number, *JsonNumberRange(g, {}, {}, false));
    const ExprId member =
        g->Seq({self->AnyString(), self->Sep(':'), g->Ref(value)});
    g->SetRule(
        object,
        g->Seq({self->Open('{'),
                g->Optional(g->Seq(
                    {member, g->Star(g->Seq({self->Sep(','), member}))})),
                self->Close('}')}));
    g->SetRule(array,
               g->Seq({self->Open('['),
                       g->Optional(g->Seq(
                           {g->Ref(value),
                            g->Star(g->Seq({self->Sep(','), g->Ref(value)}))})),
                       self->Close(']')}));
    g->SetRule(value, g->Alt({g->Ref(object), g->Ref(array), self->AnyString(),
                              g->Ref(number), g->Literal("true"),
                              g->Literal("false"), g->Literal("null")}));
    return g->Ref(value);
  });
}

absl::StatusOr<ExprId> SchemaCompiler::Type(const std::string& type,
                                            const J& schema,
                                            const std::string& where,
                                            int depth) {
  if (type == "null") return g_->Literal("null");
  if (type == "boolean") {
    return g_->Alt({g_->Literal("true"), g_->Literal("false")});
  }
  if (type == "string") return String(schema, where);
  if (type == "integer" || type == "number") {
    return Number(schema, type == "integer", where);
  }
  if (type == "array") return Array(schema, where, depth);
  return Object(schema, where, depth);
}

absl::StatusOr<ExprId> SchemaCompiler::Pattern(const std::string& pattern,
                                               bool search,
                                               const std::string& where) {
  const std::string key =
      absl::StrCat(search ? "pattern:" : "format:", pattern);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  RegexOptions options;
  options.search = search;
  options.emit = [](Grammar* g, std::vector<CodepointRange> ranges) {
    return JsonChar(g, std::move(ranges));
  };
  auto body = AddRegex(g_, pattern, options);
  if (!body.ok()) {
    return absl::Status(
        body.status().code(),
        absl::StrCat("'pattern' at ", where, ": ", body.status().message()));
  }
  const RuleId rule = NewRule("pattern");
  g_->SetRule(rule, g_->Seq({g_->Literal("\""), *body, g_->Literal("\"")}));
  const ExprId e = g_->Ref(rule);
  cache_[key] = e;
  return e;
}

absl::StatusOr<StringAssertions> ReadStringAssertions(
    const J& s, const std::string& where) {
  StringAssertions a;
  ASSIGN_OR_RETURN(a.min, Count(s, "minLength", 0, where));
  ASSIGN_OR_RETURN(a.max, Count(s, "maxLength", -1, where));
  const char* format = nullptr;
  if (s.contains("format") && s["format"].is_string()) {
    const std::string name = s["format"].get<std::string>();
    if (IsUnenforcedKnownFormat(name)) {
      return absl::UnimplementedError(absl::StrCat(
          "'format' at ", where, ": \"", name, "\" is not enforced"));
    }
    format = FormatPattern(name);
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'pattern' at ", where, " is not a string"));
    }
    if (a.Lengths() || format != nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "'pattern' at ", where,
          " together with minLength/maxLength or a format is not supported"));
    }
    a.has_pattern = true;
    a.pattern = s["pattern"].get<std::string>();
    a.search = true;
    return a;
  }
  if (format != nullptr) {
    if (a.Lengths()) {
      return absl::UnimplementedError(
          absl::StrCat("'format' at ", where,
                       " together with minLength/maxLength is not supported"));
    }
    a.has_pattern = true;
    a.pattern = format;
  }
  return a;
}

absl::StatusOr<ExprId> SchemaCompiler::String(const J& s,
                                              const std::string& where) {
  ASSIGN_OR_RETURN(const StringAssertions a, ReadStringAssertions(s, where));
  if (a.has_pattern) return Pattern(a.pattern, a.search, where);
  const int64_t min = a.min;
  const int64_t max = a.max;
  const bool lengths = a.Lengths();
  if (max >= 0 && min > max) return g_->Nothing();
  if (!lengths) return AnyString();
  const std::string key = absl::StrCat("len:", min, ":", max);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const RuleId rule = NewRule("string");
  g_->SetRule(rule, JsonStringOfLength(g_, Clamp(min),
                                       max < 0 ? kUnbounded : Clamp(max)));
  cache_[key] = g_->Ref(rule);
  return cache_[key];
}

absl::StatusOr<ExprId> SchemaCompiler::Number(const J& s, bool integer,
                                              const std::string& where) {
  NumberBound lo;
  NumberBound hi;
  auto bound = [&](const char* inclusive, const char* exclusive,
                   bool lower) -> absl::StatusOr<NumberBound> {
    NumberBound b;
    if (s.contains(inclusive)) {
      if (!s[inclusive].is_number()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", inclusive, "' at ", where, " is not a number"));
      }
      b = {true, s[inclusive].dump(), false};
    }
    if (s.contains(exclusive)) {
      const J& x = s[exclusive];
      if (x.is_boolean()) {  // draft 4: a flag on the inclusive bound
        b.exclusive = b.present && x.get<bool>();
      } else if (x.is_number()) {
        const bool stricter =
            !b.present ||
            (lower ? x.get<double>() >= s[inclusive].get<double>()
                   : x.get<double>() <= s[inclusive].get<double>());
        if (stricter) b = {true, x.dump(), true};
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("'", exclusive, "' at ", where, " is not a number"));
      }
    }
    return b;
  };
  ASSIGN_OR_RETURN(lo, bound("minimum", "exclusiveMinimum", true));
  ASSIGN_OR_RETURN(hi, bound("maximum", "exclusiveMaximum", false));
  if (s.contains("multipleOf")) {
    const J& m = s["multipleOf"];
    if (!m.is_number() || m.get<double>() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'multipleOf' at ", where, " is not a positive number"));
    }
    const double k = m.get<double>();
    if (k == std::floor(k) && k < 1e15) {
      if (k == 1) {
        integer = true;
      } else if (lo.present && hi.present) {
        double lo_value = 0;
        double hi_value = 0;
        if (!absl::SimpleAtod(lo.text, &lo_value) ||
            !absl::SimpleAtod(hi.text, &hi_value)) {
          return absl::InvalidArgumentError(
              absl::StrCat("a bound at ", where, " is not a number"));
        }
        const double a = std::ceil(lo_value / k);
        const double b = std::floor(hi_value / k);
        if (b - a > kMaxEnumeratedMultiples) {
          return absl::UnimplementedError(absl::StrCat(
              "'multipleOf' at ", where, " over more than ",
              kMaxEnumeratedMultiples, " values is not supported"));
        }
        std::vector<ExprId> alts;
        for (double q = a; q <= b; ++q) {
          const double v = q * k;
          if ((lo.exclusive && v <= lo_value) ||
              (hi.exclusive && v >= hi_value)) {
            continue;
          }
          alts.push_back(g_->Literal(absl::StrCat(static_cast<int64_t>(v))));
        }
        return g_->Alt(std::move(alts));
      } else {
        return absl::UnimplementedError(
            absl::StrCat("'multipleOf' at ", where,
                         " is supported only with both minimum and maximum"));
      }
    } else if (!integer) {
      return absl::UnimplementedError(
          absl::StrCat("'multipleOf' at ", where,
                       ": a fractional divisor is not supported"));
    }
  }
  const std::string key =
      absl::StrCat("num:", integer, ":", lo.present, lo.text, lo.exclusive, ":",
                   hi.present, hi.text, hi.exclusive);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  ASSIGN_OR_RETURN(ExprId body, JsonNumberRange(g_, lo, hi, integer));
  if (g_->expr(body).kind == ExprKind::kNothing) return body;
  const RuleId rule = NewRule(integer ? "integer" : "number");
  g_->SetRule(rule, body);
  cache_[key] = g_->Ref(rule);
  return cache_[key];
}

absl::StatusOr<ExprId> SchemaCompiler::Array(const J& s,
                                             const std::string& where,
                                             int depth) {
  ASSIGN_OR_RETURN(int64_t min, Count(s, "minItems", 0, where));
  ASSIGN_OR_RETURN(int64_t max, Count(s, "maxItems", -1, where));
  if (s.contains("uniqueItems") && s["uniqueItems"].is_boolean() &&
      s["uniqueItems"].get<bool>() && (max < 0 || max > 1)) {
    return absl::UnimplementedError(
        absl::StrCat("'uniqueItems' at ", where, " is not supported"));
  }
  if (max >= 0 && min > max) return g_->Nothing();
  // Positional schemas, then the schema of the rest.
  J prefix = J::array();
  J rest = true;
  std::string rest_where = where + "/items";
  if (s.contains("prefixItems")) {
    prefix = s["prefixItems"];
    if (s.contains("items")) rest = s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    prefix = s["items"];
    rest = s.contains("additionalItems") ? s["additionalItems"] : J(true);
    rest_where = where + "/additionalItems";
  } else if (s.contains("items")) {
    rest = s["items"];
  }
  if (!prefix.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'prefixItems' at ", where, " is not an array"));
  }
  int64_t k = static_cast<int64_t>(prefix.size());
  if (max >= 0) k = std::min(k, max);
  std::vector<ExprId> items;
  for (int64_t i = 0; i < k; ++i) {
    ASSIGN_OR_RETURN(
        ExprId e, SchemaRef(prefix[i], absl::StrCat(where, "/prefixItems/", i),
                            depth + 1));
    items.push_back(e);
  }
  const bool rest_allowed = !(rest.is_boolean() && !rest.get<bool>());
  ExprId rest_item = g_->Nothing();
  if (rest_allowed) {
    if (IsTrivialSchema(rest)) {
      rest_item = AnyValue();
    } else {
      ASSIGN_OR_RETURN(rest_item, SchemaRef(rest, rest_where, depth + 1));
    }
  }
  // After the prefix: the rest's items, each after a comma.
  ExprId tail = g_->Empty();
  if (rest_allowed && (max < 0 || max > k)) {
    const int32_t lo =
        Clamp(std::max<int64_t>(0, min - std::max<int64_t>(k, 1)));
    const int32_t hi =
        max < 0 ? kUnbounded : Clamp(max - std::max<int64_t>(k, 1));
    tail = g_->Repeat(g_->Seq({Sep(','), rest_item}), lo, hi);
  } else if (min > k) {
    return g_->Nothing();
  }
  ExprId first;
  if (k == 0) {
    if (!rest_allowed || max == 0) {
      first = g_->Nothing();
    } else {
      first = g_->Seq({rest_item, tail});
    }
  } else {
    // Prefix items 1..k-1, each optional once past minItems.
    ExprId after = tail;
    for (int64_t i = k - 1; i >= 1; --i) {
      ExprId item = g_->Seq({Sep(','), items[i], after});
      after = i < min ? item : g_->Optional(item);
    }
    first = g_->Seq({items[0], after});
  }
  ExprId body = min == 0 ? g_->Optional(first) : first;
  return g_->Seq({Open('['), body, Close(']')});
}

}  // namespace paceline::engine::grammar::internal
