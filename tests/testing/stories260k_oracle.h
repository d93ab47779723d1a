#ifndef PACELINE_TESTS_TESTING_STORIES260K_ORACLE_H_
#define PACELINE_TESTS_TESTING_STORIES260K_ORACLE_H_

// The test model's known greedy outputs, from ../shared/models/README.md:
// the one place the tests spell them out.

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/testing/build_paths.h"

namespace paceline::testing {

inline const std::string kStories260KPath =
    SharedPath("models/stories260K.gguf");

// Whether kStories260KPath can be read (tests skip without it).
inline bool HaveStories260K() {
  return access(kStories260KPath.c_str(), R_OK) == 0;
}

inline constexpr char kOnceUponATime[] = "Once upon a time";

// "Once upon a time" with BOS and the SPM leading space.
inline const std::vector<int32_t> kOnceUponATimePrompt = {1, 403, 407, 261,
                                                          378};

// README.md, "64 tokens from llama.cpp on stories260K.gguf".
inline const std::vector<int32_t> kGreedy64Ids = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401,
    396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433,
    426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388,
    426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267,
    414, 270, 333, 415, 426, 13,  438, 310, 439, 419, 357, 336};

inline constexpr char kGreedy64Text[] =
    ", there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball. She wanted to play with it, but "
    "it was too high.\nLily's mom said";

// README.md, "256 steps from llama2.c run.c": the printed text minus the
// echoed prompt and run.c's final newline (252 generated tokens; llama.cpp
// produces the same ids).
inline constexpr char kGreedy252Text[] =
    ", there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball. She wanted to play with it, but "
    "it was too high.\n"
    "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't "
    "know what to do. She said, \"I want to play with your ball, but I can't "
    "find it.\"\n"
    "Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I "
    "didn't know what to do.\"\n"
    "Lily didn't want to help her mom, so she said, \"I'm sorry, mom. I "
    "didn't know what to do.\" Her mom said, \"Don't worry, Lily. We can help "
    "you.";

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_STORIES260K_ORACLE_H_
