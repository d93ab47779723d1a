#ifndef PACELINE_CHAT_JINJA_VALUE_H_
#define PACELINE_CHAT_JINJA_VALUE_H_

// The template interpreter's values, with Python's semantics as jinja2 sees
// them: none, bool, int (int64), float (double), str (UTF-8; lengths and
// indices count codepoints), list / tuple / generator, dict (insertion
// order, any value as a key), jinja2's Undefined, and objects (namespaces,
// loop objects, callables).
//
// Lists, tuples and dicts are immutable once built (the sandbox refuses
// mutation) and shared by reference; a namespace is the one mutable value.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace paceline::chat::jinja {

class Value;
class Evaluator;
struct CallArgs;

enum class Kind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kList,
  kDict,
  kObject
};

// A list's flavour: what Python type it came from.
enum class SeqKind { kList, kTuple, kGenerator };

// weight and depth (set by Value::List and Value::Dict) bound what
// printing or walking the value costs; see Weight() and Depth().
struct ListData {
  std::vector<Value> items;
  SeqKind seq = SeqKind::kList;
  uint64_t weight = 1;
  int depth = 1;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  uint64_t weight = 1;
  int depth = 1;
  // The value under `key`, or nullptr.
  const Value* Find(const Value& key) const;
  const Value* FindStr(absl::string_view key) const;
};

// Namespaces, loop objects, macros and built-in functions.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string TypeName() const = 0;
  // An attribute, or nullopt when there is none.
  virtual std::optional<Value> Attr(absl::string_view name) const;
  virtual bool callable() const { return false; }
  virtual absl::StatusOr<Value> Call(CallArgs& args, Evaluator& ev) const;
};

class Value {
 public:
  Value() = default;  // undefined
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value Str(std::string s);
  // A str marked safe (markupsafe.Markup): `+` with a plain str escapes it.
  static Value Markup(std::string s);
  static Value List(std::vector<Value> items, SeqKind seq = SeqKind::kList);
  static Value Dict(std::vector<std::pair<Value, Value>> items);
  static Value FromObject(std::shared_ptr<Object> obj);
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (Python's bool is an int).
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_str() const { return kind_ == Kind::kStr; }
  bool is_markup() const { return kind_ == Kind::kStr && b_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_callable() const { return is_object() && obj_->callable(); }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_double() const {
    return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int());
  }
  const std::string& str() const { return *s_; }
  const std::string& undefined_hint() const { return *s_; }
  const ListData& list() const { return *list_; }
  const std::vector<Value>& items() const { return list_->items; }
  const DictData& dict() const { return *dict_; }
  Object* object() const { return obj_.get(); }
  const std::shared_ptr<Object>& object_ptr() const { return obj_; }

  // Python's truth value; undefined is false.
  bool Truthy() const;
  // Python's type name ("str", "int", "list", "dict object" style is not
  // used: plain names).
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;  // str, or the undefined's hint
  std::shared_ptr<const ListData> list_;
  std::shared_ptr<const DictData> dict_;
  std::shared_ptr<Object> obj_;
};

// The size of `v` written out in full, shared parts counted each time they
// occur: 1 for a scalar, bytes + 1 for a str, 1 + the items' weights for a
// list or dict (saturating). Repr and tojson output is within a small
// factor of it, and so is the work of comparing or walking the value.
uint64_t Weight(const Value& v);
// How deeply lists and dicts nest in `v`: 0 for a scalar, 1 + the deepest
// item for a list or dict.
int Depth(const Value& v);

// Python's ==, with jinja2's Undefined equal only to Undefined.
bool Equal(const Value& a, const Value& b);
// Python's <; an error for unorderable types.
absl::StatusOr<bool> Less(const Value& a, const Value& b);

// Python's str() and repr(); undefined prints empty.
std::string ToStr(const Value& v);
std::string Repr(const Value& v);
// Python's float repr: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string FloatRepr(double d);

// Python's json.dumps. `indent` < 0 means None.
struct JsonOptions {
  int indent = -1;
  std::string indent_str;  // used when indent is given as a string
  bool indent_is_str = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // non-ASCII as \\uXXXX (surrogate pairs)
};
// Fails (ResourceExhausted) past `max_depth` levels or `max_bytes` bytes.
absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& opts,
                                   int max_depth, size_t max_bytes);

// UTF-8 helpers: strings are sequences of codepoints.
std::vector<uint32_t> Codepoints(absl::string_view s);
std::string FromCodepoints(const std::vector<uint32_t>& cps, size_t begin,
                           size_t end);
size_t CodepointCount(absl::string_view s);
// Python's str.isspace() for one codepoint.
bool IsPySpace(uint32_t cp);

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_VALUE_H_
