// The walk over a schema: references, combinators, enum/const and the
// dispatch on type (json_schema_compiler.h). The types' own text is built
// in json_schema_types.cc.

#include "engine/sampling/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/json_schema_compiler.h"
#include "engine/sampling/grammar/json_schema_merge.h"
#include "engine/sampling/grammar/json_text.h"
#include "engine/sampling/grammar/matcher.h"

namespace paceline::engine::grammar {
namespace internal {
namespace {

constexpr int kMaxRefHops = 32;
const char* const kTypes[] = {"object",  "array",   "string", "number",
                              "integer", "boolean", "null"};

bool IsTrivial(const J& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (!IsAnnotationKeyword(k)) return false;
  }
  return true;
}

J Without(const J& s, std::initializer_list<const char*> keys) {
  J out = s;
  for (const char* k : keys) out.erase(k);
  return out;
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    int v = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        absl::SimpleHexAtoi(s.substr(i + 1, 2), &v)) {
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// A JSON pointer ("/a/b/0") into `doc`, or null.
const J* Pointer(const J& doc, const std::string& pointer) {
  const J* at = &doc;
  if (pointer.empty()) return at;
  for (absl::string_view raw : absl::StrSplit(pointer.substr(1), '/')) {
    std::string token = PercentDecode(std::string(raw));
    for (size_t p; (p = token.find("~1")) != std::string::npos;) {
      token.replace(p, 2, "/");
    }
    for (size_t p; (p = token.find("~0")) != std::string::npos;) {
      token.replace(p, 2, "~");
    }
    if (at->is_object()) {
      auto it = at->find(token);
      if (it == at->end()) return nullptr;
      at = &*it;
    } else if (at->is_array()) {
      size_t index = 0;
      if (!absl::SimpleAtoi(token, &index) || index >= at->size()) {
        return nullptr;
      }
      at = &(*at)[index];
    } else {
      return nullptr;
    }
  }
  return at;
}

// The subschema whose $id / id / $anchor is `name`, searched depth first.
const J* FindById(const J& s, const std::string& name, int depth = 0) {
  if (depth > 64) return nullptr;
  if (s.is_object()) {
    for (const char* key : {"$id", "id", "$anchor"}) {
      auto it = s.find(key);
      if (it != s.end() && it->is_string()) {
        const std::string v = it->get<std::string>();
        if (v == name || (std::string(key) == "$anchor" && "#" + v == name)) {
          return &s;
        }
      }
    }
  }
  if (s.is_object() || s.is_array()) {
    for (const J& child : s) {
      if (const J* found = FindById(child, name, depth + 1)) return found;
    }
  }
  return nullptr;
}

// Whether a subschema below the root declares its own $id (a new base for
// the references inside it).
bool HasEmbeddedId(const J& s, int depth = 0) {
  if (depth > 64 || !(s.is_object() || s.is_array())) return false;
  if (depth > 0 && s.is_object() && s.contains("$id")) return true;
  for (const J& child : s) {
    if (HasEmbeddedId(child, depth + 1)) return true;
  }
  return false;
}

// The meta-schemas of the drafts this compiler reads.
bool KnownMetaSchema(const std::string& uri) {
  return uri.find("://json-schema.org/") != std::string::npos &&
         (uri.find("/draft-0") != std::string::npos ||
          uri.find("/draft/2019-09/schema") != std::string::npos ||
          uri.find("/draft/2020-12/schema") != std::string::npos ||
          uri.find("json-schema.org/schema") != std::string::npos);
}

std::vector<std::string> TypesOf(const J& s) {
  std::vector<std::string> out;
  if (s.is_object() && s.contains("type")) {
    const J& t = s["type"];
    if (t.is_string()) out.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (const J& x : t) {
        if (x.is_string()) out.push_back(x.get<std::string>());
      }
    }
    return out;
  }
  return {std::begin(kTypes), std::end(kTypes)};
}

bool HasType(const std::vector<std::string>& types, const std::string& t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

std::string TypeOfValue(const J& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return d == static_cast<double>(static_cast<int64_t>(d)) ? "integer"
                                                             : "number";
  }
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool TypeAllows(const std::vector<std::string>& types, const std::string& t) {
  return HasType(types, t) || (t == "integer" && HasType(types, "number"));
}

}  // namespace

SchemaCompiler::SchemaCompiler(Grammar* g, const J& root,
                               const JsonSchemaOptions& options)
    : g_(g), root_(root), options_(options) {
  if (root.is_object() && root.contains("$schema") &&
      root["$schema"].is_string()) {
    const std::string s = root["$schema"].get<std::string>();
    for (const char* old : {"draft-03", "draft-04", "draft-06", "draft-07"}) {
      if (s.find(old) != std::string::npos) legacy_refs_ = true;
    }
  }
}

RuleId SchemaCompiler::NewRule(const std::string& name) {
  return g_->AddRule(absl::StrCat(name, "-", g_->num_rules()));
}

absl::StatusOr<const J*> SchemaCompiler::Resolve(const std::string& ref,
                                                 const std::string& where) {
  std::string local = ref;
  // A reference through the root's own $id is local.
  for (const char* key : {"$id", "id"}) {
    if (root_.is_object() && root_.contains(key) && root_[key].is_string()) {
      const std::string base = root_[key].get<std::string>();
      std::string stripped = base;
      if (!stripped.empty() && stripped.back() == '#') stripped.pop_back();
      if (!stripped.empty() && local.rfind(stripped, 0) == 0) {
        local = local.substr(stripped.size());
        if (local.empty()) local = "#";
      }
    }
  }
  if (local == "#" || local.empty()) return &root_;
  if (local.rfind("#/", 0) == 0) {
    if (const J* at = Pointer(root_, PercentDecode(local.substr(1)))) return at;
    if (HasEmbeddedId(root_)) {
      return absl::UnimplementedError(absl::StrCat(
          "'$ref' at ", where, ": '", ref,
          "' is not a pointer into the root document (references relative "
          "to an embedded $id are not supported)"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("'$ref' at ", where, ": '", ref, "' names nothing"));
  }
  if (const J* at = FindById(root_, local)) return at;
  return absl::UnimplementedError(absl::StrCat(
      "'$ref' at ", where, ": '", ref,
      "' is not inside this schema (only local references are supported)"));
}

absl::StatusOr<J> SchemaCompiler::ResolveTop(const J& schema,
                                             const std::string& where) {
  J s = schema;
  for (int hop = 0; s.is_object() && s.contains("$ref"); ++hop) {
    if (hop == kMaxRefHops || !s["$ref"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'$ref' at ", where, " loops or is not a string"));
    }
    ASSIGN_OR_RETURN(const J* target,
                     Resolve(s["$ref"].get<std::string>(), where));
    J rest = Without(s, {"$ref"});
    if (legacy_refs_) rest = J::object();  // draft 7 and older ignore them
    ASSIGN_OR_RETURN(s, MergeSchemas(*target, rest, where));
  }
  return s;
}

absl::StatusOr<ExprId> SchemaCompiler::RefRule(const J* target,
                                               const std::string& ref,
                                               int depth) {
  auto it = ref_rules_.find(target);
  if (it != ref_rules_.end()) return g_->Ref(it->second);
  const RuleId rule = NewRule("ref");
  ref_rules_[target] = rule;
  ASSIGN_OR_RETURN(ExprId body, Schema(*target, ref, depth + 1));
  g_->SetRule(rule, body);
  return g_->Ref(rule);
}

absl::StatusOr<ExprId> SchemaCompiler::SchemaRef(const J& schema,
                                                 const std::string& where,
                                                 int depth) {
  ASSIGN_OR_RETURN(ExprId e, Schema(schema, where, depth));
  const ExprKind kind = g_->expr(e).kind;
  if (kind == ExprKind::kRef || kind == ExprKind::kNothing ||
      kind == ExprKind::kBytes) {
    return e;
  }
  const RuleId rule = NewRule("value");
  g_->SetRule(rule, e);
  return g_->Ref(rule);
}

absl::Status SchemaCompiler::CheckKeywords(const J& s,
                                           const std::string& where) const {
  auto refuse = [&](const std::string& k) {
    return absl::UnimplementedError(
        absl::StrCat("'", k, "' at ", where, " is not supported"));
  };
  if (s.contains("if") && (s.contains("then") || s.contains("else"))) {
    return refuse("if");
  }
  for (const char* k : {"contains", "$dynamicRef", "$recursiveRef"}) {
    if (s.contains(k)) return refuse(k);
  }
  for (const char* k :
       {"dependentSchemas", "dependentRequired", "dependencies"}) {
    if (s.contains(k) && !(s[k].is_object() && s[k].empty())) return refuse(k);
  }
  for (const char* k :
       {"unevaluatedProperties", "unevaluatedItems", "propertyNames"}) {
    if (s.contains(k) && !IsTrivial(s[k])) return refuse(k);
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprId> SchemaCompiler::Schema(const J& schema,
                                              const std::string& where,
                                              int depth) {
  if (depth > options_.max_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema nests deeper than ", options_.max_depth, " at ", where));
  }
  if (schema.is_boolean()) {
    return schema.get<bool>() ? AnyValue() : g_->Nothing();
  }
  if (!schema.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a schema must be an object or a boolean at ", where));
  }
  RETURN_IF_ERROR(CheckKeywords(schema, where));
  if (schema.contains("$ref")) {
    if (!schema["$ref"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'$ref' at ", where, " is not a string"));
    }
    const std::string ref = schema["$ref"].get<std::string>();
    if (legacy_refs_ || IsTrivial(Without(schema, {"$ref"}))) {
      ASSIGN_OR_RETURN(const J* target, Resolve(ref, where));
      return RefRule(target, ref, depth);
    }
    ASSIGN_OR_RETURN(J resolved, ResolveTop(schema, where));
    return Schema(resolved, where, depth + 1);
  }
  if (schema.contains("allOf")) {
    if (!schema["allOf"].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'allOf' at ", where, " is not an array"));
    }
    J merged = Without(schema, {"allOf"});
    for (size_t i = 0; i < schema["allOf"].size(); ++i) {
      const std::string at = absl::StrCat(where, "/allOf/", i);
      ASSIGN_OR_RETURN(J part, ResolveTop(schema["allOf"][i], at));
      ASSIGN_OR_RETURN(merged, MergeSchemas(merged, part, at));
    }
    return Schema(merged, where, depth + 1);
  }
  if (schema.contains("anyOf")) return AnyOf(schema, "anyOf", where, depth);
  if (schema.contains("oneOf")) return AnyOf(schema, "oneOf", where, depth);
  if (schema.contains("enum") || schema.contains("const")) {
    J values = J::array();
    if (schema.contains("const")) values.push_back(schema["const"]);
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'enum' at ", where, " is not an array"));
      }
      if (schema.contains("const")) {
        const J& e = schema["enum"];
        if (std::find(e.begin(), e.end(), schema["const"]) == e.end()) {
          values = J::array();
        }
      } else {
        values = schema["enum"];
      }
    }
    return Enum(Without(schema, {"enum", "const"}), values, where, depth);
  }
  return Typed(schema, where, depth);
}

absl::StatusOr<ExprId> SchemaCompiler::Enum(const J& rest, const J& values,
                                            const std::string& where,
                                            int depth) {
  std::vector<J> kept;
  const std::vector<std::string> types = TypesOf(rest);
  for (const J& v : values) {
    if (TypeAllows(types, TypeOfValue(v))) kept.push_back(v);
  }
  J constraints = Without(rest, {"type"});
  if (!IsTrivial(constraints) && !kept.empty()) {
    // The other keywords decide which values stay: the values are matched
    // against the grammar of the rest of the schema.
    Grammar check;
    SchemaCompiler sub(&check, root_, options_);
    ASSIGN_OR_RETURN(ExprId e, sub.Schema(rest, where, depth + 1));
    const RuleId r = check.AddRule("root");
    check.SetRule(r, e);
    check.set_root(r);
    auto compiled = Compile(check);
    std::vector<J> valid;
    for (const J& v : kept) {
      if (!compiled.ok()) break;  // the rest matches nothing
      Matcher m(*compiled);
      if (m.AcceptBytes(v.dump()) && m.CanFinish()) valid.push_back(v);
    }
    kept = std::move(valid);
  }
  std::vector<ExprId> alts;
  for (const J& v : kept) alts.push_back(ValueLiteral(v));
  return g_->Alt(std::move(alts));
}

// The texts of instances equal to `v` under JSON Schema's equality: numbers
// by value (an integral one written as an integer, whatever its spelling in
// the schema: 1.0 as 1), objects in any key order (up to
// max_any_order_properties keys, else in v's order), the allowed whitespace.
ExprId SchemaCompiler::ValueLiteral(const J& v) {
  if (v.is_string()) return JsonStringLiteral(g_, v.get<std::string>());
  if (v.is_number()) {
    const double d = v.get<double>();
    const bool integral = v.is_number_integer() || v.is_number_unsigned() ||
                          (d == std::floor(d) && std::fabs(d) < 9e15);
    if (!integral) return g_->Literal(v.dump());
    const std::string digits =
        v.is_number_unsigned()
            ? std::to_string(v.get<uint64_t>())
            : std::to_string(v.is_number_integer() ? v.get<int64_t>()
                                                   : static_cast<int64_t>(d));
    return g_->Literal(digits == "-0" ? "0" : digits);
  }
  if (v.is_array()) {
    std::vector<ExprId> items = {Open('[')};
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) items.push_back(Sep(','));
      items.push_back(ValueLiteral(v[i]));
    }
    items.push_back(Close(']'));
    return g_->Seq(std::move(items));
  }
  if (v.is_object()) {
    std::vector<ExprId> written;
    for (const auto& [key, value] : v.items()) {
      written.push_back(
          g_->Seq({JsonStringLiteral(g_, key), Sep(':'), ValueLiteral(value)}));
    }
    const std::vector<bool> required(written.size(), true);
    ExprId body = static_cast<int32_t>(written.size()) <=
                          options_.max_any_order_properties
                      ? MembersAnyOrder(written, required, g_->Nothing())
                      : MembersInOrder(written, required, g_->Nothing());
    return g_->Seq({Open('{'), body, Close('}')});
  }
  return g_->Literal(v.dump());  // null, true, false
}

absl::StatusOr<ExprId> SchemaCompiler::AnyOf(const J& schema,
                                             const std::string& keyword,
                                             const std::string& where,
                                             int depth) {
  const J& branches = schema[keyword];
  if (!branches.is_array() || branches.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", keyword, "' at ", where, " is not a non-empty array"));
  }
  const J base = Without(schema, {keyword.c_str()});
  const bool plain = IsTrivial(base);
  std::vector<J> merged;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string at = absl::StrCat(where, "/", keyword, "/", i);
    if (plain && keyword == "anyOf") continue;
    ASSIGN_OR_RETURN(J branch, ResolveTop(branches[i], at));
    ASSIGN_OR_RETURN(J m, MergeSchemas(base, branch, at));
    merged.push_back(std::move(m));
  }
  if (keyword == "oneOf") {
    for (size_t i = 0; i < merged.size(); ++i) {
      for (size_t j = i + 1; j < merged.size(); ++j) {
        ASSIGN_OR_RETURN(bool disjoint, Disjoint(merged[i], merged[j], 0));
        if (!disjoint) {
          return absl::UnimplementedError(absl::StrCat(
              "'oneOf' at ", where, ": branches ", i, " and ", j,
              " may both match one instance (only oneOf whose branches are "
              "provably exclusive is supported)"));
        }
      }
    }
  }
  std::vector<ExprId> alts;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string at = absl::StrCat(where, "/", keyword, "/", i);
    if (plain) {
      // Keep references as references (recursion, sharing).
      ASSIGN_OR_RETURN(ExprId e, SchemaRef(branches[i], at, depth + 1));
      alts.push_back(e);
    } else {
      ASSIGN_OR_RETURN(ExprId e, SchemaRef(merged[i], at, depth + 1));
      alts.push_back(e);
    }
  }
  return g_->Alt(std::move(alts));
}

// Whether no instance is valid under both a and b, as far as cheap rules
// can tell (false: may overlap).
absl::StatusOr<bool> SchemaCompiler::Disjoint(const J& a, const J& b,
                                              int depth) {
  if (a.is_boolean() || b.is_boolean()) {
    return (a.is_boolean() && !a.get<bool>()) ||
           (b.is_boolean() && !b.get<bool>());
  }
  if (depth > 8 || !a.is_object() || !b.is_object()) return false;
  // Types, from `type` or from the enum/const values.
  auto types = [](const J& s) {
    std::vector<std::string> t = TypesOf(s);
    J values;
    if (s.contains("const")) values = J::array({s["const"]});
    if (s.contains("enum") && s["enum"].is_array()) values = s["enum"];
    if (!values.is_null()) {
      std::vector<std::string> vt;
      for (const J& v : values) {
        if (TypeAllows(t, TypeOfValue(v))) vt.push_back(TypeOfValue(v));
      }
      return vt;
    }
    return t;
  };
  const std::vector<std::string> ta = types(a);
  const std::vector<std::string> tb = types(b);
  bool overlap = false;
  for (const std::string& t : ta)
    overlap |= TypeAllows(tb, t) || (t == "number" && HasType(tb, "integer"));
  if (!overlap) return true;
  // Both enumerate values: disjoint value sets.
  auto values = [](const J& s) -> J {
    if (s.contains("const")) return J::array({s["const"]});
    if (s.contains("enum") && s["enum"].is_array()) return s["enum"];
    return nullptr;
  };
  const J va = values(a);
  const J vb = values(b);
  if (!va.is_null() && !vb.is_null()) {
    for (const J& v : va) {
      if (std::find(vb.begin(), vb.end(), v) != vb.end()) return false;
    }
    return true;
  }
  // Objects only (else overlap assumed): a property both require whose
  // schemas are disjoint, or one required by a side the other forbids.
  if (!(ta.size() == 1 && ta[0] == "object") &&
      !(tb.size() == 1 && tb[0] == "object")) {
    return false;
  }
  auto required = [](const J& s) {
    std::vector<std::string> r;
    if (s.contains("required") && s["required"].is_array()) {
      for (const J& x : s["required"]) {
        if (x.is_string()) r.push_back(x.get<std::string>());
      }
    }
    return r;
  };
  auto forbids = [](const J& s, const std::string& key) {
    if (s.contains("properties") && s["properties"].contains(key)) {
      return s["properties"][key].is_boolean() &&
             !s["properties"][key].get<bool>();
    }
    return s.contains("additionalProperties") &&
           s["additionalProperties"].is_boolean() &&
           !s["additionalProperties"].get<bool>() &&
           !s.contains("patternProperties");
  };
  const std::vector<std::string> ra = required(a);
  const std::vector<std::string> rb = required(b);
  for (const std::string& k : ra) {
    if (forbids(b, k)) return true;
  }
  for (const std::string& k : rb) {
    if (forbids(a, k)) return true;
  }
  for (const std::string& k : ra) {
    if (!HasType(rb, k)) continue;
    if (!a.contains("properties") || !a["properties"].contains(k)) continue;
    if (!b.contains("properties") || !b["properties"].contains(k)) continue;
    ASSIGN_OR_RETURN(J pa, ResolveTop(a["properties"][k], "#"));
    ASSIGN_OR_RETURN(J pb, ResolveTop(b["properties"][k], "#"));
    ASSIGN_OR_RETURN(bool d, Disjoint(pa, pb, depth + 1));
    if (d) return true;
  }
  return false;
}

absl::StatusOr<ExprId> SchemaCompiler::Typed(const J& schema,
                                             const std::string& where,
                                             int depth) {
  std::vector<std::string> types = TypesOf(schema);
  for (const std::string& t : types) {
    if (!HasType({std::begin(kTypes), std::end(kTypes)}, t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'type' at ", where, ": unknown type '", t, "'"));
    }
  }
  if (schema.contains("not")) {
    const J& n = schema["not"];
    if (IsTrivial(n)) return g_->Nothing();
    if (!(n.is_boolean() && !n.get<bool>())) {
      if (!n.is_object() || !IsTrivial(Without(n, {"type"}))) {
        return absl::UnimplementedError(
            absl::StrCat("'not' at ", where,
                         " is not supported (only 'not' of a list of types)"));
      }
      std::vector<std::string> kept;
      const std::vector<std::string> banned = TypesOf(n);
      for (const std::string& t : types) {
        // An integer is a number: banning numbers bans integers too.
        if (HasType(banned, t) ||
            (t == "integer" && HasType(banned, "number"))) {
          continue;
        }
        if (t == "number" && HasType(banned, "integer")) {
          return absl::UnimplementedError(absl::StrCat(
              "'not' at ", where, ": non-integer numbers are not supported"));
        }
        kept.push_back(t);
      }
      types = std::move(kept);
    }
  }
  std::vector<ExprId> alts;
  for (const std::string& t : types) {
    if (t == "integer" && HasType(types, "number")) continue;
    ASSIGN_OR_RETURN(ExprId e, Type(t, schema, where, depth));
    alts.push_back(e);
  }
  return g_->Alt(std::move(alts));
}

}  // namespace internal

absl::StatusOr<ExprId> AddJsonSchema(Grammar* g,
                                     const nlohmann::ordered_json& schema,
                                     const JsonSchemaOptions& options) {
  if (schema.is_object() && schema.contains("$schema") &&
      (!schema["$schema"].is_string() ||
       !internal::KnownMetaSchema(schema["$schema"].get<std::string>()))) {
    return absl::UnimplementedError(
        "'$schema' names a meta-schema other than a JSON Schema draft's "
        "(custom vocabularies are not supported)");
  }
  internal::SchemaCompiler compiler(g, schema, options);
  return compiler.Schema(schema, "#", 0);
}

absl::StatusOr<Grammar> JsonSchemaToGrammar(
    const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  Grammar g;
  ASSIGN_OR_RETURN(ExprId body, AddJsonSchema(&g, schema, options));
  const RuleId root = g.AddRule("root");
  g.SetRule(root, body);
  g.set_root(root);
  if (g.num_exprs() > options.max_grammar_exprs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema's grammar has ", g.num_exprs(),
        " expressions, more than the limit of ", options.max_grammar_exprs));
  }
  return g;
}

absl::StatusOr<Grammar> JsonSchemaToGrammar(absl::string_view schema_text,
                                            const JsonSchemaOptions& options) {
  if (static_cast<int64_t>(schema_text.size()) > options.max_schema_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema has ", schema_text.size(),
        " bytes, more than the limit of ", options.max_schema_bytes));
  }
  nlohmann::ordered_json schema =
      nlohmann::ordered_json::parse(schema_text.begin(), schema_text.end(),
                                    nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) {
    return absl::InvalidArgumentError("the schema is not valid JSON");
  }
  return JsonSchemaToGrammar(schema, options);
}

}  // namespace paceline::engine::grammar
