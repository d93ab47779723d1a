// IntakePool: jobs run off the caller's thread, the next job comes from
// the tenant with the least CPU time charged (by weight), a tenant's
// backlog is bounded with a retry hint, and Stop runs what is queued.

#include "server/frontend/intake_pool.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "scheduler/clock.h"
#include "scheduler/retry_hint.h"

namespace paceline::server {
namespace {

// Burns about `cpu` of this thread's CPU time (the pool charges CPU time,
// not wall time, so sleeping would charge nothing).
void Spin(absl::Duration cpu) {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  const absl::Duration end = absl::DurationFromTimespec(ts) + cpu;
  volatile uint64_t x = 0;
  do {
    for (int i = 0; i < 1000; ++i) x = x + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  } while (absl::DurationFromTimespec(ts) < end);
}

// Records the order jobs ran in.
class Order {
 public:
  IntakePool::Job Job(std::string name, absl::Duration cpu = {}) {
    return [this, name = std::move(name), cpu] {
      if (cpu > absl::ZeroDuration()) Spin(cpu);
      absl::MutexLock lock(&mu_);
      ran_.push_back(name);
    };
  }
  std::vector<std::string> ran() {
    absl::MutexLock lock(&mu_);
    return ran_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> ran_;
};

// A job that holds the pool's one thread until released.
struct Gate {
  absl::Notification entered;
  absl::Notification release;
  IntakePool::Job Job(absl::Duration cpu = {}) {
    return [this, cpu] {
      if (cpu > absl::ZeroDuration()) Spin(cpu);
      entered.Notify();
      release.WaitForNotification();
    };
  }
};

TEST(IntakePoolTest, RunsJobsOnItsOwnThread) {
  IntakePool pool(IntakeOptions{.threads = 1});
  absl::Notification done;
  std::thread::id ran_on;
  ASSERT_TRUE(pool.Post("a", 1,
                        [&] {
                          ran_on = std::this_thread::get_id();
                          done.Notify();
                        })
                  .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(IntakePoolTest, AnotherTenantWaitsOnlyForWhatIsRunning) {
  IntakePool pool(IntakeOptions{.threads = 1});
  Gate gate;
  Order order;
  // Tenant a holds the thread (having used CPU), then queues five more;
  // b's one job arrives last but runs next.
  ASSERT_TRUE(pool.Post("a", 1, gate.Job(absl::Milliseconds(5))).ok());
  ASSERT_TRUE(gate.entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(pool.Post("a", 1, order.Job("a")).ok());
  }
  ASSERT_TRUE(pool.Post("b", 1, order.Job("b")).ok());
  gate.release.Notify();
  pool.Stop();
  const std::vector<std::string> ran = order.ran();
  ASSERT_EQ(ran.size(), 6u);
  EXPECT_EQ(ran[0], "b");
  EXPECT_GT(pool.charged("a"), absl::Milliseconds(4));
}

TEST(IntakePoolTest, TheTenantWithLessChargedGoesFirst) {
  IntakePool pool(IntakeOptions{.threads = 1});
  Order order;
  {
    // Charge a ~20 ms and b ~2 ms of CPU.
    Gate gate;
    ASSERT_TRUE(
        pool.Post("a", 1, order.Job("a0", absl::Milliseconds(20))).ok());
    ASSERT_TRUE(pool.Post("b", 1, order.Job("b0", absl::Milliseconds(2))).ok());
    ASSERT_TRUE(pool.Post("c", 1, gate.Job()).ok());
    ASSERT_TRUE(gate.entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
    // While c holds the thread, a and b queue one job each: a first.
    ASSERT_TRUE(pool.Post("a", 1, order.Job("a1")).ok());
    ASSERT_TRUE(pool.Post("b", 1, order.Job("b1")).ok());
    gate.release.Notify();
    pool.Stop();
  }
  const std::vector<std::string> ran = order.ran();
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_EQ(ran[2], "b1") << "b has less CPU charged";
  EXPECT_EQ(ran[3], "a1");
  EXPECT_GT(pool.charged("a"), pool.charged("b"));
}

TEST(IntakePoolTest, WeightDividesTheCharge) {
  IntakePool pool(IntakeOptions{.threads = 1});
  Order order;
  Gate gate;
  // Both charged about the same CPU; heavy's weight is 10, so it counts
  // a tenth and goes first.
  ASSERT_TRUE(
      pool.Post("light", 1, order.Job("l0", absl::Milliseconds(10))).ok());
  ASSERT_TRUE(
      pool.Post("heavy", 10, order.Job("h0", absl::Milliseconds(10))).ok());
  ASSERT_TRUE(pool.Post("gate", 1, gate.Job()).ok());
  ASSERT_TRUE(gate.entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(pool.Post("light", 1, order.Job("l1")).ok());
  ASSERT_TRUE(pool.Post("heavy", 10, order.Job("h1")).ok());
  gate.release.Notify();
  pool.Stop();
  const std::vector<std::string> ran = order.ran();
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_EQ(ran[2], "h1");
  EXPECT_EQ(ran[3], "l1");
}

TEST(IntakePoolTest, ATenantsBacklogIsBoundedWithARetryHint) {
  IntakePool pool(IntakeOptions{.threads = 1, .max_queued_per_tenant = 3});
  Gate gate;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.Post("gate", 1, gate.Job()).ok());
  ASSERT_TRUE(gate.entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Post("a", 1, [&] { ++ran; }).ok());
  }
  const absl::Status refused = pool.Post("a", 1, [&] { ++ran; });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("intake.max_queued_per_tenant"),
            std::string::npos)
      << refused;
  EXPECT_TRUE(scheduler::RetryAfter(refused).has_value());
  // Another tenant is not refused for a's backlog.
  EXPECT_TRUE(pool.Post("b", 1, [&] { ++ran; }).ok());
  EXPECT_EQ(pool.queued(), 4);
  gate.release.Notify();
  pool.Stop();
  EXPECT_EQ(ran.load(), 4) << "the refused job never ran";
  EXPECT_EQ(pool.queued(), 0);
}

TEST(IntakePoolTest, StopRunsWhatIsQueuedThenRefuses) {
  IntakePool pool(IntakeOptions{.threads = 2});
  Gate gate;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.Post("a", 1, gate.Job()).ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(pool.Post(i % 2 ? "a" : "b", 1, [&] { ++ran; }).ok());
  }
  std::thread stopper([&] { pool.Stop(); });
  ASSERT_TRUE(gate.entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  gate.release.Notify();
  stopper.join();
  EXPECT_EQ(ran.load(), 20);
  EXPECT_EQ(pool.Post("a", 1, [&] { ++ran; }).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(ran.load(), 20);
}

class RecordingObserver : public IntakeObserver {
 public:
  void OnIntakeJob(absl::string_view tenant, absl::Duration queued,
                   absl::Duration cpu) override {
    absl::MutexLock lock(&mu_);
    tenants.emplace_back(tenant);
    waits.push_back(queued);
    cpus.push_back(cpu);
  }
  absl::Mutex mu_;
  std::vector<std::string> tenants;
  std::vector<absl::Duration> waits;
  std::vector<absl::Duration> cpus;
};

TEST(IntakePoolTest, TellsTheObserverEachJobsWaitAndCpu) {
  RecordingObserver observer;
  scheduler::ManualClock clock;
  {
    IntakePool pool(IntakeOptions{
        .threads = 1, .observer = &observer, .clock = &clock});
    Gate gate;
    ASSERT_TRUE(pool.Post("a", 1, gate.Job()).ok());
    ASSERT_TRUE(gate.entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
    ASSERT_TRUE(pool.Post("b", 1, [] { Spin(absl::Milliseconds(3)); }).ok());
    clock.Advance(absl::Milliseconds(5));  // b's job waits this
    gate.release.Notify();
  }  // the destructor stops the pool
  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.tenants.size(), 2u);
  EXPECT_EQ(observer.tenants[1], "b");
  EXPECT_EQ(observer.waits[0], absl::ZeroDuration());
  EXPECT_EQ(observer.waits[1], absl::Milliseconds(5));
  EXPECT_GE(observer.cpus[1], absl::Milliseconds(3));
  EXPECT_LT(observer.cpus[0], observer.cpus[1])
      << "a's job waited, it did not compute";
}

}  // namespace
}  // namespace paceline::server
