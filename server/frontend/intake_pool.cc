#include "server/frontend/intake_pool.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/retry_hint.h"

namespace paceline::server {
namespace {

// The calling thread's CPU time so far.
absl::Duration ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

constexpr absl::Duration kMinRetryHint = absl::Milliseconds(10);

}  // namespace

IntakePool::IntakePool(IntakeOptions options) : options_(options) {
  const int threads = std::max(1, options_.threads);
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { ThreadMain(); });
  }
}

IntakePool::~IntakePool() { Stop(); }

absl::Status IntakePool::Post(absl::string_view tenant, double weight,
                              Job job) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    return absl::UnavailableError("the server is shutting down");
  }
  auto [it, inserted] = accounts_.try_emplace(tenant);
  Account& a = it->second;
  if (inserted) a.weight = weight > 0 ? weight : 1;
  if (static_cast<int64_t>(a.waiting.size()) >=
      options_.max_queued_per_tenant) {
    return scheduler::ResourceExhaustedWithRetry(
        absl::StrCat("tenant '", tenant, "' has ", a.waiting.size(),
                     " requests waiting to be tokenized, the server's "
                     "intake.max_queued_per_tenant"),
        RetryHintLocked(a));
  }
  // Back from idle: level with the last one served, no banked credit.
  if (a.waiting.empty())
    a.virtual_seconds = std::max(a.virtual_seconds, floor_);
  a.waiting.push_back(Queued{std::move(job), options_.clock->Now()});
  ++queued_;
  return absl::OkStatus();
}

void IntakePool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int64_t IntakePool::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

absl::Duration IntakePool::charged(absl::string_view tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = accounts_.find(tenant);
  return it == accounts_.end() ? absl::ZeroDuration() : it->second.charged;
}

std::string IntakePool::PickLocked() const {
  const std::pair<const std::string, Account>* best = nullptr;
  for (const auto& entry : accounts_) {
    const Account& a = entry.second;
    if (a.waiting.empty()) continue;
    if (best == nullptr || a.virtual_seconds < best->second.virtual_seconds ||
        (a.virtual_seconds == best->second.virtual_seconds &&
         a.last_served < best->second.last_served)) {
      best = &entry;
    }
  }
  return best->first;
}

absl::Duration IntakePool::RetryHintLocked(const Account& a) const {
  // The tenant's own queue, at its mean job's cost, over the threads.
  const absl::Duration mean =
      a.jobs_done > 0 ? a.charged / a.jobs_done : kMinRetryHint;
  const int64_t threads = std::max<int64_t>(1, options_.threads);
  return std::max(kMinRetryHint,
                  mean * static_cast<int64_t>(a.waiting.size()) / threads);
}

void IntakePool::ThreadMain() {
  for (;;) {
    std::string tenant;
    Queued next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](IntakePool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->queued_ > 0 || p->stopping_;
          },
          this));
      if (queued_ == 0) return;  // stopping, nothing left
      tenant = PickLocked();
      Account& a = accounts_.find(tenant)->second;
      next = std::move(a.waiting.front());
      a.waiting.pop_front();
      --queued_;
      floor_ = a.virtual_seconds;
      a.last_served = ++serves_;
    }
    const absl::Time started = options_.clock->Now();
    const absl::Duration cpu_before = ThreadCpuTime();
    std::move(next.job)();
    const absl::Duration cpu = ThreadCpuTime() - cpu_before;
    {
      absl::MutexLock lock(&mu_);
      Account& a = accounts_.find(tenant)->second;
      a.charged += cpu;
      a.virtual_seconds += absl::ToDoubleSeconds(cpu) / a.weight;
      ++a.jobs_done;
    }
    if (options_.observer != nullptr) {
      options_.observer->OnIntakeJob(tenant, started - next.posted, cpu);
    }
  }
}

}  // namespace paceline::server
