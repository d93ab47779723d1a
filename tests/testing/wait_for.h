#ifndef PACELINE_TESTS_TESTING_WAIT_FOR_H_
#define PACELINE_TESTS_TESTING_WAIT_FOR_H_

// Polling with a deadline, for integration tests that wait on another
// process: every wait ends, and one that times out says what it waited for.
//
//   ASSERT_TRUE(WaitFor([&] { return Status().paced_streams() == 3; },
//                       absl::Seconds(10), "three paced streams"));

#include <functional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace paceline::testing {

// Calls `condition` until it returns true or `timeout` has passed, sleeping
// `interval` between calls; `condition` is called at least once, the last
// time after the deadline. Success as soon as it holds; otherwise a failure
// "timed out after <timeout> waiting for <what>".
::testing::AssertionResult WaitFor(
    const std::function<bool()>& condition, absl::Duration timeout,
    absl::string_view what, absl::Duration interval = absl::Milliseconds(5));

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_WAIT_FOR_H_
