#ifndef PACELINE_SCHEDULER_NGRAM_PROPOSER_H_
#define PACELINE_SCHEDULER_NGRAM_PROPOSER_H_

// Draft tokens for speculative decoding without a draft model (prompt
// lookup): when the last tokens of a sequence occurred earlier in it, in
// the prompt or in its own output, the tokens that followed them there are
// a guess at what comes next. Text that quotes, edits or repeats its
// context (code edits, summaries with citations, repetitive stories) is
// guessed right often; other text rarely, and then no draft is proposed at
// all when nothing matches.
//
// The match: the earlier occurrence whose tokens before it agree with the
// sequence's last tokens for the longest run, from kMinNgram up to
// kMaxNgram tokens; among equally long runs the one followed by the most
// tokens (up to max_draft: in a repeating pattern the latest occurrence
// may be followed by only a few), then the most recent. The draft is what
// followed it, up to max_draft tokens. Only the last kSearchWindow positions
// are searched, so a call costs O(kSearchWindow) whatever the context.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace paceline::scheduler {

inline constexpr int32_t kMinNgram = 2;
inline constexpr int32_t kMaxNgram = 4;
inline constexpr int32_t kSearchWindow = 16384;

// Replaces *draft with up to `max_draft` tokens proposed to follow
// `tokens` (see the top); empty when nothing matches or max_draft <= 0.
void ProposeNgramDraft(absl::Span<const int32_t> tokens, int32_t max_draft,
                       std::vector<int32_t>* draft);

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_NGRAM_PROPOSER_H_
