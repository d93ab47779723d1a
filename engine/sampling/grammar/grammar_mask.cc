#include "engine/sampling/grammar/grammar_mask.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/fast_forward.h"

namespace paceline::engine::grammar {

GrammarMask::GrammarMask(std::shared_ptr<MaskTables> tables)
    : tables_(std::move(tables)), matcher_(tables_->grammar_shared()) {}

void GrammarMask::Fill(absl::Span<uint32_t> allowed) {
  std::fill(allowed.begin(), allowed.end(), 0u);
  if (ended_) return;
  tables_->Fill(matcher_.stacks(), allowed);
  if (matcher_.CanFinish()) {
    for (int32_t id : tables_->vocab().eog_ids()) {
      allowed[id >> 5] |= 1u << (id & 31);
    }
  }
}

absl::Status GrammarMask::Accept(int32_t token) {
  const TokenTrie& vocab = tables_->vocab();
  if (ended_ || token < 0 || token >= vocab.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " is not allowed by the grammar"));
  }
  const absl::Span<const int32_t> eog = vocab.eog_ids();
  if (std::find(eog.begin(), eog.end(), token) != eog.end()) {
    if (!matcher_.CanFinish()) {
      return absl::InvalidArgumentError(
          "the grammar cannot end here (end-of-generation token)");
    }
    ended_ = true;
    return absl::OkStatus();
  }
  if (vocab.bytes(token).empty() || !matcher_.AcceptBytes(vocab.bytes(token))) {
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " is not allowed by the grammar"));
  }
  return absl::OkStatus();
}

std::unique_ptr<TokenMask> GrammarMask::Clone() const {
  return std::make_unique<GrammarMask>(*this);
}

void GrammarMask::ForcedTokens(int32_t max, std::vector<int32_t>* out) const {
  if (ended_ || max <= 0) return;
  SpellForced(tables_->vocab(), ForcedBytes(matcher_), max, out);
}

}  // namespace paceline::engine::grammar
