// ThreadSanitizer's view of an uninstrumented Abseil.
//
// Debian's Abseil is built without -fsanitize=thread, so the happens-before
// edges that absl::Mutex and absl::CondVar create are invisible to TSan:
// data guarded by an absl::Mutex on both sides is reported as a race. This
// file, linked into the TSan build's executables alone (tools/sanitize.sh),
// defines the public locking entry points itself (the executable's
// definitions take precedence over the shared library's, for gRPC's calls
// as for ours), tells TSan about the acquire and release each one performs,
// and forwards to Abseil's own code found with dlsym(RTLD_NEXT).
//
// Modelled as TSan models any lock: a release of the mutex's address before
// it is unlocked (or handed to a waiting condition), an acquire after it is
// locked again. Reader locks are treated as writer locks, which can only
// hide a reader-reader race, never invent one.

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

// The mangled names below are Debian 12's (Abseil 20220623, inline
// namespace debian3); another Abseil fails here, not at run time.
static_assert(std::is_same_v<absl::Mutex, absl::debian3::Mutex>,
              "tsan_absl_sync.cc names Debian 12's Abseil symbols");

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

template <typename Fn>
Fn Real(const char* symbol) {
  void* address = dlsym(RTLD_NEXT, symbol);
  if (address == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in Abseil\n", symbol);
    std::abort();
  }
  return reinterpret_cast<Fn>(address);
}

using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Time;

using PlainFn = void (*)(Mutex*);
using TryFn = bool (*)(Mutex*);
using WhenFn = void (*)(Mutex*, const Condition&);
using WhenForFn = bool (*)(Mutex*, const Condition&, Duration);
using WhenUntilFn = bool (*)(Mutex*, const Condition&, Time);
using WaitFn = void (*)(CondVar*, Mutex*);
using WaitForFn = bool (*)(CondVar*, Mutex*, Duration);
using WaitUntilFn = bool (*)(CondVar*, Mutex*, Time);

#define PACELINE_ABSL(name) "_ZN4absl7debian3" name

// A condition evaluated the way TSan should see it: with the mutex held.
// Abseil evaluates a waiter's condition inside its own code — in the
// waiting thread after it reacquires the mutex internally, or in the thread
// that is unlocking — where none of the entry points below run, so the
// caller's condition is wrapped in an acquire before and a release after.
class GuardedCondition {
 public:
  GuardedCondition(Mutex* mu, const Condition& cond)
      : mu_(mu), cond_(&cond), guarded_(&GuardedCondition::Eval, this) {}
  const Condition& get() const { return guarded_; }

 private:
  static bool Eval(GuardedCondition* self) {
    __tsan_acquire(self->mu_);
    const bool holds = self->cond_->Eval();
    __tsan_release(self->mu_);
    return holds;
  }

  Mutex* const mu_;
  const Condition* const cond_;
  const Condition guarded_;
};

// Abseil's deadlock detector keeps a graph of every mutex, guarded by an
// internal spin lock TSan cannot see either (gRPC's mutexes reach it from
// their destructors): it is turned off before main, and TSan's own
// lock-order checking takes its place.
[[gnu::constructor]] void IgnoreAbseilDeadlockGraph() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace

namespace absl {
inline namespace debian3 {

void Mutex::Lock() {
  static const auto real = Real<PlainFn>(PACELINE_ABSL("5Mutex4LockEv"));
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static const auto real = Real<PlainFn>(PACELINE_ABSL("5Mutex10ReaderLockEv"));
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static const auto real = Real<PlainFn>(PACELINE_ABSL("5Mutex6UnlockEv"));
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static const auto real =
      Real<PlainFn>(PACELINE_ABSL("5Mutex12ReaderUnlockEv"));
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static const auto real = Real<TryFn>(PACELINE_ABSL("5Mutex7TryLockEv"));
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real =
      Real<TryFn>(PACELINE_ABSL("5Mutex13ReaderTryLockEv"));
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      Real<WhenFn>(PACELINE_ABSL("5Mutex8LockWhenERKNS0_9ConditionE"));
  real(this, GuardedCondition(this, cond).get());
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real =
      Real<WhenFn>(PACELINE_ABSL("5Mutex14ReaderLockWhenERKNS0_9ConditionE"));
  real(this, GuardedCondition(this, cond).get());
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<WhenForFn>(PACELINE_ABSL(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  const bool result = real(this, GuardedCondition(this, cond).get(), timeout);
  __tsan_acquire(this);  // held on return either way
  return result;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<WhenUntilFn>(PACELINE_ABSL(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  const bool result = real(this, GuardedCondition(this, cond).get(), deadline);
  __tsan_acquire(this);
  return result;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<WhenForFn>(PACELINE_ABSL(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  const bool result = real(this, GuardedCondition(this, cond).get(), timeout);
  __tsan_acquire(this);
  return result;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<WhenUntilFn>(PACELINE_ABSL(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  const bool result = real(this, GuardedCondition(this, cond).get(), deadline);
  __tsan_acquire(this);
  return result;
}

// Await and the CondVar waits give the mutex up while they wait and hold it
// again on return.
void Mutex::Await(const Condition& cond) {
  static const auto real =
      Real<WhenFn>(PACELINE_ABSL("5Mutex5AwaitERKNS0_9ConditionE"));
  __tsan_release(this);
  real(this, GuardedCondition(this, cond).get());
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<WhenForFn>(PACELINE_ABSL(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  __tsan_release(this);
  const bool result = real(this, GuardedCondition(this, cond).get(), timeout);
  __tsan_acquire(this);
  return result;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<WhenUntilFn>(
      PACELINE_ABSL("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  __tsan_release(this);
  const bool result = real(this, GuardedCondition(this, cond).get(), deadline);
  __tsan_acquire(this);
  return result;
}

void CondVar::Wait(Mutex* mu) {
  static const auto real =
      Real<WaitFn>(PACELINE_ABSL("7CondVar4WaitEPNS0_5MutexE"));
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<WaitForFn>(
      PACELINE_ABSL("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE"));
  __tsan_release(mu);
  const bool result = real(this, mu, timeout);
  __tsan_acquire(mu);
  return result;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real = Real<WaitUntilFn>(
      PACELINE_ABSL("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE"));
  __tsan_release(mu);
  const bool result = real(this, mu, deadline);
  __tsan_acquire(mu);
  return result;
}

}  // namespace debian3
}  // namespace absl
