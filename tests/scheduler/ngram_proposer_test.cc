// Prompt-lookup drafts: the longest run of the sequence's last tokens seen
// before (kMinNgram..kMaxNgram), the most recent among equals, and what
// followed it.

#include "scheduler/ngram_proposer.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::scheduler {
namespace {

std::vector<int32_t> Draft(const std::vector<int32_t>& tokens, int32_t max) {
  std::vector<int32_t> draft = {-1};  // replaced, never appended to
  ProposeNgramDraft(tokens, max, &draft);
  return draft;
}

using V = std::vector<int32_t>;

TEST(NgramProposerTest, ProposesWhatFollowedTheLastTokensBefore) {
  EXPECT_EQ(Draft({1, 2, 3, 4, 5, 1, 2, 3}, 3), (V{4, 5, 1}));
  EXPECT_EQ(Draft({1, 2, 3, 4, 5, 1, 2, 3}, 1), (V{4}));
  // The continuation may run into the suffix itself (a repeating pattern).
  EXPECT_EQ(Draft({7, 7, 7}, 4), (V{7}));
  EXPECT_EQ(Draft({1, 2, 1, 2, 1, 2}, 4), (V{1, 2}));
}

TEST(NgramProposerTest, NothingWithoutAMatchOfAtLeastTheMinimum) {
  EXPECT_EQ(Draft({1, 2, 3, 4, 5}, 4), V{});
  // Only the last token recurs: a run of 1 is below kMinNgram = 2.
  static_assert(kMinNgram == 2);
  EXPECT_EQ(Draft({5, 9, 3, 5}, 4), V{});
  EXPECT_EQ(Draft({1, 5, 2, 3, 5}, 4), V{});
  EXPECT_EQ(Draft({1, 2, 3, 1, 2}, 0), V{});
  EXPECT_EQ(Draft({}, 4), V{});
  EXPECT_EQ(Draft({1, 2}, 4), V{});
}

TEST(NgramProposerTest, TheLongestRunWinsThenTheMostRecent) {
  // "7 8 9" occurs with X = 100 after it; "8 9" alone, later, with 200.
  EXPECT_EQ(Draft({7, 8, 9, 100, 0, 5, 8, 9, 200, 0, 7, 8, 9}, 1), V{100});
  // Two runs of the same length: the later one's continuation.
  EXPECT_EQ(Draft({8, 9, 100, 0, 8, 9, 200, 0, 8, 9}, 1), V{200});
  // Runs longer than kMaxNgram count as kMaxNgram: the most recent wins.
  static_assert(kMaxNgram == 4);
  EXPECT_EQ(
      Draft({1, 2, 3, 4, 5, 100, 0, 2, 3, 4, 5, 200, 0, 1, 2, 3, 4, 5}, 1),
      V{200});
}

TEST(NgramProposerTest, TheDraftStopsAtTheSequencesEnd) {
  EXPECT_EQ(Draft({1, 2, 3, 1, 2}, 8), (V{3, 1, 2}));
}

TEST(NgramProposerTest, AmongEqualRunsTheOneFollowedByAFullDraft) {
  // Eight 7s: the latest runs of four are followed by 1, 2, 3 tokens; the
  // latest followed by four gives the draft.
  EXPECT_EQ(Draft(V(8, 7), 4), V(4, 7));
  EXPECT_EQ(Draft(V(8, 7), 2), V(2, 7));
  // Period 3, drafts of 5: the latest "a b c a" is followed by 3 tokens,
  // the one before by 6.
  EXPECT_EQ(Draft({1, 2, 3, 1, 2, 3, 1, 2, 3, 1}, 5), (V{2, 3, 1, 2, 3}));
}

TEST(NgramProposerTest, SearchesOnlyTheWindow) {
  std::vector<int32_t> tokens = {1, 2, 77};
  tokens.resize(kSearchWindow + 10, 5);
  for (size_t i = 3; i < tokens.size(); ++i) {
    tokens[i] = 1000 + static_cast<int32_t>(i);  // no repeats
  }
  tokens.push_back(1);
  tokens.push_back(2);
  EXPECT_EQ(Draft(tokens, 2), V{});
  // The same pair inside the window is found.
  tokens[tokens.size() - 100] = 1;
  tokens[tokens.size() - 99] = 2;
  EXPECT_EQ(Draft(tokens, 1), V{tokens[tokens.size() - 98]});
}

}  // namespace
}  // namespace paceline::scheduler
