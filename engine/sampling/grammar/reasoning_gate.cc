#include "engine/sampling/grammar/reasoning_gate.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace paceline::engine::grammar {

struct ReasoningGate::Shared {
  std::shared_ptr<const TokenTrie> vocab;
  ReasoningMarkers markers;
  absl::flat_hash_map<int32_t, std::string> control_text;
  std::vector<int32_t> whitespace;    // tokens of whitespace alone
  std::vector<int32_t> open_parts;    // tokens whose text is in the open
  std::vector<int32_t> close_enders;  // tokens that may end the close
};

namespace {

using Shared = ReasoningGate::Shared;

bool AllSpace(absl::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  });
}

void Set(absl::Span<uint32_t> allowed, int32_t id) {
  allowed[id >> 5] |= 1u << (id & 31);
}

absl::string_view TextOf(const Shared& s, int32_t id) {
  const absl::string_view bytes = s.vocab->bytes(id);
  if (!bytes.empty()) return bytes;
  auto it = s.control_text.find(id);
  return it == s.control_text.end() ? absl::string_view() : it->second;
}

bool IsEog(const TokenTrie& vocab, int32_t id) {
  const absl::Span<const int32_t> eog = vocab.eog_ids();
  return std::find(eog.begin(), eog.end(), id) != eog.end();
}

// Where reading `text` after `tail` completes `close`: the bytes after it,
// or nullopt when it does not complete it.
std::optional<absl::string_view> AfterClose(const std::string& tail,
                                            absl::string_view text,
                                            absl::string_view close,
                                            std::string* joined) {
  *joined = absl::StrCat(tail, text);
  const size_t at = absl::string_view(*joined).find(close);
  if (at == std::string::npos) return std::nullopt;
  return absl::string_view(*joined).substr(at + close.size());
}

std::shared_ptr<const Shared> MakeShared(std::shared_ptr<const TokenTrie> vocab,
                                         ReasoningMarkers markers) {
  auto s = std::make_shared<Shared>();
  s->vocab = std::move(vocab);
  s->markers = std::move(markers);
  s->control_text.insert(s->markers.tokens.begin(), s->markers.tokens.end());
  const std::string& open = s->markers.open;
  const std::string& close = s->markers.close;
  for (int32_t id = 0; id < s->vocab->vocab_size(); ++id) {
    const absl::string_view text = TextOf(*s, id);
    if (text.empty()) continue;
    if (AllSpace(text)) s->whitespace.push_back(id);
    if (!open.empty() && absl::StrContains(open, text)) {
      s->open_parts.push_back(id);
    }
    if (!close.empty() && text.find(close.back()) != absl::string_view::npos) {
      s->close_enders.push_back(id);
    }
  }
  return s;
}

ReasoningGate::Region StartRegion(const ReasoningMarkers& m) {
  if (m.starts_in_reasoning) return ReasoningGate::Region::kReasoning;
  return m.open.empty() ? ReasoningGate::Region::kContent
                        : ReasoningGate::Region::kStart;
}

absl::Status Refused(int32_t token, absl::string_view where) {
  return absl::InvalidArgumentError(
      absl::StrCat("token ", token, " is not allowed ", where));
}

}  // namespace

ReasoningGate::ReasoningGate(std::shared_ptr<const TokenTrie> vocab,
                             ReasoningMarkers markers,
                             std::unique_ptr<TokenMask> inner)
    : shared_(MakeShared(std::move(vocab), std::move(markers))),
      inner_(std::move(inner)),
      region_(StartRegion(shared_->markers)) {}

ReasoningGate::ReasoningGate(const ReasoningGate& other)
    : shared_(other.shared_),
      inner_(other.inner_->Clone()),
      region_(other.region_),
      pending_(other.pending_),
      tail_(other.tail_),
      space_(other.space_) {}

std::unique_ptr<TokenMask> ReasoningGate::Clone() const {
  return std::make_unique<ReasoningGate>(*this);
}

void ReasoningGate::Fill(absl::Span<uint32_t> allowed) {
  switch (region_) {
    case Region::kStart:
      return FillStart(allowed);
    case Region::kReasoning:
      return FillReasoning(allowed);
    case Region::kGap:
      return FillGap(allowed);
    case Region::kContent:
      return inner_->Fill(allowed);
  }
}

void ReasoningGate::FillStart(absl::Span<uint32_t> allowed) {
  const std::string& open = shared_->markers.open;
  if (pending_.empty()) {
    inner_->Fill(allowed);
    AllowSpace(allowed);
  } else {
    std::fill(allowed.begin(), allowed.end(), 0u);
  }
  for (int32_t id : shared_->open_parts) {
    if (absl::StartsWith(open, absl::StrCat(pending_, TextOf(*shared_, id)))) {
      Set(allowed, id);
    }
  }
}

void ReasoningGate::FillReasoning(absl::Span<uint32_t> allowed) const {
  std::fill(allowed.begin(), allowed.end(), ~0u);
  const auto clear = [&allowed](int32_t id) {
    allowed[id >> 5] &= ~(1u << (id & 31));
  };
  for (int32_t id : shared_->vocab->eog_ids()) clear(id);
  std::string joined;
  for (int32_t id : shared_->close_enders) {
    const std::optional<absl::string_view> rest = AfterClose(
        tail_, TextOf(*shared_, id), shared_->markers.close, &joined);
    if (rest.has_value() && !rest->empty() && !AllSpace(*rest)) clear(id);
  }
}

void ReasoningGate::FillGap(absl::Span<uint32_t> allowed) {
  inner_->Fill(allowed);
  AllowSpace(allowed);
}

void ReasoningGate::AllowSpace(absl::Span<uint32_t> allowed) const {
  for (int32_t id : shared_->whitespace) {
    if (space_ + shared_->vocab->bytes(id).size() <= kMaxLeadingSpace) {
      Set(allowed, id);
    }
  }
}

bool ReasoningGate::TakeSpace(absl::string_view text) {
  if (!AllSpace(text) || space_ + text.size() > kMaxLeadingSpace) return false;
  space_ += text.size();
  return true;
}

absl::Status ReasoningGate::Accept(int32_t token) {
  if (token < 0 || token >= shared_->vocab->vocab_size()) {
    return Refused(token, "(outside the vocabulary)");
  }
  switch (region_) {
    case Region::kStart:
      return AcceptStart(token);
    case Region::kReasoning:
      return AcceptReasoning(token);
    case Region::kGap:
      if (TakeSpace(TextOf(*shared_, token))) return absl::OkStatus();
      break;
    case Region::kContent:
      break;
  }
  const absl::Status accepted = inner_->Accept(token);
  if (accepted.ok()) region_ = Region::kContent;
  return accepted;
}

absl::Status ReasoningGate::AcceptStart(int32_t token) {
  const absl::string_view text = TextOf(*shared_, token);
  const std::string& open = shared_->markers.open;
  if (pending_.empty() && TakeSpace(text)) return absl::OkStatus();
  const std::string read = absl::StrCat(pending_, text);
  if (!text.empty() && absl::StartsWith(open, read)) {
    pending_ = read;
    if (pending_ == open) {
      pending_.clear();
      region_ = Region::kReasoning;
    }
    return absl::OkStatus();
  }
  if (!pending_.empty()) return Refused(token, "inside the reasoning marker");
  const absl::Status accepted = inner_->Accept(token);
  if (accepted.ok()) region_ = Region::kContent;
  return accepted;
}

absl::Status ReasoningGate::AcceptReasoning(int32_t token) {
  if (IsEog(*shared_->vocab, token)) {
    return Refused(token, "before the reasoning closes (end of generation)");
  }
  const std::string& close = shared_->markers.close;
  std::string joined;
  const std::optional<absl::string_view> rest =
      AfterClose(tail_, TextOf(*shared_, token), close, &joined);
  if (rest.has_value()) {
    if (!rest->empty() && !AllSpace(*rest)) {
      return Refused(token, "(it goes on past the reasoning's close)");
    }
    tail_.clear();
    space_ = 0;
    region_ = Region::kGap;
    return absl::OkStatus();
  }
  const size_t keep = close.size() - 1;
  tail_ = joined.size() > keep ? joined.substr(joined.size() - keep) : joined;
  return absl::OkStatus();
}

void ReasoningGate::ForcedTokens(int32_t max, std::vector<int32_t>* out) const {
  if (region_ == Region::kContent) inner_->ForcedTokens(max, out);
}

}  // namespace paceline::engine::grammar
