#include "scheduler/ngram_proposer.h"

#include <algorithm>

namespace paceline::scheduler {

void ProposeNgramDraft(absl::Span<const int32_t> tokens, int32_t max_draft,
                       std::vector<int32_t>* draft) {
  draft->clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_draft <= 0 || len < kMinNgram + 1) return;
  // A candidate ends at `end` (exclusive) with tokens[end - 1] equal to
  // the last token and is followed by at least one token (end < len).
  const int64_t stop = std::max<int64_t>(kMinNgram, len - kSearchWindow);
  const int32_t last = tokens[len - 1];
  // Best: the longest run, then the longest continuation (up to
  // max_draft), then the most recent.
  int64_t best_end = -1;
  int32_t best_run = 0;
  int64_t best_follow = 0;
  for (int64_t end = len - 1; end >= stop; --end) {
    if (tokens[end - 1] != last) continue;
    int32_t run = 1;
    while (run < kMaxNgram && end - 1 - run >= 0 &&
           tokens[end - 1 - run] == tokens[len - 1 - run]) {
      ++run;
    }
    if (run < kMinNgram) continue;
    const int64_t follow = std::min<int64_t>(max_draft, len - end);
    if (run > best_run || (run == best_run && follow > best_follow)) {
      best_run = run;
      best_end = end;
      best_follow = follow;
      if (run == kMaxNgram && follow == max_draft) break;
    }
  }
  if (best_end < 0) return;
  const int64_t n = std::min<int64_t>(max_draft, len - best_end);
  draft->assign(tokens.begin() + best_end, tokens.begin() + best_end + n);
}

}  // namespace paceline::scheduler
