// StreamBuffer's write side, one test per transition of its state machine
// (kIdle, kWriting, kFinishing, kDone), under a manual clock and a Pacer
// driven by RunDue: no threads, no sleeps. Each test names the state, the
// event, and where it leads. The engine-side events (OnAccepted, OnTokens,
// OnFinished) never write: they hand the stream to the pacer at most.

#include "server/delivery/stream_buffer.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chat/output_parser.h"
#include "gtest/gtest.h"
#include "scheduler/clock.h"
#include "scheduler/token_sink.h"
#include "server/delivery/delivery_observer.h"
#include "server/delivery/pacer.h"
#include "tests/testing/fake_stream_writer.h"
#include "tests/testing/text_vocab.h"

namespace paceline::server {
namespace {

using Kind = Outgoing::Kind;
using State = StreamBuffer::State;

class RecordingObserver : public DeliveryObserver {
 public:
  void OnStreamOpened() override { ++opened; }
  void OnStreamClosed() override { ++closed; }
  void OnDelivered(absl::string_view /*tenant*/, bool first,
                   absl::Duration since, int32_t tokens) override {
    delivered.push_back(tokens);
    firsts.push_back(first);
    sinces.push_back(since);
  }
  int opened = 0;
  int closed = 0;
  std::vector<int32_t> delivered;
  std::vector<bool> firsts;
  std::vector<absl::Duration> sinces;
};

class StreamBufferStateTest : public ::testing::Test {
 protected:
  void Open(double pace = 0, int32_t burst = 1, int64_t max_delta_bytes = 0,
            int64_t max_unread_bytes = 0) {
    DeliveryOptions options;
    options.pace_tokens_per_s = pace;
    options.burst_tokens = burst;
    options.max_delta_bytes = max_delta_bytes;
    options.max_unread_bytes = max_unread_bytes;
    OpenWith(options);
  }
  // Every test's stream is opened here: over the test's vocabulary, its
  // stop strings cut at by stopped_.
  void OpenWith(DeliveryOptions options) {
    tokenizer_ = testing::MakeTextVocab(vocab_);
    options.tokenizer = tokenizer_.get();
    buffer_ = std::make_shared<StreamBuffer>(options, &writer_, &clock_,
                                             &pacer_, &observer_, "t");
    buffer_->SetStringStopper(
        [this](scheduler::RequestId id, std::string stop, int32_t tokens) {
          stopped_.push_back({id, std::move(stop), tokens});
        });
    buffer_->SetCanceller(
        [this](scheduler::RequestId id) { cancelled_.push_back(id); });
    writer_.Bind(buffer_);
  }
  // Opened, and the Accepted message written (and completed).
  void OpenAccepted(double pace = 0, int32_t burst = 1) {
    Open(pace, burst);
    Accept();
    pacer_.RunDue();
    ASSERT_EQ(writer_.kinds(), std::vector<Kind>{Kind::kAccepted});
  }
  // Opened, with the Accepted write in flight (a reader that holds writes).
  void OpenWriting() {
    Open();
    writer_.hold = true;
    Accept();
    pacer_.RunDue();
    ASSERT_EQ(buffer_->state(), State::kWriting);
  }

  void Accept() {
    scheduler::AcceptInfo info;
    info.id = 7;
    buffer_->OnAccepted(info);
  }
  // The engine hands over `id`, whose text (vocab_, before Open) is `text`.
  void Token(int32_t id, const std::string& text = "x") {
    ASSERT_EQ(tokenizer_->TokenBytes(id), text) << "id " << id;
    const int32_t ids[] = {id};
    scheduler::TokenDelta delta;
    delta.ids = ids;
    buffer_->OnTokens(delta);
  }
  void Finish() {
    scheduler::FinishInfo info;
    info.reason = scheduler::FinishReason::kStop;
    buffer_->OnFinished(info);
  }
  const Outgoing& Last() const { return writer_.writes.back().out; }

  scheduler::ManualClock clock_;
  Pacer pacer_{&clock_};
  testing::FakeStreamWriter writer_{&clock_};
  RecordingObserver observer_;
  std::shared_ptr<StreamBuffer> buffer_;
  std::vector<scheduler::RequestId> cancelled_;  // what the buffer cancelled
  // The token texts the stream's ids spell ("x" for the others), set
  // before Open.
  std::map<int32_t, std::string> vocab_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  struct Stopped {
    scheduler::RequestId id;
    std::string stop;
    int32_t tokens;
  };
  std::vector<Stopped> stopped_;  // what the buffer stopped at a string
};

// --- kIdle -------------------------------------------------------------------

TEST_F(StreamBufferStateTest, IdleOutputHandsOverOnceWithoutWriting) {
  Open();
  EXPECT_EQ(observer_.opened, 1);
  Accept();
  Token(1);
  Token(2);
  Finish();
  EXPECT_TRUE(writer_.writes.empty());   // the engine side never writes
  EXPECT_EQ(pacer_.num_woken(), 1);      // one hand-over for the burst
  EXPECT_EQ(pacer_.num_scheduled(), 0);  // nothing paced
  EXPECT_EQ(buffer_->state(), State::kIdle);
  EXPECT_EQ(buffer_->buffered_tokens(), 2);  // released, not yet written
  pacer_.RunDue();
  EXPECT_EQ(writer_.kinds(), (std::vector<Kind>{Kind::kAccepted, Kind::kDelta,
                                                Kind::kFinished}));
  EXPECT_EQ(writer_.writes[1].out.ids, (std::vector<int32_t>{1, 2}));
}

TEST_F(StreamBufferStateTest, IdleOutputPacedTokenIsScheduledAtItsDueTime) {
  OpenAccepted(/*pace=*/10);
  Token(1);
  pacer_.RunDue();  // within the burst
  ASSERT_EQ(writer_.writes.size(), 2u);
  Token(2);
  EXPECT_EQ(buffer_->buffered_tokens(), 1);
  // Its text is made at once (a wake), its release waits for its time.
  EXPECT_EQ(pacer_.num_woken(), 1);
  EXPECT_EQ(pacer_.num_scheduled(), 0);
  EXPECT_EQ(pacer_.RunDue(), absl::UnixEpoch() + absl::Milliseconds(100));
  EXPECT_EQ(pacer_.num_scheduled(), 1);
  EXPECT_EQ(writer_.writes.size(), 2u);
  EXPECT_EQ(buffer_->state(), State::kIdle);
}

TEST_F(StreamBufferStateTest, IdleReleaseStartsTheNextWrite) {
  Open();
  writer_.hold = true;
  Accept();
  Token(1);
  pacer_.RunDue();
  EXPECT_EQ(writer_.kinds(), std::vector<Kind>{Kind::kAccepted});  // first
  EXPECT_EQ(buffer_->state(), State::kWriting);
}

TEST_F(StreamBufferStateTest, IdleReleaseWithNothingReadyStaysIdle) {
  OpenAccepted();
  EXPECT_EQ(buffer_->Release(clock_.Now()), absl::InfiniteFuture());
  EXPECT_EQ(writer_.writes.size(), 1u);
  EXPECT_EQ(buffer_->state(), State::kIdle);
}

TEST_F(StreamBufferStateTest, IdleReleaseWithTheFinishDrainedWritesFinished) {
  OpenAccepted();
  Finish();
  EXPECT_EQ(writer_.writes.size(), 1u);
  pacer_.RunDue();
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_TRUE(Last().was_accepted);
  EXPECT_TRUE(Last().aborted.ok());
  EXPECT_EQ(buffer_->state(), State::kDone);
  EXPECT_EQ(observer_.closed, 1);
}

TEST_F(StreamBufferStateTest, IdleAbortFinishesAtOnce) {
  OpenAccepted(/*pace=*/1);
  Token(1);
  pacer_.RunDue();
  Token(2);  // waits a second for its pace
  buffer_->Abort(absl::AbortedError("drain timeout"));
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().aborted.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(buffer_->state(), State::kDone);
  EXPECT_EQ(buffer_->buffered_tokens(), 0);
  EXPECT_EQ(pacer_.buffered_tokens(), 0);
  // The engine had not finished: the Finished says cancelled, with the
  // cut's status and the tokens generated until then.
  EXPECT_EQ(Last().finish.reason, scheduler::FinishReason::kCancelled);
  EXPECT_EQ(Last().finish.status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Last().finish.usage.completion_tokens, 2);
}

TEST_F(StreamBufferStateTest, AbortAfterTheEngineFinishedKeepsItsUsage) {
  OpenAccepted(/*pace=*/1);
  Token(1);
  pacer_.RunDue();
  Token(2);
  scheduler::FinishInfo info;
  info.reason = scheduler::FinishReason::kLength;
  info.usage.prompt_tokens = 5;
  info.usage.completion_tokens = 2;
  buffer_->OnFinished(info);
  buffer_->Abort(absl::AbortedError("drain timeout"));
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().finish.reason, scheduler::FinishReason::kCancelled);
  EXPECT_EQ(Last().finish.status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Last().finish.usage.prompt_tokens, 5);
  EXPECT_EQ(Last().finish.usage.completion_tokens, 2);
}

TEST_F(StreamBufferStateTest, IdleDetachWritesNothing) {
  OpenAccepted();
  buffer_->Detach();
  EXPECT_EQ(buffer_->state(), State::kDone);
  EXPECT_EQ(writer_.writes.size(), 1u);
  EXPECT_EQ(observer_.closed, 1);
  buffer_->Detach();
  EXPECT_EQ(observer_.closed, 1);  // once per stream
}

TEST_F(StreamBufferStateTest, IdleWriteDoneWithoutAWriteIsIgnored) {
  OpenAccepted();
  buffer_->OnWriteDone(true);
  buffer_->OnWriteDone(false);
  EXPECT_EQ(buffer_->state(), State::kIdle);
  EXPECT_EQ(writer_.writes.size(), 1u);
}

// --- kWriting ----------------------------------------------------------------

// Output that arrives during a write is made into text at once (one wake
// for the burst: a stop string is found while a slow reader still reads)
// and waits, ready, for the write in flight: the completion carries on.
TEST_F(StreamBufferStateTest, WritingOutputIsMadeReadyButNotWritten) {
  vocab_ = {{1, "a"}, {2, "b"}};
  OpenWriting();
  Token(1, "a");
  Token(2, "b");
  Finish();
  EXPECT_EQ(pacer_.num_woken(), 1);
  pacer_.RunDue();
  EXPECT_EQ(pacer_.num_scheduled(), 0);
  EXPECT_EQ(writer_.writes.size(), 1u);
  EXPECT_EQ(buffer_->buffered_tokens(), 2);  // behind the write in flight
  EXPECT_EQ(buffer_->state(), State::kWriting);
  writer_.Complete(true);
  EXPECT_EQ(Last().text, "ab");
}

TEST_F(StreamBufferStateTest, WritingReleaseMovesTokensButDoesNotWrite) {
  OpenAccepted(/*pace=*/10);
  writer_.hold = true;
  Token(1);
  pacer_.RunDue();  // token 1 in flight
  Token(2);         // due at 100 ms
  clock_.Advance(absl::Milliseconds(100));
  pacer_.RunDue();
  EXPECT_EQ(buffer_->buffered_tokens(), 2);  // released, not yet written
  EXPECT_EQ(writer_.writes.size(), 2u);      // but one write at a time
  EXPECT_EQ(buffer_->state(), State::kWriting);
  writer_.Complete(true);
  EXPECT_EQ(Last().ids, std::vector<int32_t>{2});
  EXPECT_EQ(buffer_->buffered_tokens(), 1);  // token 1 delivered
}

TEST_F(StreamBufferStateTest, WritingWriteDoneWithMoreReadyWritesNext) {
  vocab_ = {{1, "a"}, {2, "b"}};
  OpenWriting();
  clock_.Advance(absl::Milliseconds(3));
  Token(1, "a");
  Token(2, "b");
  writer_.Complete(true);  // the Accepted: no tokens delivered
  EXPECT_TRUE(observer_.delivered.empty());
  ASSERT_EQ(writer_.writes.size(), 2u);
  EXPECT_EQ(Last().ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(Last().text, "ab");
  EXPECT_EQ(buffer_->state(), State::kWriting);
  clock_.Advance(absl::Milliseconds(2));
  writer_.Complete(true);
  EXPECT_EQ(observer_.delivered, std::vector<int32_t>{2});
  EXPECT_EQ(observer_.firsts, std::vector<bool>{true});
  EXPECT_EQ(observer_.sinces,
            std::vector<absl::Duration>{absl::Milliseconds(5)});
}

// A reader whose write is held while 100 tokens of 30 bytes pile up gets
// them as Deltas of at most max_delta_bytes each (35 bytes a token with
// its id: 5 per Delta of 200), all in order, none lost.
TEST_F(StreamBufferStateTest, CoalescedDeltasStayWithinTheirByteLimit) {
  for (int i = 0; i < 100; ++i) {
    vocab_[i] = std::string(30, static_cast<char>('a' + i % 26));
  }
  Open(/*pace=*/0, /*burst=*/1, /*max_delta_bytes=*/200);
  writer_.hold = true;
  Accept();
  pacer_.RunDue();
  ASSERT_EQ(buffer_->state(), State::kWriting);
  std::string want;
  for (int i = 0; i < 100; ++i) {
    const std::string text(30, static_cast<char>('a' + i % 26));
    Token(i, text);
    want += text;
  }
  Finish();
  std::string got;
  std::vector<int32_t> ids;
  for (int writes = 0; buffer_->state() != State::kDone && writes < 1000;
       ++writes) {
    writer_.Complete(true);
    const Outgoing& out = Last();
    if (out.kind != Kind::kDelta) continue;
    EXPECT_LE(EstimatedBytes(out), 200);
    EXPECT_EQ(out.ids.size(), 5u);
    got += out.text;
    ids.insert(ids.end(), out.ids.begin(), out.ids.end());
  }
  EXPECT_EQ(got, want);
  ASSERT_EQ(ids.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ids[i], i);
  EXPECT_EQ(Last().kind, Kind::kFinished);
}

// One piece larger than the limit still goes out, alone.
TEST_F(StreamBufferStateTest, APieceOverTheLimitGoesAlone) {
  vocab_ = {{1, "ab"}, {2, std::string(40, 'z')}, {3, "cd"}};
  Open(0, 1, /*max_delta_bytes=*/16);
  writer_.hold = true;
  Accept();
  pacer_.RunDue();
  Token(1, "ab");
  Token(2, std::string(40, 'z'));
  Token(3, "cd");
  writer_.Complete(true);  // the Accepted
  EXPECT_EQ(Last().ids, std::vector<int32_t>{1});
  writer_.Complete(true);
  EXPECT_EQ(Last().ids, std::vector<int32_t>{2});
  EXPECT_EQ(Last().text, std::string(40, 'z'));
  writer_.Complete(true);
  EXPECT_EQ(Last().ids, std::vector<int32_t>{3});
}

TEST_F(StreamBufferStateTest, WritingWriteDoneWithNothingReadyGoesIdle) {
  OpenWriting();
  writer_.Complete(true);
  EXPECT_EQ(buffer_->state(), State::kIdle);
  EXPECT_EQ(writer_.writes.size(), 1u);
}

TEST_F(StreamBufferStateTest, WritingWriteDoneWithTheFinishDrainedFinishes) {
  OpenWriting();
  Token(1);
  Finish();
  writer_.Complete(true);
  EXPECT_EQ(Last().kind, Kind::kDelta);
  writer_.Complete(true);
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().first_delivered, absl::UnixEpoch());
  EXPECT_EQ(buffer_->state(), State::kDone);
  EXPECT_EQ(observer_.closed, 1);
}

TEST_F(StreamBufferStateTest, WritingWriteFailedFinishesCancelled) {
  OpenWriting();
  Token(1);
  writer_.Complete(false);
  EXPECT_EQ(writer_.kinds(),
            (std::vector<Kind>{Kind::kAccepted, Kind::kFinished}));
  EXPECT_EQ(Last().aborted.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(buffer_->state(), State::kDone);
}

TEST_F(StreamBufferStateTest, WritingAbortWaitsForTheWriteInFlight) {
  OpenWriting();
  Token(1);
  buffer_->Abort(absl::AbortedError("drain timeout"));
  EXPECT_EQ(buffer_->state(), State::kFinishing);
  EXPECT_EQ(writer_.writes.size(), 1u);
  EXPECT_EQ(buffer_->buffered_tokens(), 0);
}

TEST_F(StreamBufferStateTest, WritingDetachDropsTheRest) {
  OpenWriting();
  Token(1);
  buffer_->Detach();
  EXPECT_EQ(buffer_->state(), State::kDone);
  writer_.Complete(true);
  EXPECT_EQ(writer_.writes.size(), 1u);
  EXPECT_EQ(observer_.closed, 1);
}

// A stalled reader (its write held) whose released output passes
// max_unread_bytes is cut on the engine side: everything undelivered is
// dropped, its request cancelled once, and the stream finishes with
// RESOURCE_EXHAUSTED when the write in flight completes.
TEST_F(StreamBufferStateTest, WritingUnreadPastTheLimitCutsTheStream) {
  for (int i = 0; i < 7; ++i) vocab_[i] = std::string(10, 'a');
  vocab_[7] = "more";
  Open(/*pace=*/0, /*burst=*/1, /*max_delta_bytes=*/0,
       /*max_unread_bytes=*/100);
  writer_.hold = true;
  Accept();
  pacer_.RunDue();
  ASSERT_EQ(buffer_->state(), State::kWriting);
  // 15 bytes a token (10 of text, 5 of id): the 7th passes 100.
  for (int i = 0; i < 6; ++i) Token(i, std::string(10, 'a'));
  pacer_.RunDue();  // the text made, ready behind the write in flight
  EXPECT_EQ(buffer_->state(), State::kWriting);
  EXPECT_TRUE(cancelled_.empty());
  Token(6, std::string(10, 'a'));
  pacer_.RunDue();
  EXPECT_EQ(buffer_->state(), State::kFinishing);
  EXPECT_EQ(cancelled_, std::vector<scheduler::RequestId>{7});
  EXPECT_EQ(buffer_->buffered_tokens(), 0);
  Token(7, "more");  // generated before the cancel took effect: dropped
  Finish();
  EXPECT_EQ(cancelled_.size(), 1u);
  writer_.Complete(true);  // the Accepted in flight
  EXPECT_EQ(writer_.kinds(),
            (std::vector<Kind>{Kind::kAccepted, Kind::kFinished}));
  EXPECT_EQ(Last().aborted.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(Last().aborted.message().find("reads too slowly"),
            std::string::npos)
      << Last().aborted.message();
}

// A reader that keeps up never holds more than one write's worth unread,
// however much it receives; paced tokens waiting for their time are not
// unread either.
TEST_F(StreamBufferStateTest, UnreadLimitSparesReadersThatKeepUp) {
  for (int i = 0; i < 50; ++i) vocab_[i] = std::string(10, 'a');
  Open(/*pace=*/0, /*burst=*/1, /*max_delta_bytes=*/0,
       /*max_unread_bytes=*/100);
  Accept();
  pacer_.RunDue();
  for (int i = 0; i < 50; ++i) {
    Token(i, std::string(10, 'a'));
    pacer_.RunDue();
  }
  Finish();
  pacer_.RunDue();
  EXPECT_TRUE(cancelled_.empty());
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_TRUE(Last().aborted.ok()) << Last().aborted;

  Open(/*pace=*/1, /*burst=*/1, /*max_delta_bytes=*/0,
       /*max_unread_bytes=*/100);
  Accept();
  pacer_.RunDue();
  for (int i = 0; i < 50; ++i) Token(i, std::string(10, 'a'));
  pacer_.RunDue();
  EXPECT_TRUE(cancelled_.empty());
  EXPECT_EQ(buffer_->buffered_tokens(), 49);  // one released, 49 paced
  EXPECT_NE(buffer_->state(), State::kDone);
}

// An idle stream whose backlog passes the limit in one engine-side append
// is cut by the pacer's Release (the engine side never writes).
TEST_F(StreamBufferStateTest, IdleUnreadPastTheLimitIsCutByTheRelease) {
  vocab_ = {{1, std::string(200, 'z')}};
  Open(/*pace=*/0, /*burst=*/1, /*max_delta_bytes=*/0,
       /*max_unread_bytes=*/100);
  Accept();
  pacer_.RunDue();
  ASSERT_EQ(buffer_->state(), State::kIdle);
  Token(1, std::string(200, 'z'));
  EXPECT_EQ(writer_.writes.size(), 1u);  // the Accepted only
  EXPECT_TRUE(cancelled_.empty());
  pacer_.RunDue();
  EXPECT_EQ(cancelled_, std::vector<scheduler::RequestId>{7});
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().aborted.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(buffer_->state(), State::kDone);
}

// --- kFinishing --------------------------------------------------------------

TEST_F(StreamBufferStateTest, FinishingIgnoresOutputAndLaterAborts) {
  OpenWriting();
  buffer_->Abort(absl::AbortedError("drain timeout"));
  Token(1);
  Finish();
  buffer_->Abort(absl::CancelledError("the client cancelled"));
  EXPECT_EQ(pacer_.num_woken(), 0);
  EXPECT_EQ(buffer_->buffered_tokens(), 0);
  EXPECT_EQ(buffer_->state(), State::kFinishing);
  writer_.Complete(true);
  EXPECT_EQ(Last().aborted.code(), absl::StatusCode::kAborted);  // the first
}

TEST_F(StreamBufferStateTest, FinishingWriteDoneFinishesWithTheAbort) {
  OpenAccepted();
  writer_.hold = true;
  Token(1);
  pacer_.RunDue();  // token 1 in flight
  buffer_->Abort(absl::AbortedError("drain timeout"));
  clock_.Advance(absl::Milliseconds(4));
  writer_.Complete(true);
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().aborted.code(), absl::StatusCode::kAborted);
  // The write in flight reached the client and counts.
  EXPECT_EQ(Last().last_delivered, absl::UnixEpoch() + absl::Milliseconds(4));
  EXPECT_EQ(observer_.delivered, std::vector<int32_t>{1});
  EXPECT_EQ(buffer_->state(), State::kDone);
}

TEST_F(StreamBufferStateTest, FinishingWriteFailedFinishesWithTheAbort) {
  OpenWriting();
  buffer_->Abort(absl::AbortedError("drain timeout"));
  writer_.Complete(false);
  EXPECT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().aborted.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(buffer_->state(), State::kDone);
}

// --- kDone -------------------------------------------------------------------

TEST_F(StreamBufferStateTest, DoneIgnoresEveryEvent) {
  OpenAccepted();
  Finish();
  pacer_.RunDue();
  ASSERT_EQ(buffer_->state(), State::kDone);
  const size_t written = writer_.writes.size();
  Token(1);
  Finish();
  buffer_->Abort(absl::AbortedError("late"));
  EXPECT_EQ(buffer_->Release(clock_.Now()), absl::InfiniteFuture());
  buffer_->OnWriteDone(true);
  buffer_->Detach();
  EXPECT_EQ(pacer_.num_woken(), 0);
  EXPECT_EQ(writer_.writes.size(), written);
  EXPECT_EQ(buffer_->buffered_tokens(), 0);
  EXPECT_EQ(observer_.closed, 1);
}

// --- Stop strings ----------------------------------------------------------

// The text is made on the pacer thread: a stop string found there ends the
// stream at it and stops the request once, one step late; what the engine
// generated meanwhile is dropped, and the Finished says kStop with the
// string and the tokens delivered, however the engine ended.
TEST_F(StreamBufferStateTest, AStopStringEndsTheStreamAndStopsTheRequestOnce) {
  vocab_ = {{1, "he"}, {2, "llo"}, {3, " wo"}, {4, "rld"}};
  DeliveryOptions options;
  options.stop.strings = {"o w"};
  OpenWith(options);
  Accept();
  pacer_.RunDue();
  Token(1, "he");
  Token(2, "llo");
  pacer_.RunDue();
  EXPECT_EQ(Last().ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(Last().text, "hell");  // "o" held: it may start "o w"
  EXPECT_TRUE(stopped_.empty());
  Token(3, " wo");
  EXPECT_TRUE(stopped_.empty());  // the engine side makes no text
  pacer_.RunDue();
  ASSERT_EQ(stopped_.size(), 1u);
  EXPECT_EQ(stopped_[0].id, 7u);
  EXPECT_EQ(stopped_[0].stop, "o w");
  EXPECT_EQ(stopped_[0].tokens, 3);
  EXPECT_EQ(Last().ids, std::vector<int32_t>{3});
  EXPECT_EQ(Last().text, "");  // nothing of the match
  Token(4, "rld");  // generated before the stop took effect: dropped
  scheduler::FinishInfo info;  // as the scheduler ends it (StopAtString)
  info.reason = scheduler::FinishReason::kStop;
  info.stop_string = "o w";
  info.usage.completion_tokens = 3;
  buffer_->OnFinished(info);
  pacer_.RunDue();
  ASSERT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().finish.reason, scheduler::FinishReason::kStop);
  EXPECT_EQ(Last().finish.stop_string, "o w");
  EXPECT_EQ(Last().finish.usage.completion_tokens, 3);
  EXPECT_EQ(stopped_.size(), 1u);
  EXPECT_EQ(buffer_->buffered_tokens(), 0);
  for (const auto& w : writer_.writes) {
    EXPECT_EQ(std::count(w.out.ids.begin(), w.out.ids.end(), 4), 0);
  }
}

// The engine may end by itself (EOS, max_tokens) before the stop arrives:
// the stream still ends at the string, with the usage it delivered.
TEST_F(StreamBufferStateTest, AStopStringWinsOverTheEnginesOwnEnd) {
  vocab_ = {{1, "ab"}, {2, "cd"}, {3, "ef"}};
  DeliveryOptions options;
  options.stop.strings = {"bc"};
  options.stop.include = true;
  OpenWith(options);
  Accept();
  Token(1, "ab");
  Token(2, "cd");
  Token(3, "ef");
  scheduler::FinishInfo info;
  info.reason = scheduler::FinishReason::kLength;
  info.usage.completion_tokens = 3;
  buffer_->OnFinished(info);  // all before the pacer's turn
  pacer_.RunDue();
  ASSERT_EQ(stopped_.size(), 1u);
  EXPECT_EQ(stopped_[0].tokens, 2);
  ASSERT_EQ(Last().kind, Kind::kFinished);
  EXPECT_EQ(Last().finish.reason, scheduler::FinishReason::kStop);
  EXPECT_EQ(Last().finish.stop_string, "bc");
  EXPECT_EQ(Last().finish.usage.completion_tokens, 2);
  std::string text;
  std::vector<int32_t> ids;
  for (const auto& w : writer_.writes) {
    text += w.out.text;
    ids.insert(ids.end(), w.out.ids.begin(), w.out.ids.end());
  }
  EXPECT_EQ(text, "abc");  // with the string (include)
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
}

// --- Chat output
// ---------------------------------------------------------------

// What the client got over all writes: content, reasoning, tool calls.
struct ChatSeen {
  std::string content, reasoning;
  std::vector<chat::ChatToolCallDelta> calls;
};

ChatSeen Concatenate(const std::vector<testing::FakeStreamWriter::Written>& w) {
  Outgoing all;
  for (const auto& written : w) {
    if (written.out.kind != Kind::kDelta) continue;
    chat::ChatOutputDelta d;
    d.content = written.out.text;
    d.reasoning = written.out.reasoning;
    d.tool_calls = written.out.tool_calls;
    AppendChatDelta(std::move(d), &all);
  }
  return {all.text, all.reasoning, all.tool_calls};
}

TEST_F(StreamBufferStateTest, ChatOutputIsSplitWhetherWritesCoalesceOrNot) {
  chat::ChatOutputFormat format;
  format.reasoning_open = "<think>";
  format.reasoning_close = "</think>";
  format.tool_calls = chat::ToolCallFormat::kHermes;
  const std::vector<std::string> pieces = {
      "<think>",
      "plan",
      "</think>",
      "Sure",
      "<tool_call>\n{\"name\": \"f\", ",
      "\"arguments\": {\"x\": [1, 2]}}\n</tool",
      "_call>",
      " <tool"};
  // The oracle: the parser alone over the same text.
  chat::ChatOutputParser parser(format, /*id_seed=*/5);
  Outgoing expected;
  for (const std::string& p : pieces)
    AppendChatDelta(parser.Push(p), &expected);
  AppendChatDelta(parser.Finish(), &expected);
  ASSERT_EQ(expected.tool_calls.size(), 1u);

  for (bool coalesce : {false, true}) {
    SCOPED_TRACE(coalesce ? "coalesced" : "one write per token");
    writer_.writes.clear();
    for (size_t i = 0; i < pieces.size(); ++i) {
      vocab_[static_cast<int32_t>(i)] = pieces[i];
    }
    DeliveryOptions options;
    options.chat_output = format;
    options.tool_call_id_seed = 5;
    OpenWith(options);
    writer_.Bind(buffer_);
    Accept();
    for (size_t i = 0; i < pieces.size(); ++i) {
      Token(static_cast<int32_t>(i), pieces[i]);
      if (!coalesce) pacer_.RunDue();
    }
    Finish();
    pacer_.RunDue();
    ASSERT_EQ(Last().kind, Kind::kFinished);
    EXPECT_TRUE(Last().called_tools);
    const ChatSeen seen = Concatenate(writer_.writes);
    EXPECT_EQ(seen.content, expected.text);
    EXPECT_EQ(seen.reasoning, expected.reasoning);
    EXPECT_EQ(seen.reasoning, "plan");
    ASSERT_EQ(seen.calls.size(), 1u);
    EXPECT_EQ(seen.calls[0].name, "f");
    EXPECT_EQ(seen.calls[0].id, expected.tool_calls[0].id);
    EXPECT_EQ(seen.calls[0].arguments, expected.tool_calls[0].arguments);
    EXPECT_EQ(seen.content.find("<tool_call>"), std::string::npos);
  }
}

TEST_F(StreamBufferStateTest, ChatOutputPrefixIsParsedFirst) {
  chat::ChatOutputFormat format;
  format.tool_calls = chat::ToolCallFormat::kHermes;
  vocab_ = {{1, "{\"x\": 1}}"}, {2, "\n</tool_call>"}};
  DeliveryOptions options;
  options.chat_output = format;
  options.chat_output_prefix = "<tool_call>\n{\"name\": \"f\", \"arguments\": ";
  OpenWith(options);
  writer_.Bind(buffer_);
  Accept();
  pacer_.RunDue();
  // The call is announced from the prefix alone, before any token.
  ASSERT_EQ(writer_.writes.size(), 2u);
  ASSERT_EQ(writer_.writes[1].out.tool_calls.size(), 1u);
  EXPECT_EQ(writer_.writes[1].out.tool_calls[0].name, "f");
  EXPECT_TRUE(writer_.writes[1].out.ids.empty());
  Token(1, "{\"x\": 1}}");
  Token(2, "\n</tool_call>");
  Finish();
  pacer_.RunDue();
  ASSERT_EQ(Last().kind, Kind::kFinished);
  EXPECT_TRUE(Last().called_tools);
  const ChatSeen seen = Concatenate(writer_.writes);
  ASSERT_EQ(seen.calls.size(), 1u);
  EXPECT_EQ(seen.calls[0].name, "f");
  EXPECT_EQ(seen.calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(seen.content, "");
}

TEST_F(StreamBufferStateTest, PlainRequestsKeepTheirTextWhole) {
  vocab_ = {{1, "<think>a</think><tool_call>"}};
  OpenAccepted();
  Token(1, "<think>a</think><tool_call>");
  Finish();
  pacer_.RunDue();
  EXPECT_EQ(writer_.writes[1].out.text, "<think>a</think><tool_call>");
  EXPECT_TRUE(writer_.writes[1].out.reasoning.empty());
  EXPECT_FALSE(Last().called_tools);
}

}  // namespace
}  // namespace paceline::server
