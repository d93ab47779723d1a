#include "tools/paceline/bench_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/paceline/grpc_client.h"

namespace paceline::tools::bench {
namespace {

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::optional<double> Between(bool has_from,
                              const google::protobuf::Timestamp& from,
                              bool has_to,
                              const google::protobuf::Timestamp& to) {
  if (!has_from || !has_to) return std::nullopt;
  return static_cast<double>(to.seconds() - from.seconds()) +
         static_cast<double>(to.nanos() - from.nanos()) * 1e-9;
}

}  // namespace

// One Generate stream, timed. `origin` is the run's start.
RequestRecord GrpcSender::Send(const Planned& p, Clock::time_point origin) {
  pb::Paceline::Stub& stub = stub_;
  const BenchFlags& flags = flags_;
  RequestRecord rec;
  rec.tenant = p.tenant;
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization",
                  absl::StrCat("Bearer ", flags.tenants[p.tenant].key));
  if (flags.timeout) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::duration<double>(*flags.timeout)));
  }
  const Clock::time_point sent = Clock::now();
  rec.sent = Seconds(sent - origin);
  std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>> reader =
      stub.Generate(&ctx, p.request);
  pb::GenerateResponse event;
  std::optional<pb::Finished> finished;
  std::optional<Clock::time_point> first, last;
  while (reader->Read(&event)) {
    const Clock::time_point now = Clock::now();
    if (event.has_accepted()) {
      rec.prompt_tokens = event.accepted().prompt_tokens();
    } else if (event.has_delta()) {
      const int k = event.delta().token_ids_size();
      if (k == 0) continue;
      if (first) rec.itl_delivered.push_back(Seconds(now - *last));
      if (!first) first = now;
      rec.itl_delivered.insert(rec.itl_delivered.end(), k - 1, 0.0);
      last = now;
      rec.delivered_tokens += k;
    } else if (event.has_finished()) {
      finished = event.finished();
    }
  }
  const grpc::Status s = reader->Finish();
  rec.done = Seconds(Clock::now() - origin);
  if (!s.ok()) {
    rec.error = FromGrpc(s, ctx).ToString();
    return rec;
  }
  if (!finished) {
    rec.error = "the stream ended without a Finished message";
    return rec;
  }
  if (finished->reason() == pb::FINISH_REASON_ERROR ||
      finished->reason() == pb::FINISH_REASON_CANCELLED) {
    rec.error = absl::StrCat("generation ended early: ", finished->message());
    return rec;
  }
  rec.ok = true;
  const pb::Usage& u = finished->usage();
  const pb::Timings& t = finished->timings();
  rec.prompt_tokens = u.prompt_tokens();
  rec.completion_tokens = u.completion_tokens();
  rec.ttft_computed =
      Between(t.has_queued(), t.queued(), t.has_first_token(), t.first_token());
  rec.e2e_computed = Between(t.has_queued(), t.queued(),
                             t.has_generation_done(), t.generation_done());
  rec.queue_computed = Between(t.has_queued(), t.queued(),
                               t.has_first_scheduled(), t.first_scheduled());
  if (u.completion_tokens() >= 2) {
    if (auto span = Between(t.has_first_token(), t.first_token(),
                            t.has_generation_done(), t.generation_done())) {
      rec.tpot_computed = *span / (u.completion_tokens() - 1);
    }
  }
  if (first) {
    rec.ttft_delivered = Seconds(*first - sent);
    rec.e2e_delivered = Seconds(*last - sent);
    if (rec.delivered_tokens >= 2) {
      rec.tpot_delivered = Seconds(*last - *first) / (rec.delivered_tokens - 1);
    }
  }
  return rec;
}

namespace {

// Runs one load level and collects its records; draws a progress bar on
// stderr meanwhile when asked.
class LevelRun {
 public:
  LevelRun(Sender& sender, const BenchFlags& flags, const Workload& workload,
           uint64_t salt, std::optional<int64_t> requests,
           std::optional<double> duration)
      : sender_(sender),
        flags_(flags),
        workload_(workload),
        salt_(salt),
        requests_(requests),
        duration_(duration) {}

  RunResult Run(bool open_loop, double level, bool progress) {
    origin_ = Clock::now();
    std::thread bar;
    if (progress) bar = std::thread([&] { DrawProgress(open_loop, level); });
    if (open_loop) {
      OpenLoop(level);
    } else if (flags_.per_tenant) {
      PerTenantLoops(static_cast<int>(level));
    } else {
      ClosedLoop(static_cast<int>(level));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      over_ = true;
    }
    cv_.notify_all();
    if (bar.joinable()) bar.join();
    RunResult run;
    run.open_loop = open_loop;
    run.level = level;
    run.records = std::move(records_);
    for (const RequestRecord& r : run.records) {
      run.duration = std::max(run.duration, r.done);
    }
    return run;
  }

 private:
  bool TimeUp() const {
    return duration_ && Seconds(Clock::now() - origin_) >= *duration_;
  }

  void Record(RequestRecord rec) {
    std::lock_guard<std::mutex> lock(mu_);
    ++finished_;
    if (!rec.ok) ++failed_;
    records_.push_back(std::move(rec));
  }

  void ClosedLoop(int concurrency) {
    std::atomic<int64_t> next{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < concurrency; ++w) {
      workers.emplace_back([&] {
        for (;;) {
          if (TimeUp()) return;
          const int64_t i = next++;
          if (requests_ && i >= *requests_) return;
          Record(sender_.Send(workload_.Make(salt_, i), origin_));
        }
      });
    }
    for (std::thread& t : workers) t.join();
  }

  // `concurrency` streams of each tenant, each tenant taking its own
  // requests 0, 1, ... (up to `requests_` of them).
  void PerTenantLoops(int concurrency) {
    const size_t n = flags_.tenants.size();
    std::vector<std::atomic<int64_t>> next(n);
    std::vector<std::thread> workers;
    for (size_t t = 0; t < n; ++t) {
      for (int w = 0; w < concurrency; ++w) {
        workers.emplace_back([&, t] {
          for (;;) {
            if (TimeUp()) return;
            const int64_t i = next[t]++;
            if (requests_ && i >= *requests_) return;
            Record(sender_.Send(workload_.Make(salt_, i, static_cast<int>(t)),
                                origin_));
          }
        });
      }
    }
    for (std::thread& t : workers) t.join();
  }

  // A thread per request, started at its arrival time; finished ones are
  // joined as the loop goes.
  void OpenLoop(double rate) {
    struct InFlight {
      std::thread thread;
      std::atomic<bool> done{false};
    };
    std::vector<std::unique_ptr<InFlight>> in_flight;
    bench::ArrivalProcess arrivals(
        rate, flags_.burstiness, flags_.seed ^ (salt_ * 0x9e3779b97f4a7c15ULL));
    double at = 0;  // the first request goes at once
    for (int64_t i = 0; !requests_ || i < *requests_; ++i) {
      if (i > 0) at += arrivals.NextGap();
      if (duration_ && at >= *duration_) break;
      std::this_thread::sleep_until(origin_ +
                                    std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(at)));
      auto slot = std::make_unique<InFlight>();
      InFlight* raw = slot.get();
      raw->thread = std::thread([this, raw, i] {
        Record(sender_.Send(workload_.Make(salt_, i), origin_));
        raw->done = true;
      });
      in_flight.push_back(std::move(slot));
      std::erase_if(in_flight, [](std::unique_ptr<InFlight>& f) {
        if (!f->done) return false;
        f->thread.join();
        return true;
      });
    }
    for (auto& f : in_flight) f->thread.join();
  }

  void DrawProgress(bool open_loop, double level) {
    const std::string label = open_loop ? absl::StrFormat("rate %g/s", level)
                                        : absl::StrFormat("c=%g", level);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const bool over = cv_.wait_for(lock, std::chrono::milliseconds(200),
                                     [&] { return over_; });
      const double elapsed = Seconds(Clock::now() - origin_);
      double fraction = 0;
      if (requests_) {
        const int64_t total =
            *requests_ * (flags_.per_tenant
                              ? static_cast<int64_t>(flags_.tenants.size())
                              : 1);
        fraction = static_cast<double>(finished_) / static_cast<double>(total);
      }
      if (duration_) fraction = std::max(fraction, elapsed / *duration_);
      fraction = std::clamp(fraction, 0.0, 1.0);
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(fraction * kWidth);
      std::cerr << absl::StrFormat("\r%-12s [%s%s] %d done, %d failed, %.1f s ",
                                   label, std::string(filled, '#'),
                                   std::string(kWidth - filled, '.'), finished_,
                                   failed_, elapsed)
                << std::flush;
      if (over) break;
    }
    std::cerr << "\n" << std::flush;
  }

  Sender& sender_;
  const BenchFlags& flags_;
  const Workload& workload_;
  const uint64_t salt_;
  const std::optional<int64_t> requests_;
  const std::optional<double> duration_;
  Clock::time_point origin_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool over_ = false;                   // guarded by mu_
  int64_t finished_ = 0;                // guarded by mu_
  int64_t failed_ = 0;                  // guarded by mu_
  std::vector<RequestRecord> records_;  // guarded by mu_
};
}  // namespace

Workload::Workload(const BenchFlags& flags, int64_t vocab_size)
    : flags_(flags), vocab_size_(std::max<int64_t>(vocab_size, 1)) {
  std::vector<double> shares;
  for (const Tenant& t : flags.tenants) shares.push_back(t.share);
  tenant_weights_ = std::move(shares);
}

Planned Workload::Make(uint64_t salt, int64_t i,
                       std::optional<int> tenant) const {
  std::vector<uint32_t> words = {
      static_cast<uint32_t>(flags_.seed),
      static_cast<uint32_t>(flags_.seed >> 32), static_cast<uint32_t>(salt),
      static_cast<uint32_t>(i),
      static_cast<uint32_t>(static_cast<uint64_t>(i) >> 32)};
  if (tenant) words.push_back(static_cast<uint32_t>(*tenant));
  std::seed_seq seq(words.begin(), words.end());
  std::mt19937_64 rng(seq);
  Planned p;
  p.salt = salt;
  p.index = i;
  p.tenant = std::discrete_distribution<int>(tenant_weights_.begin(),
                                             tenant_weights_.end())(rng);
  if (tenant) p.tenant = *tenant;
  pb::GenerateRequest& r = p.request;
  int32_t max_tokens = flags_.max_tokens.Draw(rng);
  if (!flags_.prompts.empty()) {
    const FilePrompt& fp =
        flags_.prompts[static_cast<size_t>(i) % flags_.prompts.size()];
    r.set_text(fp.text);
    if (fp.max_tokens) max_tokens = *fp.max_tokens;
  } else {
    // Random ids above the usual specials (unknown, BOS, EOS: 0-2), so
    // prompts are distinct and the prefix cache does not shortcut them.
    const int32_t lo = vocab_size_ > 3 ? 3 : 0;
    std::uniform_int_distribution<int32_t> id(
        lo, static_cast<int32_t>(vocab_size_ - 1));
    const int32_t n = flags_.prompt_tokens.Draw(rng);
    for (int32_t k = 0; k < n; ++k) r.mutable_token_ids()->add_ids(id(rng));
  }
  r.mutable_stopping()->set_max_tokens(max_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  r.mutable_delivery()->set_pace_tokens_per_s(flags_.pace);
  r.set_priority(flags_.tenants[p.tenant].priority);
  if (flags_.temperature)
    r.mutable_sampling()->set_temperature(*flags_.temperature);
  r.mutable_sampling()->set_seed(rng());
  if (flags_.max_draft_tokens) {
    r.mutable_speculation()->set_max_draft_tokens(*flags_.max_draft_tokens);
  }
  return p;
}

RunResult RunLevel(Sender& sender, const BenchFlags& flags,
                   const Workload& workload, uint64_t salt,
                   std::optional<int64_t> requests,
                   std::optional<double> duration, bool open_loop, double level,
                   bool progress) {
  LevelRun run(sender, flags, workload, salt, requests, duration);
  return run.Run(open_loop, level, progress);
}

}  // namespace paceline::tools::bench
