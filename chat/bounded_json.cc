#include "chat/bounded_json.h"

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace paceline::chat {
namespace {

using Json = nlohmann::ordered_json;

// Objects up to this many keys are searched by a scan; past it, indexed.
constexpr size_t kScanKeys = 8;

// One open array or object.
struct Frame {
  Json* value;
  std::string key;      // object: the member being read
  int64_t index = -1;   // array: the element being read
  Json* member = nullptr;  // object: where the member's value goes
  std::optional<absl::flat_hash_map<std::string, size_t>> keys;
};

// nlohmann's SAX interface, building the value as nlohmann's own DOM
// parser does, but with an indexed key lookup and the limits.
class Builder {
 public:
  Builder(absl::string_view what, const JsonLimits& limits, JsonBudget* budget)
      : what_(what), limits_(limits), budget_(budget) {}

  bool null() { return Scalar(Json(nullptr)); }
  bool boolean(bool b) { return Scalar(Json(b)); }
  bool number_integer(Json::number_integer_t i) { return Scalar(Json(i)); }
  bool number_unsigned(Json::number_unsigned_t u) { return Scalar(Json(u)); }
  bool number_float(Json::number_float_t f, const std::string&) {
    return Scalar(Json(f));
  }
  bool string(std::string& s) { return Scalar(Json(std::move(s))); }
  bool binary(Json::binary_t&) { return Fail("holds binary data"); }
  bool start_object(size_t) { return Open(Json::object()); }
  bool start_array(size_t) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k);
  bool parse_error(size_t, const std::string&,
                   const nlohmann::detail::exception&) {
    malformed_ = true;
    return false;
  }

  Json TakeRoot() { return std::move(root_); }
  // Why the parse stopped, when a limit stopped it, and for the key limit
  // the object's path.
  const std::optional<absl::Status>& limit_error() const { return error_; }
  bool malformed() const { return malformed_; }
  const std::optional<std::string>& where() const { return where_; }

 private:
  bool Scalar(Json value) {
    Next();
    if (!Count()) return false;
    Put(std::move(value));
    return true;
  }
  // A value starts: in an array, it is the next element.
  void Next() {
    if (!stack_.empty() && stack_.back().value->is_array()) {
      ++stack_.back().index;
    }
  }
  bool Open(Json container);
  bool Close() {
    stack_.pop_back();
    return true;
  }
  // Counts one value against the budget.
  bool Count();
  // Puts `value` where the next value goes; returns where it is.
  Json* Put(Json value);
  // The index of `k` in the top object, or -1.
  int64_t FindKey(Frame& f, const std::string& k);
  bool Fail(std::string message);
  // The path of the value being read (`depth` frames of the stack).
  std::string Path(size_t depth) const;

  const absl::string_view what_;
  const JsonLimits& limits_;
  JsonBudget* const budget_;
  Json root_;
  std::vector<Frame> stack_;
  std::optional<absl::Status> error_;
  std::optional<std::string> where_;  // set by the key limit only
  bool malformed_ = false;
};

bool Builder::Count() {
  if (budget_ == nullptr) return true;
  if (--budget_->left >= 0) return true;
  return Fail(absl::StrCat("holds more than ", budget_->max_values,
                           " JSON values (arrays, objects and scalars) in "
                           "all"));
}

Json* Builder::Put(Json value) {
  if (stack_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  Frame& f = stack_.back();
  if (f.value->is_array()) {
    auto& array = f.value->get_ref<Json::array_t&>();
    array.push_back(std::move(value));
    return &array.back();
  }
  *f.member = std::move(value);
  return f.member;
}

bool Builder::Open(Json container) {
  Next();
  if (stack_.size() + 1 > static_cast<size_t>(limits_.max_depth)) {
    return Fail(absl::StrCat("nests arrays and objects deeper than ",
                             limits_.max_depth, " levels"));
  }
  if (!Count()) return false;
  Json* placed = Put(std::move(container));
  stack_.push_back(Frame{placed, {}, -1, nullptr, std::nullopt});
  return true;
}

int64_t Builder::FindKey(Frame& f, const std::string& k) {
  auto& members = f.value->get_ref<Json::object_t&>();
  if (!f.keys.has_value() && members.size() >= kScanKeys) {
    f.keys.emplace();
    for (size_t i = 0; i < members.size(); ++i) {
      f.keys->emplace(members.begin()[i].first, i);
    }
  }
  if (f.keys.has_value()) {
    const auto it = f.keys->find(k);
    return it == f.keys->end() ? -1 : static_cast<int64_t>(it->second);
  }
  for (size_t i = 0; i < members.size(); ++i) {
    if (members.begin()[i].first == k) return static_cast<int64_t>(i);
  }
  return -1;
}

bool Builder::key(std::string& k) {
  Frame& f = stack_.back();
  auto& members = f.value->get_ref<Json::object_t&>();
  const int64_t found = FindKey(f, k);
  if (found >= 0) {
    f.key = k;
    f.member = &members.begin()[found].second;
    return true;
  }
  if (static_cast<int64_t>(members.size()) >= limits_.max_object_keys) {
    const std::string at = Path(stack_.size() - 1);  // the object's path
    where_ = at;
    error_ = absl::InvalidArgumentError(absl::StrCat(
        what_, at.empty() ? "" : absl::StrCat(": '", at, "'"),
        " has more than ", limits_.max_object_keys, " keys"));
    return false;
  }
  if (f.keys.has_value()) f.keys->emplace(k, members.size());
  f.key = k;
  members.emplace_back(std::move(k), nullptr);
  f.member = &members.back().second;
  return true;
}

bool Builder::Fail(std::string message) {
  const std::string at = Path(stack_.size());
  error_ = absl::InvalidArgumentError(absl::StrCat(
      what_, at.empty() ? "" : absl::StrCat(" (at '", at, "')"), " ",
      message));
  return false;
}

std::string Builder::Path(size_t depth) const {
  std::string path;
  for (size_t i = 0; i < depth; ++i) {
    const Frame& f = stack_[i];
    if (f.value != nullptr && f.value->is_array()) {
      absl::StrAppend(&path, "[", f.index, "]");
    } else {
      absl::StrAppend(&path, path.empty() ? "" : ".", f.key);
    }
  }
  return path;
}

}  // namespace

absl::StatusOr<Json> ParseBoundedJson(absl::string_view text,
                                      absl::string_view what,
                                      const JsonLimits& limits,
                                      JsonBudget* budget, std::string* where) {
  Builder builder(what, limits, budget);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder,
                                  Json::input_format_t::json,
                                  /*strict=*/true);
  if (ok) return builder.TakeRoot();
  if (where != nullptr && builder.where().has_value())
    *where = *builder.where();
  if (builder.limit_error().has_value() && !builder.malformed()) {
    return *builder.limit_error();
  }
  return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
}

void AppendNewMember(Json* object, std::string key, Json value) {
  object->get_ref<Json::object_t&>().emplace_back(std::move(key),
                                                  std::move(value));
}

}  // namespace paceline::chat
