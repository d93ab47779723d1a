#include "chat/jinja/pyformat.h"

#include <cctype>
#include <cstdio>
#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paceline::chat::jinja {
namespace {

struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char conv = 's';
};

absl::StatusOr<std::string> FormatOne(const Spec& spec, const Value& v) {
  std::string fmt = "%" + spec.flags;
  if (spec.width >= 0) absl::StrAppend(&fmt, spec.width);
  if (spec.precision >= 0) absl::StrAppend(&fmt, ".", spec.precision);
  char buf[512];
  switch (spec.conv) {
    case 's':
    case 'r': {
      std::string s = spec.conv == 's' ? ToStr(v) : Repr(v);
      if (spec.precision >= 0) {
        std::vector<uint32_t> cps = Codepoints(s);
        s = FromCodepoints(cps, 0, spec.precision);
      }
      int pad = spec.width - static_cast<int>(CodepointCount(s));
      if (pad <= 0) return s;
      bool left = spec.flags.find('-') != std::string::npos;
      return left ? s + std::string(pad, ' ') : std::string(pad, ' ') + s;
    }
    case 'd':
    case 'i':
    case 'x':
    case 'X':
    case 'o': {
      if (!v.is_number()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "TypeError: %", std::string(1, spec.conv),
            " format: a real number is required, not ", v.TypeName()));
      }
      long long i = v.is_float() ? static_cast<long long>(v.as_double())
                                 : static_cast<long long>(v.as_int());
      std::string conv = spec.conv == 'i'
                             ? "lld"
                             : absl::StrCat("ll", std::string(1, spec.conv));
      std::snprintf(buf, sizeof(buf), (fmt + conv).c_str(), i);
      return std::string(buf);
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number()) {
        return absl::InvalidArgumentError(
            absl::StrCat("TypeError: must be real number, not ", v.TypeName()));
      }
      std::snprintf(buf, sizeof(buf), (fmt + spec.conv).c_str(), v.as_double());
      return std::string(buf);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("ValueError: unsupported format character '",
                       std::string(1, spec.conv), "'"));
  }
}

// Parses flags, width, precision and the conversion at fmt[*i].
bool ParseSpec(const std::string& fmt, size_t* i, Spec* spec) {
  while (*i < fmt.size() &&
         std::string("-+ #0").find(fmt[*i]) != std::string::npos) {
    spec->flags.push_back(fmt[(*i)++]);
  }
  auto number = [&](int* out) {
    if (*i >= fmt.size() || !std::isdigit(static_cast<unsigned char>(fmt[*i])))
      return;
    *out = 0;
    while (*i < fmt.size() &&
           std::isdigit(static_cast<unsigned char>(fmt[*i]))) {
      *out = std::min(*out * 10 + (fmt[(*i)++] - '0'), 400);
    }
  };
  number(&spec->width);
  if (*i < fmt.size() && fmt[*i] == '.') {
    ++*i;
    spec->precision = 0;
    number(&spec->precision);
  }
  if (*i >= fmt.size()) return false;
  spec->conv = fmt[(*i)++];
  return true;
}

}  // namespace

absl::StatusOr<Value> PercentFormat(const std::string& fmt, const Value& args) {
  std::vector<Value> values;
  if (args.is_list() && args.list().seq == SeqKind::kTuple) {
    values = args.items();
  } else {
    values.push_back(args);
  }
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size();) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i++]);
      continue;
    }
    ++i;
    if (i < fmt.size() && fmt[i] == '%') {
      out.push_back('%');
      ++i;
      continue;
    }
    Spec spec;
    if (!ParseSpec(fmt, &i, &spec)) {
      return absl::InvalidArgumentError("ValueError: incomplete format");
    }
    if (next >= values.size()) {
      return absl::InvalidArgumentError(
          "TypeError: not enough arguments for format string");
    }
    absl::StatusOr<std::string> s = FormatOne(spec, values[next++]);
    if (!s.ok()) return s.status();
    out += *s;
  }
  if (next < values.size()) {
    return absl::InvalidArgumentError(
        "TypeError: not all arguments converted during string formatting");
  }
  return Value::Str(std::move(out));
}

namespace {

absl::StatusOr<std::string> FormatField(const std::string& spec_text,
                                        const Value& v) {
  if (spec_text.empty()) return ToStr(v);
  Spec spec;
  size_t i = 0;
  std::string text = spec_text;
  char align = 0;
  if (text.size() >= 2 &&
      std::string("<>^").find(text[1]) != std::string::npos) {
    align = text[1];
    text.erase(0, 2);
  } else if (!text.empty() &&
             std::string("<>^").find(text[0]) != std::string::npos) {
    align = text[0];
    text.erase(0, 1);
  }
  bool has_conv =
      !text.empty() && std::isalpha(static_cast<unsigned char>(text.back()));
  if (!has_conv)
    text.push_back(v.is_str()      ? 's'
                   : v.is_float()  ? 'g'
                   : v.is_number() ? 'd'
                                   : 's');
  if (!ParseSpec(text, &i, &spec) || i != text.size()) {
    return absl::InvalidArgumentError("ValueError: invalid format specifier");
  }
  if (align == '<') spec.flags += '-';
  return FormatOne(spec, v);
}

}  // namespace

absl::StatusOr<Value> BraceFormat(const std::string& fmt,
                                  const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size();) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        i += 2;
        continue;
      }
      return absl::InvalidArgumentError(
          "ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      i += 2;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          "ValueError: Single '{' encountered in format string");
    }
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close + 1;
    std::string spec;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = 0;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.pos.size() ? &args.pos[auto_index] : nullptr;
      ++auto_index;
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t n = std::strtoul(field.c_str(), nullptr, 10);
      v = n < args.pos.size() ? &args.pos[n] : nullptr;
    } else {
      for (const auto& [k, kv] : args.kw) {
        if (k == field) v = &kv;
      }
    }
    if (v == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "IndexError: Replacement index ", field, " out of range"));
    }
    if (conversion == 'r') {
      out += Repr(*v);
      continue;
    }
    absl::StatusOr<std::string> s = FormatField(spec, *v);
    if (!s.ok()) return s.status();
    out += *s;
  }
  return Value::Str(std::move(out));
}

std::string Strftime(absl::string_view fmt, absl::Time t) {
  static constexpr const char* kMonths[] = {
      "January", "February", "March",     "April",   "May",      "June",
      "July",    "August",   "September", "October", "November", "December"};
  static constexpr const char* kDays[] = {"Monday",   "Tuesday", "Wednesday",
                                          "Thursday", "Friday",  "Saturday",
                                          "Sunday"};
  absl::CivilSecond cs = absl::ToCivilSecond(t, absl::UTCTimeZone());
  int weekday = static_cast<int>(absl::GetWeekday(cs));  // Monday = 0
  int yearday = absl::GetYearDay(cs);
  std::string out;
  char buf[64];
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out.push_back(fmt[i]);
      continue;
    }
    char c = fmt[++i];
    int hour12 = cs.hour() % 12 == 0 ? 12 : cs.hour() % 12;
    switch (c) {
      case 'Y':
        std::snprintf(buf, sizeof(buf), "%04lld",
                      static_cast<long long>(cs.year()));
        break;
      case 'y':
        std::snprintf(buf, sizeof(buf), "%02d",
                      static_cast<int>(cs.year() % 100));
        break;
      case 'm':
        std::snprintf(buf, sizeof(buf), "%02d", cs.month());
        break;
      case 'd':
        std::snprintf(buf, sizeof(buf), "%02d", cs.day());
        break;
      case 'e':
        std::snprintf(buf, sizeof(buf), "%2d", cs.day());
        break;
      case 'H':
        std::snprintf(buf, sizeof(buf), "%02d", cs.hour());
        break;
      case 'I':
        std::snprintf(buf, sizeof(buf), "%02d", hour12);
        break;
      case 'M':
        std::snprintf(buf, sizeof(buf), "%02d", cs.minute());
        break;
      case 'S':
        std::snprintf(buf, sizeof(buf), "%02d", cs.second());
        break;
      case 'j':
        std::snprintf(buf, sizeof(buf), "%03d", yearday);
        break;
      case 'p':
        std::snprintf(buf, sizeof(buf), "%s", cs.hour() < 12 ? "AM" : "PM");
        break;
      case 'B':
        std::snprintf(buf, sizeof(buf), "%s", kMonths[cs.month() - 1]);
        break;
      case 'b':
      case 'h':
        std::snprintf(buf, sizeof(buf), "%.3s", kMonths[cs.month() - 1]);
        break;
      case 'A':
        std::snprintf(buf, sizeof(buf), "%s", kDays[weekday]);
        break;
      case 'a':
        std::snprintf(buf, sizeof(buf), "%.3s", kDays[weekday]);
        break;
      case 'w':
        std::snprintf(buf, sizeof(buf), "%d", (weekday + 1) % 7);
        break;
      case '%':
        std::snprintf(buf, sizeof(buf), "%%");
        break;
      default:
        std::snprintf(buf, sizeof(buf), "%%%c", c);
        break;
    }
    out += buf;
  }
  return out;
}

}  // namespace paceline::chat::jinja
