#ifndef PACELINE_TESTS_TESTING_PAGER_H_
#define PACELINE_TESTS_TESTING_PAGER_H_

// KV pager fixtures shared by the kvpager tests.

#include <cstdint>
#include <memory>
#include <vector>

#include "kvpager/kv_pager.h"

namespace paceline::testing {

// A pager of `num_blocks` blocks of `block_size` tokens. Adds a test failure
// and returns null when KvPager::Create refuses the shape.
std::unique_ptr<kvpager::KvPager> MakePager(int32_t num_blocks,
                                            int32_t block_size);

// first, first + 1, ..., first + n - 1: token ids for prompts.
std::vector<int32_t> Range(int32_t first, int32_t n);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_PAGER_H_
