// The JSON Schema compiler's objects (json_schema_compiler.h).
//
// Up to JsonSchemaOptions::max_any_order_properties listed properties come
// in any order, other keys (when additionalProperties allows them: a key
// not listed, or one matching a patternProperties pattern) anywhere among
// them. Past that, listed properties come in the schema's `properties`
// order, each optional unless required, then the other keys. Commas:
// the first member present has none, every later one has one. Written as
// rules T_i = "the members from i on, after something was written", so the
// grammar stays linear in the number of properties:
//   T_i = ("," member_i)? T_{i+1}      (member_i required: not optional)
//   T_n = ("," extra)*
//   object = "{" (member_j T_{j+1} for each j up to the first required
//                 | extra T_n | nothing, when nothing is required) "}"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
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

struct Member {
  std::string key;
  J schema;
  bool required = false;
};

bool IsFalse(const J& s) { return s.is_boolean() && !s.get<bool>(); }

// Whether `key` matches the ECMAScript `pattern` (search semantics).
absl::StatusOr<bool> KeyMatches(const std::string& pattern,
                                const std::string& key) {
  Grammar g;
  RegexOptions options;
  options.search = true;
  ASSIGN_OR_RETURN(ExprId e, AddRegex(&g, pattern, options));
  const RuleId r = g.AddRule("root");
  g.SetRule(r, e);
  g.set_root(r);
  auto compiled = Compile(g);
  if (!compiled.ok()) return false;  // matches nothing
  Matcher m(*compiled);
  return m.AcceptBytes(key) && m.CanFinish();
}

}  // namespace

absl::StatusOr<ExprId> SchemaCompiler::Object(const J& s,
                                              const std::string& where,
                                              int depth) {
  const J empty = J::object();
  const J& props = s.contains("properties") ? s["properties"] : empty;
  const J& patterns =
      s.contains("patternProperties") ? s["patternProperties"] : empty;
  if (!props.is_object() || !patterns.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'properties' / 'patternProperties' at ", where, " is not an object"));
  }
  const J additional =
      s.contains("additionalProperties") ? s["additionalProperties"] : J(true);
  absl::flat_hash_set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'required' at ", where, " is not an array"));
    }
    for (const J& r : s["required"]) {
      if (r.is_string()) required.insert(r.get<std::string>());
    }
  }
  if (!patterns.empty() && !IsFalse(additional)) {
    return absl::UnimplementedError(
        absl::StrCat("'patternProperties' at ", where,
                     " is supported only with additionalProperties: false"));
  }
  if (patterns.size() > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "'patternProperties' at ", where, " with more than one pattern"));
  }
  // The listed members, then required keys the list lacks.
  std::vector<Member> members;
  absl::flat_hash_set<std::string> listed;
  for (const auto& [key, value] : props.items()) {
    for (const auto& [pattern, unused] : patterns.items()) {
      ASSIGN_OR_RETURN(bool hit, KeyMatches(pattern, key));
      if (hit) {
        return absl::UnimplementedError(absl::StrCat(
            "'patternProperties' at ", where, ": the listed property '", key,
            "' also matches '", pattern, "'"));
      }
    }
    listed.insert(key);
    members.push_back({key, value, required.contains(key)});
  }
  for (const J& r : s.value("required", J::array())) {
    if (!r.is_string() || listed.contains(r.get<std::string>())) continue;
    listed.insert(r.get<std::string>());
    members.push_back({r.get<std::string>(), additional, true});
  }
  // Counts: only what the members already imply.
  ASSIGN_OR_RETURN(
      bool counts_ok,
      PropertyCountsHold(s, members.size(), required.size(),
                         !IsFalse(additional) || !patterns.empty(), where));
  (void)counts_ok;
  std::vector<ExprId> written;  // member i's "key": value, or Nothing
  for (const Member& m : members) {
    const std::string at = absl::StrCat(where, "/properties/", m.key);
    if (IsFalse(m.schema)) {
      if (m.required) return g_->Nothing();
      written.push_back(g_->Nothing());
      continue;
    }
    ASSIGN_OR_RETURN(ExprId value, SchemaRef(m.schema, at, depth + 1));
    written.push_back(g_->Seq({JsonStringLiteral(g_, m.key), Sep(':'), value}));
  }
  // Other keys.
  ExprId extra = g_->Nothing();
  if (!patterns.empty()) {
    const std::string pattern = patterns.begin().key();
    const J& schema = patterns.begin().value();
    ASSIGN_OR_RETURN(ExprId key, Pattern(pattern, true, where));
    ASSIGN_OR_RETURN(
        ExprId value,
        SchemaRef(schema, where + "/patternProperties", depth + 1));
    extra = g_->Seq({key, Sep(':'), value});
  } else if (!IsFalse(additional)) {
    std::vector<std::string> keys(listed.begin(), listed.end());
    ExprId value = AnyValue();
    if (!additional.is_boolean()) {
      ASSIGN_OR_RETURN(
          value,
          SchemaRef(additional, where + "/additionalProperties", depth + 1));
    }
    // The key is a rule of its own that calls nothing, so its token masks
    // depend on the list alone (mask_tables.h derives them from a plain
    // string's).
    const ExprId key =
        AsRule("key", JsonStringExcept(g_, keys, JsonStringRest(g_)));
    extra = g_->Seq({key, Sep(':'), value});
  }
  std::vector<bool> must(members.size());
  for (size_t i = 0; i < members.size(); ++i) must[i] = members[i].required;
  ExprId body =
      static_cast<int32_t>(members.size()) <= options_.max_any_order_properties
          ? MembersAnyOrder(written, must, extra)
          : MembersInOrder(written, must, extra);
  return g_->Seq({Open('{'), body, Close('}')});
}

ExprId SchemaCompiler::MembersInOrder(const std::vector<ExprId>& written,
                                      const std::vector<bool>& required,
                                      ExprId extra) {
  const bool has_extra = g_->expr(extra).kind != ExprKind::kNothing;
  if (has_extra) extra = AsRule("extra", extra);
  // T_n .. T_0 (see the top of the file).
  const size_t n = written.size();
  std::vector<ExprId> tails(n + 1);
  tails[n] = has_extra ? g_->Star(g_->Seq({Sep(','), extra})) : g_->Empty();
  for (size_t i = n; i-- > 0;) {
    const RuleId rule = NewRule("members");
    ExprId item = g_->Seq({Sep(','), written[i]});
    g_->SetRule(
        rule, g_->Seq({required[i] ? item : g_->Optional(item), tails[i + 1]}));
    tails[i] = g_->Ref(rule);
  }
  std::vector<ExprId> heads;
  bool required_seen = false;
  for (size_t j = 0; j < n && !required_seen; ++j) {
    heads.push_back(g_->Seq({written[j], tails[j + 1]}));
    required_seen = required[j];
  }
  if (!required_seen) {
    if (has_extra) heads.push_back(g_->Seq({extra, tails[n]}));
    heads.push_back(g_->Empty());
  }
  return g_->Alt(std::move(heads));
}

// Any order: a rule per set S of listed members written so far,
//   A(S) = ("," member_i A(S + i)) for i not in S | "," extra A(S)
//          | nothing, once S holds every required member.
ExprId SchemaCompiler::MembersAnyOrder(const std::vector<ExprId>& written,
                                       const std::vector<bool>& required,
                                       ExprId extra) {
  const bool has_extra = g_->expr(extra).kind != ExprKind::kNothing;
  if (has_extra) extra = AsRule("extra", extra);
  const uint32_t n = static_cast<uint32_t>(written.size());
  uint32_t must = 0;
  for (uint32_t i = 0; i < n; ++i) must |= required[i] ? 1u << i : 0;
  // Each member once, as a rule: the 2^n sets then hold calls, not copies
  // of every key.
  std::vector<ExprId> member(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (g_->expr(written[i]).kind == ExprKind::kNothing) {
      member[i] = written[i];
      continue;
    }
    member[i] = AsRule("member", written[i]);
  }
  std::vector<RuleId> after(1u << n, -1);
  // Subsets from the full one down, so each rule's successors exist.
  for (uint32_t set = (1u << n); set-- > 0;) {
    after[set] = NewRule("members");
  }
  for (uint32_t set = 0; set < (1u << n); ++set) {
    std::vector<ExprId> alts;
    for (uint32_t i = 0; i < n; ++i) {
      if (set & (1u << i)) continue;
      alts.push_back(
          g_->Seq({Sep(','), member[i], g_->Ref(after[set | (1u << i)])}));
    }
    if (has_extra)
      alts.push_back(g_->Seq({Sep(','), extra, g_->Ref(after[set])}));
    if ((set & must) == must) alts.push_back(g_->Empty());
    g_->SetRule(after[set], g_->Alt(std::move(alts)));
  }
  std::vector<ExprId> heads;
  for (uint32_t i = 0; i < n; ++i) {
    heads.push_back(g_->Seq({member[i], g_->Ref(after[1u << i])}));
  }
  if (has_extra) heads.push_back(g_->Seq({extra, g_->Ref(after[0])}));
  if (must == 0) heads.push_back(g_->Empty());
  return g_->Alt(std::move(heads));
}

ExprId SchemaCompiler::AsRule(const std::string& name, ExprId body) {
  const RuleId rule = NewRule(name);
  g_->SetRule(rule, body);
  return g_->Ref(rule);
}

absl::StatusOr<bool> SchemaCompiler::PropertyCountsHold(
    const J& s, size_t listed, size_t required, bool open,
    const std::string& where) {
  if (s.contains("minProperties")) {
    const J& v = s["minProperties"];
    if (!v.is_number() || v.get<double>() > static_cast<double>(required)) {
      return absl::UnimplementedError(
          absl::StrCat("'minProperties' at ", where,
                       " beyond the required properties is not supported"));
    }
  }
  if (s.contains("maxProperties")) {
    const J& v = s["maxProperties"];
    if (!v.is_number() || open ||
        v.get<double>() < static_cast<double>(listed)) {
      return absl::UnimplementedError(absl::StrCat(
          "'maxProperties' at ", where,
          " below the number of allowed properties is not supported"));
    }
  }
  return true;
}

}  // namespace paceline::engine::grammar::internal
