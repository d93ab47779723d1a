#ifndef PACELINE_TESTS_TESTING_FAKE_STREAM_WRITER_H_
#define PACELINE_TESTS_TESTING_FAKE_STREAM_WRITER_H_

// A StreamWriter for delivery tests: records every message with the
// manual clock's time, checks that one write at most is in flight, and
// completes each write at once unless told to hold them (a slow reader),
// then Complete(ok) finishes the held one. No threads.

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/clock.h"
#include "server/delivery/stream_buffer.h"

namespace paceline::testing {

class FakeStreamWriter : public server::StreamWriter {
 public:
  struct Written {
    absl::Duration at;  // since the epoch of the manual clock
    server::Outgoing out;
  };

  explicit FakeStreamWriter(scheduler::Clock* clock) : clock_(clock) {}

  // The buffer to tell of completions (created after the writer).
  void Bind(std::shared_ptr<server::StreamBuffer> buffer) { buffer_ = buffer; }

  void Send(const server::Outgoing& out) override {
    writes.push_back({clock_->Now() - absl::UnixEpoch(), out});
    EXPECT_FALSE(in_flight) << "two writes in flight";
    if (out.kind == server::Outgoing::Kind::kFinished) return;  // RPC over
    in_flight = true;
    if (!hold) Complete(true);
  }

  void Complete(bool ok) {
    ASSERT_TRUE(in_flight);
    in_flight = false;
    buffer_->OnWriteDone(ok);
  }

  // The kinds written so far, in order.
  std::vector<server::Outgoing::Kind> kinds() const {
    std::vector<server::Outgoing::Kind> out;
    for (const Written& w : writes) out.push_back(w.out.kind);
    return out;
  }

  bool hold = false;
  bool in_flight = false;
  std::vector<Written> writes;

 private:
  scheduler::Clock* const clock_;
  std::shared_ptr<server::StreamBuffer> buffer_;
};

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_FAKE_STREAM_WRITER_H_
