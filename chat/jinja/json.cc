// ToJson: Python's json.dumps(ensure_ascii=False, ...) over our values.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "chat/jinja/value.h"

namespace paceline::chat::jinja {
namespace {

void AppendAsciiEscaped(const std::string& s, std::string* out) {
  char buf[16];
  for (uint32_t cp : Codepoints(s)) {
    if (cp >= 0x10000) {
      uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                    0xDC00 + (v & 0x3FF));
      out->append(buf);
    } else if (cp >= 0x80) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(cp));
    }
  }
}

void AppendJsonString(const std::string& s, std::string* out,
                      bool ensure_ascii) {
  if (ensure_ascii) {
    std::string plain;
    AppendJsonString(s, &plain, false);
    AppendAsciiEscaped(plain, out);
    return;
  }
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FloatRepr(d);
}

absl::Status NotSerializable(const Value& v) {
  return absl::InvalidArgumentError(absl::StrCat(
      "TypeError: Object of type ", v.TypeName(), " is not JSON serializable"));
}

class JsonWriter {
 public:
  JsonWriter(const JsonOptions& opts, int max_depth, size_t max_bytes,
             std::string* out)
      : opts_(opts), max_depth_(max_depth), max_bytes_(max_bytes), out_(out) {}

  absl::Status Write(const Value& v, int level) {
    if (level > max_depth_) {
      return absl::ResourceExhaustedError(
          "chat template: nesting depth limit reached in tojson");
    }
    // Checked before each value: what one value adds is bounded by its own
    // size (strings at most 12 bytes per input byte) or one indent line.
    if (out_->size() > max_bytes_) {
      return absl::ResourceExhaustedError(
          "chat template: output size limit reached in tojson");
    }
    switch (v.kind()) {
      case Kind::kNone:
        out_->append("null");
        return absl::OkStatus();
      case Kind::kBool:
        out_->append(v.as_bool() ? "true" : "false");
        return absl::OkStatus();
      case Kind::kInt:
        absl::StrAppend(out_, v.as_int());
        return absl::OkStatus();
      case Kind::kFloat:
        out_->append(JsonFloat(v.as_double()));
        return absl::OkStatus();
      case Kind::kStr:
        AppendJsonString(v.str(), out_, opts_.ensure_ascii);
        return absl::OkStatus();
      case Kind::kList:
        if (v.list().seq == SeqKind::kGenerator) return NotSerializable(v);
        return WriteList(v, level);
      case Kind::kDict:
        return WriteDict(v, level);
      default:
        return NotSerializable(v);
    }
  }

 private:
  bool pretty() const { return opts_.indent >= 0 || opts_.indent_is_str; }

  void Newline(int level) {
    if (!pretty()) return;
    out_->push_back('\n');
    // Stops once over the limit; the next check in Write (or ToJson's
    // last one) reports it.
    for (int i = 0; i < level && out_->size() <= max_bytes_; ++i) {
      if (opts_.indent_is_str) {
        out_->append(opts_.indent_str);
      } else {
        out_->append(opts_.indent, ' ');
      }
    }
  }

  absl::Status WriteList(const Value& v, int level) {
    if (v.items().empty()) {
      out_->append("[]");
      return absl::OkStatus();
    }
    out_->push_back('[');
    for (size_t i = 0; i < v.items().size(); ++i) {
      if (i > 0) out_->append(opts_.item_sep);
      Newline(level + 1);
      if (absl::Status s = Write(v.items()[i], level + 1); !s.ok()) return s;
    }
    Newline(level);
    out_->push_back(']');
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Key(const Value& k) {
    switch (k.kind()) {
      case Kind::kStr:
        return k.str();
      case Kind::kInt:
        return absl::StrCat(k.as_int());
      case Kind::kFloat:
        return JsonFloat(k.as_double());
      case Kind::kBool:
        return std::string(k.as_bool() ? "true" : "false");
      case Kind::kNone:
        return std::string("null");
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "TypeError: keys must be str, int, float, bool or None, not ",
            k.TypeName()));
    }
  }

  absl::Status WriteDict(const Value& v, int level) {
    if (v.dict().items.empty()) {
      out_->append("{}");
      return absl::OkStatus();
    }
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& item : v.dict().items) items.push_back(&item);
    if (opts_.sort_keys) {
      absl::Status error;
      std::stable_sort(items.begin(), items.end(), [&](auto* a, auto* b) {
        absl::StatusOr<bool> less = Less(a->first, b->first);
        if (!less.ok()) error = less.status();
        return less.ok() && *less;
      });
      if (!error.ok()) return error;
    }
    out_->push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_->append(opts_.item_sep);
      Newline(level + 1);
      absl::StatusOr<std::string> key = Key(items[i]->first);
      if (!key.ok()) return key.status();
      AppendJsonString(*key, out_, opts_.ensure_ascii);
      out_->append(opts_.key_sep);
      if (absl::Status s = Write(items[i]->second, level + 1); !s.ok()) {
        return s;
      }
    }
    Newline(level);
    out_->push_back('}');
    return absl::OkStatus();
  }

  const JsonOptions& opts_;
  int max_depth_;
  size_t max_bytes_;
  std::string* out_;
};

}  // namespace

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& opts,
                                   int max_depth, size_t max_bytes) {
  std::string out;
  JsonWriter writer(opts, max_depth, max_bytes, &out);
  if (absl::Status s = writer.Write(v, 0); !s.ok()) return s;
  if (out.size() > max_bytes) {
    return absl::ResourceExhaustedError(
        "chat template: output size limit reached in tojson");
  }
  return out;
}

}  // namespace paceline::chat::jinja
