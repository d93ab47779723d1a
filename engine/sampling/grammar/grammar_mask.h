#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_MASK_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_MASK_H_

// The sampling chain's token mask (token_mask.h) for a grammar: a request's
// matcher over the shared tables of its grammar and vocabulary.
//
// Semantics: a token is allowed when the grammar can read all its bytes
// from here; an end-of-generation token (EOS, end of turn) only where the
// grammar may end; a token without bytes (other control tokens) never.
// Once an end-of-generation token is accepted the mask allows nothing.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/token_mask.h"

namespace paceline::engine::grammar {

class GrammarMask : public TokenMask {
 public:
  explicit GrammarMask(std::shared_ptr<MaskTables> tables);

  void Fill(absl::Span<uint32_t> allowed) override;
  absl::Status Accept(int32_t token) override;
  std::unique_ptr<TokenMask> Clone() const override;
  // The bytes the grammar forces (fast_forward.h), spelled in tokens.
  void ForcedTokens(int32_t max, std::vector<int32_t>* out) const override;

  const Matcher& matcher() const { return matcher_; }
  bool ended() const { return ended_; }

 private:
  std::shared_ptr<MaskTables> tables_;
  Matcher matcher_;
  bool ended_ = false;
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_MASK_H_
