#include "tests/testing/wait_for.h"

#include "absl/time/clock.h"

namespace paceline::testing {

::testing::AssertionResult WaitFor(const std::function<bool()>& condition,
                                   absl::Duration timeout,
                                   absl::string_view what,
                                   absl::Duration interval) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) {
      return ::testing::AssertionFailure()
             << "timed out after " << absl::FormatDuration(timeout)
             << " waiting for " << what;
    }
    absl::SleepFor(interval);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace paceline::testing
