#include "engine/sampling/grammar/tool_call_mask.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/fast_forward.h"

namespace paceline::engine::grammar {

struct ToolCallMask::Shared {
  std::shared_ptr<MaskTables> tables;
  ToolCallMaskOptions options;
  size_t max_tail = 0;  // the longest text the free part watches for
  // Control tokens the parser reads as text: markers, and (free part
  // only) reasoning markers.
  absl::flat_hash_map<int32_t, std::string> marker_text;
  absl::flat_hash_map<int32_t, std::string> reasoning_text;
  std::vector<Matcher> after_trigger;  // [trigger]: its text read
  // Tokens whose text holds a trigger's last byte: the only ones that may
  // open a call in the free part.
  std::vector<int32_t> candidates;
};

namespace {

using Shared = ToolCallMask::Shared;
using FreeText = ToolCallMask::FreeText;
using Region = FreeText::Region;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void Set(absl::Span<uint32_t> allowed, int32_t id) {
  allowed[id >> 5] |= 1u << (id & 31);
}

void Clear(absl::Span<uint32_t> allowed, int32_t id) {
  allowed[id >> 5] &= ~(1u << (id & 31));
}

bool IsEog(const TokenTrie& vocab, int32_t id) {
  const absl::Span<const int32_t> eog = vocab.eog_ids();
  return std::find(eog.begin(), eog.end(), id) != eog.end();
}

// The text the parser reads for `id`: its bytes, or a listed control
// token's text (reasoning markers only in the free part).
absl::string_view TextOf(const Shared& s, int32_t id, bool free) {
  const absl::string_view bytes = s.tables->vocab().bytes(id);
  if (!bytes.empty()) return bytes;
  if (auto it = s.marker_text.find(id); it != s.marker_text.end()) {
    return it->second;
  }
  if (!free) return {};
  auto it = s.reasoning_text.find(id);
  return it == s.reasoning_text.end() ? absl::string_view() : it->second;
}

struct Fired {
  size_t trigger = 0;
  std::string rest;  // the bytes after the trigger's last one
};

// Reads `text` into the free part: the trigger it completes, if any.
std::optional<Fired> Advance(const Shared& s, FreeText& t,
                             absl::string_view text) {
  const ToolCallMaskOptions& o = s.options;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (t.region == Region::kStart) {
      if (t.pending.empty() && IsSpace(c)) continue;
      t.pending += c;
      if (t.pending == o.reasoning_open) {
        t.region = Region::kReasoning;
        t.pending.clear();
      } else if (!absl::StartsWith(o.reasoning_open, t.pending)) {
        // Content after all, from its first non-whitespace byte.
        t.region = Region::kContent;
        const std::string replay =
            absl::StrCat(std::exchange(t.pending, ""), text.substr(i + 1));
        return Advance(s, t, replay);
      }
      continue;
    }
    if (t.region == Region::kContent && t.content_bytes == 0 && IsSpace(c)) {
      continue;
    }
    t.tail += c;
    if (t.tail.size() > s.max_tail) t.tail.erase(0, 1);
    if (t.region == Region::kReasoning) {
      if (absl::EndsWith(t.tail, o.reasoning_close)) {
        t.region = Region::kContent;
        t.tail.clear();
        t.content_bytes = 0;
      }
      continue;
    }
    ++t.content_bytes;
    for (size_t k = 0; k < o.triggers.size(); ++k) {
      const CallTrigger& trigger = o.triggers[k];
      if (!absl::EndsWith(t.tail, trigger.text)) continue;
      if (trigger.at_content_start && t.content_bytes != trigger.text.size()) {
        continue;
      }
      return Fired{k, std::string(text.substr(i + 1))};
    }
  }
  return std::nullopt;
}

FreeText StartText(const ToolCallMaskOptions& o) {
  FreeText t;
  if (o.starts_in_reasoning && !o.reasoning_close.empty()) {
    t.region = Region::kReasoning;
  } else if (!o.reasoning_open.empty()) {
    t.region = Region::kStart;
  }
  return t;
}

absl::StatusOr<std::shared_ptr<const Shared>> MakeShared(
    std::shared_ptr<MaskTables> tables, ToolCallMaskOptions options) {
  auto s = std::make_shared<Shared>();
  s->tables = std::move(tables);
  s->options = std::move(options);
  const ToolCallMaskOptions& o = s->options;
  s->marker_text.insert(o.marker_tokens.begin(), o.marker_tokens.end());
  s->reasoning_text.insert(o.reasoning_tokens.begin(),
                           o.reasoning_tokens.end());
  s->max_tail = o.reasoning_close.size();
  std::string last_bytes;
  for (const CallTrigger& trigger : o.triggers) {
    Matcher m(s->tables->grammar_shared());
    if (trigger.text.empty() || !m.AcceptBytes(trigger.text)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the tool-call grammar does not start with '", trigger.text, "'"));
    }
    s->after_trigger.push_back(std::move(m));
    s->max_tail = std::max(s->max_tail, trigger.text.size());
    last_bytes += trigger.text.back();
  }
  if (!o.triggers.empty()) {
    const int32_t vocab_size = s->tables->vocab().vocab_size();
    for (int32_t id = 0; id < vocab_size; ++id) {
      const absl::string_view text = TextOf(*s, id, /*free=*/true);
      if (text.find_first_of(last_bytes) != absl::string_view::npos) {
        s->candidates.push_back(id);
      }
    }
  }
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ToolCallMask>> ToolCallMask::Create(
    std::shared_ptr<MaskTables> tables, ToolCallMaskOptions options) {
  absl::StatusOr<std::shared_ptr<const Shared>> shared =
      MakeShared(std::move(tables), std::move(options));
  if (!shared.ok()) return shared.status();
  return std::unique_ptr<ToolCallMask>(new ToolCallMask(*std::move(shared)));
}

ToolCallMask::ToolCallMask(std::shared_ptr<const Shared> shared)
    : shared_(std::move(shared)),
      free_(StartText(shared_->options)),
      matcher_(shared_->tables->grammar_shared()),
      in_call_(shared_->options.triggers.empty()) {}

void ToolCallMask::Fill(absl::Span<uint32_t> allowed) {
  if (ended_) {
    std::fill(allowed.begin(), allowed.end(), 0u);
  } else if (in_call_) {
    FillCall(allowed);
  } else {
    FillFree(allowed);
  }
}

void ToolCallMask::FillCall(absl::Span<uint32_t> allowed) const {
  std::fill(allowed.begin(), allowed.end(), 0u);
  shared_->tables->Fill(matcher_.stacks(), allowed);
  for (const auto& [id, text] : shared_->marker_text) {
    Matcher m = matcher_;
    if (m.AcceptBytes(text)) Set(allowed, id);
  }
  if (matcher_.CanFinish()) {
    for (int32_t id : shared_->tables->vocab().eog_ids()) Set(allowed, id);
  }
}

void ToolCallMask::FillFree(absl::Span<uint32_t> allowed) const {
  std::fill(allowed.begin(), allowed.end(), ~0u);
  const Shared& s = *shared_;
  for (int32_t id : s.candidates) {
    FreeText t = free_;
    std::optional<Fired> fired = Advance(s, t, TextOf(s, id, /*free=*/true));
    if (!fired.has_value()) continue;
    Matcher m = s.after_trigger[fired->trigger];
    if (!m.AcceptBytes(fired->rest)) Clear(allowed, id);
  }
}

absl::Status ToolCallMask::Accept(int32_t token) {
  const TokenTrie& vocab = shared_->tables->vocab();
  const auto refused = [token] {
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " is not allowed by the grammar"));
  };
  if (ended_ || token < 0 || token >= vocab.vocab_size()) return refused();
  if (IsEog(vocab, token)) {
    if (in_call_ && !matcher_.CanFinish()) {
      return absl::InvalidArgumentError(
          "the grammar cannot end here (end-of-generation token)");
    }
    ended_ = true;
    return absl::OkStatus();
  }
  const absl::string_view text = TextOf(*shared_, token, /*free=*/!in_call_);
  if (!in_call_) return AcceptFree(text);
  if (text.empty() || !matcher_.AcceptBytes(text)) return refused();
  return absl::OkStatus();
}

absl::Status ToolCallMask::AcceptFree(absl::string_view text) {
  FreeText t = free_;
  std::optional<Fired> fired = Advance(*shared_, t, text);
  if (fired.has_value()) {
    Matcher m = shared_->after_trigger[fired->trigger];
    if (!m.AcceptBytes(fired->rest)) {
      return absl::InvalidArgumentError(
          "the bytes after the tool call's opening are not allowed by the "
          "grammar");
    }
    matcher_ = std::move(m);
    in_call_ = true;
  }
  free_ = std::move(t);
  return absl::OkStatus();
}

void ToolCallMask::ForcedTokens(int32_t max, std::vector<int32_t>* out) const {
  if (!in_call_ || ended_ || max <= 0) return;
  std::string bytes = ForcedBytes(matcher_);
  for (const auto& [id, text] : shared_->marker_text) {
    const size_t at = bytes.find(text);
    if (at != std::string::npos) bytes.resize(at);
  }
  SpellForced(shared_->tables->vocab(), bytes, max, out);
}

std::unique_ptr<TokenMask> ToolCallMask::Clone() const {
  return std::unique_ptr<TokenMask>(new ToolCallMask(*this));
}

}  // namespace paceline::engine::grammar
