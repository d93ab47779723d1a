// Paced delivery under a manual clock: exact emission times from the pace
// bucket, the pacer and the stream buffer together, with a fake writer that
// completes writes at once or holds them (a slow reader). The engine side
// only hands a stream to the pacer; each helper below then gives the pacer
// thread its turn (RunDue) as the daemon's would.

#include "server/delivery/pacer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/clock.h"
#include "server/delivery/stream_buffer.h"
#include "tests/testing/fake_stream_writer.h"
#include "tests/testing/text_vocab.h"

namespace paceline::server {
namespace {

using Kind = Outgoing::Kind;
using FakeWriter = testing::FakeStreamWriter;
using Written = FakeWriter::Written;

// The ids these tests hand over and their text ("x" for the others).
const std::map<int32_t, std::string> kTexts = {
    {1, "a"},   {2, "b"},   {3, "b!"},  {10, "a"},  {11, "b"}, {100, "a"},
    {101, "b"}, {102, "c"}, {103, "d"}, {104, "e"}, {105, "f"}};

struct Stream {
  scheduler::ManualClock clock;
  Pacer pacer{&clock};
  FakeWriter writer{&clock};
  std::unique_ptr<engine::Tokenizer> tokenizer =
      testing::MakeTextVocab(kTexts);
  std::shared_ptr<StreamBuffer> buffer;

  explicit Stream(double pace, int32_t burst = 1,
                  engine::StopStrings stop = {}) {
    DeliveryOptions options;
    options.pace_tokens_per_s = pace;
    options.burst_tokens = burst;
    options.tokenizer = tokenizer.get();
    options.stop = std::move(stop);
    buffer = std::make_shared<StreamBuffer>(options, &writer, &clock, &pacer);
    writer.Bind(buffer);
    scheduler::AcceptInfo info;
    info.id = 7;
    info.prompt_tokens = 3;
    buffer->OnAccepted(info);
    pacer.RunDue();
  }

  // The engine hands over `id` (whose text is kTexts's).
  void Token(int32_t id) {
    const int32_t ids[] = {id};
    scheduler::TokenDelta delta;
    delta.ids = ids;
    buffer->OnTokens(delta);
    pacer.RunDue();
  }

  void Finish() {
    scheduler::FinishInfo info;
    info.reason = scheduler::FinishReason::kLength;
    info.timings.finished = clock.Now();
    buffer->OnFinished(info);
    pacer.RunDue();
  }

  // Advances the clock in `step`s up to `until` (since the epoch), running
  // the pacer at each.
  void RunUntil(absl::Duration until, absl::Duration step) {
    while (clock.Now() - absl::UnixEpoch() < until) {
      clock.Advance(step);
      pacer.RunDue();
    }
  }

  std::vector<absl::Duration> DeltaTimes() const {
    std::vector<absl::Duration> out;
    for (const Written& w : writer.writes) {
      if (w.out.kind == Kind::kDelta) out.push_back(w.at);
    }
    return out;
  }
};

// Records its Release calls; asks to be called again after `again`.
class Target : public Deliverable {
 public:
  Target(int name, std::vector<int>* log) : name_(name), log_(log) {}
  absl::Time Release(absl::Time now) override {
    log_->push_back(name_);
    releases.push_back(now);
    if (again == absl::ZeroDuration()) return absl::InfiniteFuture();
    const absl::Duration d = std::exchange(again, absl::ZeroDuration());
    return now + d;
  }
  absl::Duration again = absl::ZeroDuration();
  std::vector<absl::Time> releases;

 private:
  const int name_;
  std::vector<int>* const log_;
};

// Earliest due time first, FIFO among equal ones; nothing before its time.
TEST(PacerTest, ReleasesInDueOrderThenFifo) {
  scheduler::ManualClock clock;
  Pacer pacer(&clock);
  std::vector<int> log;
  auto a = std::make_shared<Target>(1, &log);
  auto b = std::make_shared<Target>(2, &log);
  auto c = std::make_shared<Target>(3, &log);
  const absl::Time t0 = clock.Now();
  pacer.Schedule(a, t0 + absl::Milliseconds(20));
  pacer.Schedule(b, t0 + absl::Milliseconds(10));
  pacer.Schedule(c, t0 + absl::Milliseconds(10));
  EXPECT_EQ(pacer.num_scheduled(), 3);
  EXPECT_EQ(pacer.RunDue(), t0 + absl::Milliseconds(10));
  EXPECT_TRUE(log.empty());
  clock.Advance(absl::Milliseconds(20));
  EXPECT_EQ(pacer.RunDue(), absl::InfiniteFuture());
  EXPECT_EQ(log, (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(pacer.num_scheduled(), 0);
}

// The time a Release returns is the target's next entry.
TEST(PacerTest, ReleaseReturnReschedules) {
  scheduler::ManualClock clock;
  Pacer pacer(&clock);
  std::vector<int> log;
  auto a = std::make_shared<Target>(1, &log);
  a->again = absl::Milliseconds(50);
  pacer.Schedule(a, clock.Now());
  EXPECT_EQ(pacer.RunDue(), absl::UnixEpoch() + absl::Milliseconds(50));
  EXPECT_EQ(pacer.num_scheduled(), 1);
  clock.Advance(absl::Milliseconds(50));
  EXPECT_EQ(pacer.RunDue(), absl::InfiniteFuture());
  EXPECT_EQ(a->releases, (std::vector<absl::Time>{
                             absl::UnixEpoch(),
                             absl::UnixEpoch() + absl::Milliseconds(50)}));
}

// A woken target runs on the next turn, after the paced entries due then.
TEST(PacerTest, WokenTargetsRunOnTheNextTurnAfterDueEntries) {
  scheduler::ManualClock clock;
  Pacer pacer(&clock);
  std::vector<int> log;
  auto a = std::make_shared<Target>(1, &log);
  auto b = std::make_shared<Target>(2, &log);
  auto c = std::make_shared<Target>(3, &log);
  pacer.Wake(a);
  pacer.Schedule(b, clock.Now());
  pacer.Schedule(c, clock.Now() + absl::Seconds(1));
  EXPECT_EQ(pacer.num_woken(), 1);
  EXPECT_EQ(pacer.num_scheduled(), 2);
  EXPECT_EQ(pacer.RunDue(), absl::UnixEpoch() + absl::Seconds(1));
  EXPECT_EQ(log, (std::vector<int>{2, 1}));
  EXPECT_EQ(pacer.num_woken(), 0);
  EXPECT_EQ(pacer.num_scheduled(), 1);
}

TEST(PacerTest, StopDropsEntriesAndLaterSchedules) {
  scheduler::ManualClock clock;
  Pacer pacer(&clock);
  std::vector<int> log;
  auto a = std::make_shared<Target>(1, &log);
  pacer.Schedule(a, clock.Now());
  pacer.Wake(a);
  pacer.Stop();
  pacer.Schedule(a, clock.Now());
  pacer.Wake(a);
  EXPECT_EQ(pacer.num_scheduled(), 0);
  EXPECT_EQ(pacer.num_woken(), 0);
  EXPECT_EQ(pacer.RunDue(), absl::InfiniteFuture());
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(a.use_count(), 1);  // the pacer holds no reference
}

TEST(StreamBufferTest, UnpacedTokensGoOutAsGeneratedInOrder) {
  Stream s(0);
  s.Token(10);
  s.clock.Advance(absl::Milliseconds(5));
  s.Token(11);
  s.Finish();
  ASSERT_EQ(s.writer.writes.size(), 4u);
  EXPECT_EQ(s.writer.writes[0].out.kind, Kind::kAccepted);
  EXPECT_EQ(s.writer.writes[0].out.accepted.id, 7u);
  EXPECT_EQ(s.writer.writes[1].out.ids, std::vector<int32_t>{10});
  EXPECT_EQ(s.writer.writes[1].out.text, "a");
  EXPECT_EQ(s.writer.writes[2].out.ids, std::vector<int32_t>{11});
  EXPECT_EQ(s.writer.writes[2].at, absl::Milliseconds(5));
  const Outgoing& fin = s.writer.writes[3].out;
  EXPECT_EQ(fin.kind, Kind::kFinished);
  EXPECT_TRUE(fin.was_accepted);
  EXPECT_TRUE(fin.aborted.ok());
  EXPECT_EQ(fin.finish.reason, scheduler::FinishReason::kLength);
  EXPECT_EQ(fin.first_delivered, absl::UnixEpoch());
  EXPECT_EQ(fin.last_delivered, absl::UnixEpoch() + absl::Milliseconds(5));
  EXPECT_EQ(s.pacer.num_scheduled(), 0);
  EXPECT_TRUE(s.buffer->done());
}

// 40 tokens generated in a burst at t = 0, delivered at 20 tokens/s: one
// every 50 ms, the last at 1.95 s, long after generation finished.
TEST(StreamBufferTest, PacedStreamEmitsAtExactIntervals) {
  Stream s(20);
  for (int i = 0; i < 40; ++i) s.Token(i);
  s.Finish();
  EXPECT_EQ(s.buffer->buffered_tokens(), 39);
  EXPECT_EQ(s.pacer.buffered_tokens(), 39);
  EXPECT_EQ(s.pacer.num_scheduled(), 1);
  s.RunUntil(absl::Seconds(3), absl::Milliseconds(1));
  const std::vector<absl::Duration> times = s.DeltaTimes();
  ASSERT_EQ(times.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(times[i], absl::Milliseconds(50) * i) << "token " << i;
  }
  EXPECT_EQ(s.buffer->buffered_tokens(), 0);
  EXPECT_EQ(s.pacer.buffered_tokens(), 0);
  const Outgoing& fin = s.writer.writes.back().out;
  ASSERT_EQ(fin.kind, Kind::kFinished);
  EXPECT_EQ(s.writer.writes.back().at, absl::Milliseconds(1950));
  EXPECT_EQ(fin.finish.timings.finished, absl::UnixEpoch());
  EXPECT_EQ(fin.last_delivered - fin.first_delivered, absl::Milliseconds(1950));
}

// The pacer wakes exactly at due times: no polling granularity enters.
TEST(StreamBufferTest, PacerReportsTheNextDueTime) {
  Stream s(4, /*burst=*/2);
  for (int i = 0; i < 4; ++i) s.Token(i);
  ASSERT_EQ(s.DeltaTimes().size(), 2u);  // the burst
  absl::Time next = s.pacer.RunDue();
  EXPECT_EQ(next, absl::UnixEpoch() + absl::Milliseconds(250));
  s.clock.Set(next);
  next = s.pacer.RunDue();
  EXPECT_EQ(next, absl::UnixEpoch() + absl::Milliseconds(500));
  s.clock.Set(next);
  EXPECT_EQ(s.pacer.RunDue(), absl::InfiniteFuture());
  EXPECT_EQ(s.DeltaTimes().size(), 4u);
}

// A reader that does not keep up: one write in flight, the tokens released
// meanwhile coalesce into the next Delta; nothing is lost or reordered.
TEST(StreamBufferTest, SlowReaderGetsCoalescedDeltas) {
  Stream s(0);
  s.writer.hold = true;  // writes hang until Complete
  for (int i = 0; i < 5; ++i) s.Token(100 + i);
  ASSERT_EQ(s.writer.writes.size(), 2u);  // Accepted, then token 100 hangs
  EXPECT_EQ(s.writer.writes[1].out.ids, std::vector<int32_t>{100});
  // Released but not delivered: a slow reader's tokens count as buffered
  // (they once showed as 0, hiding the stall), and so does its stream.
  EXPECT_EQ(s.buffer->buffered_tokens(), 5);
  EXPECT_EQ(s.pacer.buffering_streams(), 1);
  s.writer.Complete(true);
  EXPECT_EQ(s.buffer->buffered_tokens(), 4);  // token 100 delivered
  ASSERT_EQ(s.writer.writes.size(), 3u);
  EXPECT_EQ(s.writer.writes[2].out.ids,
            (std::vector<int32_t>{101, 102, 103, 104}));
  EXPECT_EQ(s.writer.writes[2].out.text, "bcde");
  s.Token(105);
  s.Finish();
  EXPECT_EQ(s.writer.writes.size(), 3u);
  s.writer.hold = false;
  s.writer.Complete(true);
  ASSERT_EQ(s.writer.writes.size(), 5u);
  EXPECT_EQ(s.writer.writes[3].out.text, "f");
  EXPECT_EQ(s.writer.writes[4].out.kind, Kind::kFinished);
  EXPECT_EQ(s.buffer->buffered_tokens(), 0);
  EXPECT_EQ(s.pacer.buffering_streams(), 0);
}

// Text without a token (the end-of-request flush: "!" held back as the
// start of the stop string "!?") travels with the token before it, even
// while that token waits for its pace.
TEST(StreamBufferTest, TrailingTextRidesWithTheLastToken) {
  Stream s(10, 1, {{"!?"}});
  s.Token(1);  // "a"
  s.Token(3);  // "b!": "b" now, "!" held
  s.Finish();
  s.RunUntil(absl::Milliseconds(200), absl::Milliseconds(10));
  const auto& w = s.writer.writes;
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[2].out.text, "b!");
  EXPECT_EQ(w[2].at, absl::Milliseconds(100));
}

TEST(StreamBufferTest,
     AbortDropsBufferedTokensAndFinishesAfterTheWriteInFlight) {
  Stream s(10);
  for (int i = 0; i < 10; ++i) s.Token(i);
  s.writer.hold = true;
  s.RunUntil(absl::Milliseconds(100),
             absl::Milliseconds(10));  // token 1 in flight
  ASSERT_TRUE(s.writer.in_flight);
  EXPECT_EQ(s.pacer.buffered_tokens(), 9);  // 8 waiting, 1 being written
  s.buffer->Abort(absl::AbortedError("drain timeout"));
  EXPECT_EQ(s.buffer->buffered_tokens(), 0);
  EXPECT_EQ(s.pacer.buffered_tokens(), 0);
  EXPECT_EQ(s.pacer.buffering_streams(), 0);
  const size_t before = s.writer.writes.size();
  s.writer.Complete(true);
  EXPECT_EQ(s.pacer.buffered_tokens(), 0);  // not counted off twice
  ASSERT_EQ(s.writer.writes.size(), before + 1);
  const Outgoing& fin = s.writer.writes.back().out;
  EXPECT_EQ(fin.kind, Kind::kFinished);
  EXPECT_EQ(fin.aborted.code(), absl::StatusCode::kAborted);
  // Later engine output is ignored.
  s.Token(99);
  s.Finish();
  s.RunUntil(absl::Seconds(2), absl::Milliseconds(50));
  EXPECT_EQ(s.writer.writes.size(), before + 1);
}

TEST(StreamBufferTest, BrokenWriteEndsTheStreamCancelled) {
  Stream s(0);
  s.writer.hold = true;
  s.Token(1);
  s.writer.Complete(false);  // the write of token 1 failed
  ASSERT_EQ(s.writer.writes.back().out.kind, Kind::kFinished);
  EXPECT_EQ(s.writer.writes.back().out.aborted.code(),
            absl::StatusCode::kCancelled);
}

// The scheduler refused the request at intake: no Accepted, the RPC ends
// with the refusal.
TEST(StreamBufferTest, RefusalAtIntakeWritesOnlyTheEnd) {
  scheduler::ManualClock clock;
  Pacer pacer(&clock);
  FakeWriter writer(&clock);
  auto buffer = std::make_shared<StreamBuffer>(DeliveryOptions{}, &writer,
                                               &clock, &pacer);
  writer.Bind(buffer);
  scheduler::FinishInfo info;
  info.reason = scheduler::FinishReason::kError;
  info.status = absl::ResourceExhaustedError("queue full");
  buffer->OnFinished(info);
  EXPECT_TRUE(writer.writes.empty());  // handed to the pacer
  pacer.RunDue();
  ASSERT_EQ(writer.writes.size(), 1u);
  EXPECT_EQ(writer.writes[0].out.kind, Kind::kFinished);
  EXPECT_FALSE(writer.writes[0].out.was_accepted);
  EXPECT_EQ(writer.writes[0].out.finish.status.code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace paceline::server
