#include "engine/sampling/grammar/json_text.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace paceline::engine::grammar {
namespace {

bool Contains(const std::vector<CodepointRange>& ranges, uint32_t cp) {
  for (const CodepointRange& r : ranges) {
    if (r.lo <= cp && cp <= r.hi) return true;
  }
  return false;
}

char ShortEscape(uint32_t cp) {
  switch (cp) {
    case 0x08:
      return 'b';
    case 0x09:
      return 't';
    case 0x0A:
      return 'n';
    case 0x0C:
      return 'f';
    case 0x0D:
      return 'r';
    default:
      return 0;
  }
}

ExprId HexDigit(Grammar* g, uint32_t v) {
  const char lower = "0123456789abcdef"[v];
  const char upper = "0123456789ABCDEF"[v];
  return g->Bytes({{static_cast<uint8_t>(lower), static_cast<uint8_t>(lower)},
                   {static_cast<uint8_t>(upper), static_cast<uint8_t>(upper)}});
}

// Decodes UTF-8 (assumed valid: it comes from a parsed JSON document).
std::vector<uint32_t> Codepoints(absl::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? b : b & (0x3F >> (len - 1));
    for (int k = 1; k < len && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

struct CpTrie {
  bool terminal = false;
  std::map<uint32_t, std::unique_ptr<CpTrie>> children;
};

// The key's characters, down the trie, until one leaves it: every way out
// ends in the same place (the caller puts the rest of the string there, so
// all of them meet in one automaton state).
ExprId Diverge(Grammar* g, const CpTrie& node) {
  std::vector<ExprId> alts;
  std::vector<CodepointRange> others;
  uint32_t next = 0;
  for (const auto& [cp, child] : node.children) {
    if (cp > next) others.push_back({next, cp - 1});
    next = cp + 1;
    alts.push_back(g->Seq({JsonChar(g, {{cp, cp}}), Diverge(g, *child)}));
  }
  if (next <= kMaxCodepoint) others.push_back({next, kMaxCodepoint});
  if (!others.empty()) alts.push_back(JsonChar(g, std::move(others)));
  return g->Alt(std::move(alts));
}

// The strings that end (closing quote) on the trie at a node that is not
// a listed text: proper prefixes of the texts, and the empty string.
ExprId EndOnTrie(Grammar* g, const CpTrie& node) {
  std::vector<ExprId> alts;
  if (!node.terminal) alts.push_back(g->Literal("\""));
  for (const auto& [cp, child] : node.children) {
    alts.push_back(g->Seq({JsonChar(g, {{cp, cp}}), EndOnTrie(g, *child)}));
  }
  return g->Alt(std::move(alts));
}

}  // namespace

ExprId JsonChar(Grammar* g, std::vector<CodepointRange> ranges) {
  std::vector<ExprId> alts;
  // Written as themselves: U+0020 and up, but '"' and '\'.
  std::vector<CodepointRange> plain;
  for (const CodepointRange& r : ranges) {
    uint32_t lo = std::max<uint32_t>(r.lo, 0x20);
    if (lo > r.hi) continue;
    for (uint32_t cut : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (lo <= cut && cut <= r.hi) {
        if (lo < cut) plain.push_back({lo, cut - 1});
        lo = cut + 1;
      }
    }
    if (lo <= r.hi) plain.push_back({lo, r.hi});
  }
  if (!plain.empty()) alts.push_back(g->Codepoints(std::move(plain)));
  // Escaped: one '\', then a letter or u00XX.
  std::vector<ByteRange> letters;
  if (Contains(ranges, '"')) letters.push_back({'"', '"'});
  if (Contains(ranges, '\\')) letters.push_back({'\\', '\\'});
  std::vector<ExprId> hex;
  int controls = 0;
  for (uint32_t cp = 0; cp < 0x20; ++cp) controls += Contains(ranges, cp);
  for (uint32_t cp = 0; cp < 0x20; ++cp) {
    if (!Contains(ranges, cp)) continue;
    if (char e = ShortEscape(cp)) {
      letters.push_back({static_cast<uint8_t>(e), static_cast<uint8_t>(e)});
    }
    if (controls < 0x20 && ShortEscape(cp) == 0) {
      hex.push_back(g->Seq(
          {g->Literal(absl::StrCat("u00", cp >> 4)), HexDigit(g, cp & 15)}));
    }
  }
  if (controls == 0x20) {
    // Every control: \u00 and any two hex digits 00-1F (the five with a
    // short escape may be written either way).
    hex.push_back(g->Seq({g->Literal("u00"), g->Bytes({{'0', '1'}}),
                          g->Bytes({{'0', '9'}, {'a', 'f'}, {'A', 'F'}})}));
  }
  std::vector<ExprId> escaped;
  if (!letters.empty()) escaped.push_back(g->Bytes(std::move(letters)));
  escaped.insert(escaped.end(), hex.begin(), hex.end());
  if (!escaped.empty()) {
    alts.push_back(g->Seq({g->Literal("\\"), g->Alt(std::move(escaped))}));
  }
  return g->Alt(std::move(alts));
}

ExprId AnyJsonChar(Grammar* g) { return JsonChar(g, {{0, kMaxCodepoint}}); }

ExprId JsonStringLiteral(Grammar* g, absl::string_view text) {
  std::vector<ExprId> items = {g->Literal("\"")};
  for (uint32_t cp : Codepoints(text)) items.push_back(JsonChar(g, {{cp, cp}}));
  items.push_back(g->Literal("\""));
  return g->Seq(std::move(items));
}

ExprId JsonStringOfLength(Grammar* g, int32_t min, int32_t max) {
  return g->Seq({g->Literal("\""), g->Repeat(AnyJsonChar(g), min, max),
                 g->Literal("\"")});
}

ExprId JsonStringRest(Grammar* g) {
  return g->Seq({g->Star(AnyJsonChar(g)), g->Literal("\"")});
}

ExprId JsonStringExcept(Grammar* g, const std::vector<std::string>& texts,
                        ExprId rest) {
  CpTrie root;
  for (const std::string& t : texts) {
    CpTrie* node = &root;
    for (uint32_t cp : Codepoints(t)) {
      auto& child = node->children[cp];
      if (!child) child = std::make_unique<CpTrie>();
      node = child.get();
    }
    node->terminal = true;
  }
  return g->Seq({g->Literal("\""), g->Alt({g->Seq({Diverge(g, root), rest}),
                                           EndOnTrie(g, root)})});
}

}  // namespace paceline::engine::grammar
