#include "engine/sampling/grammar/json_schema_merge.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace paceline::engine::grammar {
namespace {

using J = nlohmann::ordered_json;

constexpr size_t kMaxCombinedBranches = 64;

const absl::flat_hash_set<std::string>& Annotations() {
  static const auto* set = new absl::flat_hash_set<std::string>{
      "title",           "description",    "default",     "examples",
      "example",         "$comment",       "deprecated",  "readOnly",
      "writeOnly",       "$schema",        "$id",         "id",
      "$anchor",         "$dynamicAnchor", "$vocabulary", "contentMediaType",
      "contentEncoding", "contentSchema",  "$defs",       "definitions"};
  return *set;
}

std::vector<std::string> Types(const J& s) {
  if (!s.contains("type")) return {};
  const J& t = s["type"];
  if (t.is_string()) return {t.get<std::string>()};
  std::vector<std::string> out;
  for (const J& x : t) {
    if (x.is_string()) out.push_back(x.get<std::string>());
  }
  return out;
}

J IntersectTypes(const std::vector<std::string>& a,
                 const std::vector<std::string>& b) {
  J out = J::array();
  auto has = [](const std::vector<std::string>& v, const std::string& t) {
    return std::find(v.begin(), v.end(), t) != v.end();
  };
  for (const std::string& t : a) {
    if (has(b, t) || (t == "integer" && has(b, "number"))) out.push_back(t);
  }
  for (const std::string& t : b) {
    if (t == "integer" && has(a, "number") && !has(a, "integer")) {
      out.push_back(t);
    }
  }
  return out;
}

// The values of enum / const, or null when neither constrains.
const J* Values(const J& s, J* scratch) {
  if (s.contains("const")) {
    *scratch = J::array({s["const"]});
    if (s.contains("enum") && s["enum"].is_array()) {
      J kept = J::array();
      for (const J& v : *scratch) {
        if (std::find(s["enum"].begin(), s["enum"].end(), v) !=
            s["enum"].end()) {
          kept.push_back(v);
        }
      }
      *scratch = kept;
    }
    return scratch;
  }
  if (s.contains("enum") && s["enum"].is_array()) return &s["enum"];
  return nullptr;
}

bool IsTrivial(const J& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (!IsAnnotationKeyword(k)) return false;
  }
  return true;
}

absl::Status Unmergeable(const std::string& keyword, const std::string& where) {
  return absl::UnimplementedError(absl::StrCat(
      "'", keyword, "' at ", where,
      ": allOf (or keywords beside anyOf/oneOf/$ref) combining two different "
      "values of it is not supported"));
}

absl::StatusOr<J> MergeProperties(const J& a, const J& b,
                                  const std::string& where) {
  const J empty = J::object();
  const J& pa = a.contains("properties") ? a["properties"] : empty;
  const J& pb = b.contains("properties") ? b["properties"] : empty;
  auto additional = [](const J& s) -> const J* {
    if (!s.contains("additionalProperties")) return nullptr;
    const J& ap = s["additionalProperties"];
    return IsTrivial(ap) ? nullptr : &ap;
  };
  const J* aa = additional(a);
  const J* ba = additional(b);
  if ((aa != nullptr && b.contains("patternProperties")) ||
      (ba != nullptr && a.contains("patternProperties"))) {
    return Unmergeable("patternProperties", where);
  }
  J out = J::object();
  for (const auto& [k, v] : pa.items()) {
    const std::string at = absl::StrCat(where, "/properties/", k);
    if (pb.contains(k)) {
      ASSIGN_OR_RETURN(out[k], MergeSchemas(v, pb[k], at));
    } else if (ba != nullptr) {
      ASSIGN_OR_RETURN(out[k], MergeSchemas(v, *ba, at));
    } else {
      out[k] = v;
    }
  }
  for (const auto& [k, v] : pb.items()) {
    if (pa.contains(k)) continue;
    const std::string at = absl::StrCat(where, "/properties/", k);
    if (aa != nullptr) {
      ASSIGN_OR_RETURN(out[k], MergeSchemas(*aa, v, at));
    } else {
      out[k] = v;
    }
  }
  return out;
}

// anyOf x anyOf (or oneOf x oneOf): every pair merged.
absl::StatusOr<J> CombineBranches(const J& a, const J& b,
                                  const std::string& keyword,
                                  const std::string& where) {
  if (!a.is_array() || !b.is_array() ||
      a.size() * b.size() > kMaxCombinedBranches) {
    return Unmergeable(keyword, where);
  }
  J out = J::array();
  for (const J& x : a) {
    for (const J& y : b) {
      if (x.is_object() && x.contains("$ref"))
        return Unmergeable(keyword, where);
      if (y.is_object() && y.contains("$ref"))
        return Unmergeable(keyword, where);
      ASSIGN_OR_RETURN(J m, MergeSchemas(x, y, where + "/" + keyword));
      out.push_back(std::move(m));
    }
  }
  return out;
}

// An array schema's positional schemas and the schema of the items after
// them, in either draft's spelling.
void ItemsOf(const J& s, J* prefix, J* rest) {
  *prefix = J::array();
  *rest = true;
  if (s.contains("prefixItems")) {
    *prefix = s["prefixItems"];
    if (s.contains("items")) *rest = s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    *prefix = s["items"];
    if (s.contains("additionalItems")) *rest = s["additionalItems"];
  } else if (s.contains("items")) {
    *rest = s["items"];
  }
}

bool HasItems(const J& s) {
  return s.contains("prefixItems") || s.contains("items") ||
         s.contains("additionalItems");
}

// The items keywords of a ∧ b, position by position (a side's `items`
// constrains every position its own prefix does not).
absl::Status MergeItems(const J& a, const J& b, const std::string& where,
                        J* out) {
  J pa, ra, pb, rb;
  ItemsOf(a, &pa, &ra);
  ItemsOf(b, &pb, &rb);
  if (!pa.is_array() || !pb.is_array())
    return Unmergeable("prefixItems", where);
  out->erase("items");
  out->erase("prefixItems");
  out->erase("additionalItems");
  const size_t n = std::max(pa.size(), pb.size());
  J prefix = J::array();
  for (size_t i = 0; i < n; ++i) {
    const J& x = i < pa.size() ? pa[i] : ra;
    const J& y = i < pb.size() ? pb[i] : rb;
    ASSIGN_OR_RETURN(
        J m, MergeSchemas(x, y, absl::StrCat(where, "/prefixItems/", i)));
    prefix.push_back(std::move(m));
  }
  if (n > 0) (*out)["prefixItems"] = std::move(prefix);
  ASSIGN_OR_RETURN((*out)["items"], MergeSchemas(ra, rb, where + "/items"));
  return absl::OkStatus();
}

// One keyword present on both sides (not properties or type).
absl::Status MergeKeyword(const std::string& k, const J& av, const J& bv,
                          const std::string& where, J* out) {
  static const absl::flat_hash_set<std::string> kLower = {
      "minimum", "minLength", "minItems", "minProperties", "minContains"};
  static const absl::flat_hash_set<std::string> kUpper = {
      "maximum", "maxLength", "maxItems", "maxProperties", "maxContains"};
  if ((kLower.contains(k) || kUpper.contains(k) || k == "exclusiveMinimum" ||
       k == "exclusiveMaximum") &&
      av.is_number() && bv.is_number()) {
    const bool take_larger = kLower.contains(k) || k == "exclusiveMinimum";
    const bool a_wins = take_larger ? av.get<double>() >= bv.get<double>()
                                    : av.get<double>() <= bv.get<double>();
    (*out)[k] = a_wins ? av : bv;
    return absl::OkStatus();
  }
  if (k == "required" && av.is_array() && bv.is_array()) {
    J req = av;
    for (const J& r : bv) {
      if (std::find(req.begin(), req.end(), r) == req.end()) req.push_back(r);
    }
    (*out)[k] = req;
    return absl::OkStatus();
  }
  if ((k == "additionalProperties" || k == "items" || k == "additionalItems" ||
       k == "propertyNames") &&
      !av.is_array() && !bv.is_array()) {
    ASSIGN_OR_RETURN((*out)[k], MergeSchemas(av, bv, where + "/" + k));
    return absl::OkStatus();
  }
  if (k == "anyOf" || k == "oneOf") {
    ASSIGN_OR_RETURN((*out)[k], CombineBranches(av, bv, k, where));
    return absl::OkStatus();
  }
  if (k == "allOf" && av.is_array() && bv.is_array()) {
    J all = av;
    for (const J& x : bv) all.push_back(x);
    (*out)[k] = all;
    return absl::OkStatus();
  }
  if (k == "uniqueItems" && av.is_boolean() && bv.is_boolean()) {
    (*out)[k] = av.get<bool>() || bv.get<bool>();
    return absl::OkStatus();
  }
  if (av == bv) {
    (*out)[k] = av;
    return absl::OkStatus();
  }
  return Unmergeable(k, where);
}

}  // namespace

bool IsAnnotationKeyword(const std::string& keyword) {
  return Annotations().contains(keyword) || keyword.rfind("x-", 0) == 0;
}

absl::StatusOr<J> MergeSchemas(const J& a, const J& b,
                               const std::string& where) {
  if (a.is_boolean()) return a.get<bool>() ? b : a;
  if (b.is_boolean()) return b.get<bool>() ? a : b;
  if (!a.is_object() || !b.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a schema must be an object or a boolean at ", where));
  }
  J out = J::object();
  for (const auto& [k, v] : a.items()) {
    if (!IsAnnotationKeyword(k)) out[k] = v;
  }
  const bool both_items = HasItems(a) && HasItems(b);
  for (const auto& [k, v] : b.items()) {
    if (IsAnnotationKeyword(k) || k == "properties" || k == "type" ||
        k == "enum" || k == "const") {
      continue;
    }
    if (both_items &&
        (k == "items" || k == "prefixItems" || k == "additionalItems")) {
      continue;
    }
    if (!out.contains(k)) {
      out[k] = v;
      continue;
    }
    RETURN_IF_ERROR(MergeKeyword(k, out[k], v, where, &out));
  }
  if (both_items) RETURN_IF_ERROR(MergeItems(a, b, where, &out));
  if (a.contains("type") || b.contains("type")) {
    if (!a.contains("type")) {
      out["type"] = b["type"];
    } else if (b.contains("type")) {
      out["type"] = IntersectTypes(Types(a), Types(b));
    }
  }
  J sa;
  J sb;
  const J* va = Values(a, &sa);
  const J* vb = Values(b, &sb);
  if (va != nullptr || vb != nullptr) {
    out.erase("const");
    if (va == nullptr) {
      out["enum"] = *vb;
    } else if (vb == nullptr) {
      out["enum"] = *va;
    } else {
      J both = J::array();
      for (const J& v : *va) {
        if (std::find(vb->begin(), vb->end(), v) != vb->end())
          both.push_back(v);
      }
      out["enum"] = both;
    }
  }
  if (a.contains("properties") || b.contains("properties")) {
    ASSIGN_OR_RETURN(out["properties"], MergeProperties(a, b, where));
  }
  return out;
}

}  // namespace paceline::engine::grammar
