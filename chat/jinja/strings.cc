#include "chat/jinja/strings.h"

#include <algorithm>

#include "chat/jinja/value.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::chat::jinja {
namespace {

std::string Encode(const std::vector<uint32_t>& cps, size_t b, size_t e) {
  return FromCodepoints(cps, b, e);
}

// Simple case mapping for ASCII, Latin-1, Greek and Cyrillic.
uint32_t ToUpper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t ToLower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool IsCased(uint32_t c) { return ToUpper(c) != c || ToLower(c) != c; }
bool IsLowerCp(uint32_t c) { return ToUpper(c) != c; }
bool IsUpperCp(uint32_t c) { return ToLower(c) != c; }

std::string MapCase(absl::string_view s, uint32_t (*f)(uint32_t)) {
  std::string out;
  for (uint32_t c : Codepoints(s)) engine::AppendUtf8(f(c), &out);
  return out;
}

}  // namespace

std::string PyStrip(absl::string_view s,
                    const std::optional<std::string>& chars, bool left,
                    bool right) {
  std::vector<uint32_t> cps = Codepoints(s);
  std::vector<uint32_t> set;
  if (chars.has_value()) set = Codepoints(*chars);
  auto strip = [&](uint32_t c) {
    if (!chars.has_value()) return IsPySpace(c);
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  return Encode(cps, b, e);
}

std::vector<std::string> PySplit(absl::string_view s,
                                 const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!sep.has_value()) {
    std::vector<uint32_t> cps = Codepoints(s);
    if (from_right) std::reverse(cps.begin(), cps.end());
    size_t i = 0, n = cps.size();
    while (i < n) {
      while (i < n && IsPySpace(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > i && IsPySpace(cps[e - 1])) --e;
        std::vector<uint32_t> rest(cps.begin() + i, cps.begin() + e);
        if (from_right) std::reverse(rest.begin(), rest.end());
        parts.push_back(Encode(rest, 0, rest.size()));
        break;
      }
      size_t j = i;
      while (j < n && !IsPySpace(cps[j])) ++j;
      std::vector<uint32_t> word(cps.begin() + i, cps.begin() + j);
      if (from_right) std::reverse(word.begin(), word.end());
      parts.push_back(Encode(word, 0, word.size()));
      i = j;
    }
    if (from_right) std::reverse(parts.begin(), parts.end());
    return parts;
  }
  const std::string& d = *sep;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t p = s.find(d, start);
      if (p == absl::string_view::npos) break;
      parts.emplace_back(s.substr(start, p - start));
      start = p + d.size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < d.size()) break;
    size_t p = s.rfind(d, end - d.size());
    if (p == absl::string_view::npos) break;
    parts.emplace_back(s.substr(p + d.size(), end - p - d.size()));
    end = p;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> PySplitLines(absl::string_view s) {
  std::vector<uint32_t> cps = Codepoints(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    uint32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
               c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 ||
               c == 0x2029;
    if (!brk) continue;
    lines.push_back(Encode(cps, start, i));
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) lines.push_back(Encode(cps, start, cps.size()));
  return lines;
}

std::string PyUpper(absl::string_view s) { return MapCase(s, ToUpper); }
std::string PyLower(absl::string_view s) { return MapCase(s, ToLower); }

std::string PyTitle(absl::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t c : Codepoints(s)) {
    engine::AppendUtf8(prev_cased ? ToLower(c) : ToUpper(c), &out);
    prev_cased = IsCased(c);
  }
  return out;
}

std::string PyCapitalize(absl::string_view s) {
  std::string out;
  bool first = true;
  for (uint32_t c : Codepoints(s)) {
    engine::AppendUtf8(first ? ToUpper(c) : ToLower(c), &out);
    first = false;
  }
  return out;
}

std::string JinjaTitle(absl::string_view s) {
  std::string out;
  bool word_start = true;
  for (uint32_t c : Codepoints(s)) {
    bool sep = IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' ||
               c == '<';
    if (sep) {
      engine::AppendUtf8(c, &out);
      word_start = true;
    } else {
      engine::AppendUtf8(word_start ? ToUpper(c) : ToLower(c), &out);
      word_start = false;
    }
  }
  return out;
}

std::string PyReplace(absl::string_view s, absl::string_view old,
                      absl::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::vector<uint32_t> cps = Codepoints(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(repl.data(), repl.size());
        ++done;
      }
      if (i < cps.size()) engine::AppendUtf8(cps[i], &out);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(old, start);
    if (p == absl::string_view::npos) break;
    out.append(s.data() + start, p - start);
    out.append(repl.data(), repl.size());
    start = p + old.size();
    ++done;
  }
  out.append(s.data() + start, s.size() - start);
  return out;
}

int64_t PyFind(absl::string_view s, absl::string_view sub, bool from_right) {
  size_t p = from_right ? s.rfind(sub) : s.find(sub);
  if (p == absl::string_view::npos) return -1;
  return static_cast<int64_t>(CodepointCount(s.substr(0, p)));
}

int64_t PyCount(absl::string_view s, absl::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CodepointCount(s)) + 1;
  int64_t n = 0;
  for (size_t p = s.find(sub); p != absl::string_view::npos;
       p = s.find(sub, p + sub.size())) {
    ++n;
  }
  return n;
}

bool PyIsLower(absl::string_view s) {
  bool cased = false;
  for (uint32_t c : Codepoints(s)) {
    if (IsUpperCp(c)) return false;
    cased |= IsLowerCp(c);
  }
  return cased;
}

bool PyIsUpper(absl::string_view s) {
  bool cased = false;
  for (uint32_t c : Codepoints(s)) {
    if (IsLowerCp(c)) return false;
    cased |= IsUpperCp(c);
  }
  return cased;
}

}  // namespace paceline::chat::jinja
