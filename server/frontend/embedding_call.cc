// Frontend::Embed: an embedding call's requests, their sinks, and the
// hand-off of the finished call from the engine thread to the intake pool.

#include "server/frontend/embedding_call.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/token_sink.h"
#include "server/frontend/frontend.h"

namespace paceline::server {
namespace {

// One embedding call: its inputs' vectors as their requests finish. Ends
// once: every request finished OK, the first one failed, or it was
// aborted; then `done` is posted to the intake pool (run in place only
// when the pool refuses, i.e. once it has stopped). Abandon ends it
// without `done` (a refused submission).
class Collector {
 public:
  Collector(Frontend* frontend, const TenantPolicy* tenant, size_t inputs,
            int64_t prompt_tokens, EmbeddingsDone done)
      : frontend_(frontend), tenant_(tenant), done_(std::move(done)) {
    result_.vectors.resize(inputs);
    result_.prompt_tokens = prompt_tokens;
    remaining_ = inputs;
  }

  // The engine thread: input `index`'s request finished.
  void Finished(size_t index, const scheduler::FinishInfo& info) {
    if (!info.status.ok()) return Fail(info.status);
    if (info.embedding.empty()) {
      return Fail(
          absl::InternalError("an embedding request ended without one"));
    }
    EmbeddingsResult result;
    {
      absl::MutexLock lock(&mu_);
      if (ended_) return;
      result_.vectors[index] = info.embedding;
      if (--remaining_ > 0) return;
      ended_ = true;
      result = std::move(result_);
    }
    Post(std::move(result));
  }

  void Fail(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (ended_) return;
      ended_ = true;
    }
    Post(status);
  }

  void Abandon() {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }

 private:
  void Post(absl::StatusOr<EmbeddingsResult> result) {
    Frontend* frontend = frontend_;
    const void* call = this;
    auto job = [frontend, call, done = std::move(done_),
                result = std::make_shared<absl::StatusOr<EmbeddingsResult>>(
                    std::move(result))]() mutable {
      frontend->UnregisterEmbeddingCall(call);
      done(std::move(*result));
    };
    auto shared = std::make_shared<decltype(job)>(std::move(job));
    absl::Status posted = frontend_->RunOnIntake(
        *tenant_, Frontend::Work::kOther, [shared]() { (*shared)(); });
    if (!posted.ok()) (*shared)();
  }

  Frontend* const frontend_;
  const TenantPolicy* const tenant_;
  EmbeddingsDone done_;  // moved into the posted job at the end

  absl::Mutex mu_;
  EmbeddingsResult result_ ABSL_GUARDED_BY(mu_);
  size_t remaining_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

class EmbeddingSink final : public scheduler::TokenSink {
 public:
  EmbeddingSink(std::shared_ptr<Collector> call, size_t index)
      : call_(std::move(call)), index_(index) {}
  void OnAccepted(const scheduler::AcceptInfo&) override {}
  void OnTokens(const scheduler::TokenDelta&) override {}
  void OnFinished(const scheduler::FinishInfo& info) override {
    call_->Finished(index_, info);
  }

 private:
  const std::shared_ptr<Collector> call_;
  const size_t index_;
};

}  // namespace

absl::Status Frontend::CheckEmbeddingInputs(
    const TenantPolicy& tenant,
    const std::vector<std::vector<int32_t>>& inputs) const {
  if (config_->pooling == engine::PoolingType::kNone) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model has no pooling type (", config_->architecture,
        ".pooling_type): it is a generation model; /v1/embeddings needs an "
        "embedding model such as Qwen3-Embedding"));
  }
  if (inputs.empty()) return absl::InvalidArgumentError("no input to embed");
  const int64_t limit =
      tenant.max_prompt_tokens > 0
          ? std::min<int64_t>(tenant.max_prompt_tokens, config_->context_length)
          : config_->context_length;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t>& input = inputs[i];
    if (input.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " has no tokens"));
    }
    if (static_cast<int64_t>(input.size()) > limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " has ", input.size(), " tokens; at most ",
                       limit, " are allowed"));
    }
    for (int32_t id : input) {
      if (id < 0 || id >= config_->n_vocab) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", i, " holds token id ", id,
            ", outside the vocabulary [0, ", config_->n_vocab, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Frontend::Embed(const TenantPolicy& tenant,
                             std::vector<std::vector<int32_t>> inputs,
                             EmbeddingsDone done) {
  if (absl::Status s = CheckEmbeddingInputs(tenant, inputs); !s.ok()) {
    return Rejected(tenant.name, s);
  }
  int64_t prompt_tokens = 0;
  for (const auto& input : inputs) prompt_tokens += input.size();
  auto call = std::make_shared<Collector>(this, &tenant, inputs.size(),
                                          prompt_tokens, std::move(done));
  std::vector<scheduler::RequestId> submitted;
  absl::Status refused;
  {
    // Registered under mu_ with the submissions (as Submit), so neither an
    // abort nor the call's own end misses one.
    absl::MutexLock lock(&mu_);
    if (draining_) {
      refused = Rejected(tenant.name,
                         absl::UnavailableError("the server is draining; try "
                                                "another replica"));
    } else {
      for (size_t i = 0; i < inputs.size() && refused.ok(); ++i) {
        scheduler::RequestSpec spec;
        spec.tenant = tenant.name;
        spec.prompt = std::move(inputs[i]);
        spec.stop.max_tokens = 1;
        spec.embed = true;
        spec.priority =
            std::max(scheduler::PriorityClass::kStandard, tenant.max_priority);
        spec.cache_salt = tenant.cache_salt;
        spec.sink = std::make_shared<EmbeddingSink>(call, i);
        absl::StatusOr<scheduler::RequestId> id =
            loop_->Submit(std::move(spec));
        if (!id.ok()) {
          refused = id.status();
          break;
        }
        submitted.push_back(*id);
        live_[*id] =
            Entry{tenant.name, [call](const absl::Status& s) { call->Fail(s); },
                  clock_->Now(), call.get()};
      }
      if (!refused.ok()) {
        call->Abandon();
        for (scheduler::RequestId id : submitted) live_.erase(id);
      }
    }
  }
  if (refused.ok()) return absl::OkStatus();
  // (The serving loop reports its own refusals to the scheduler metrics.)
  for (scheduler::RequestId id : submitted) loop_->Cancel(id);
  return refused;
}

void Frontend::UnregisterEmbeddingCall(const void* call) {
  absl::MutexLock lock(&mu_);
  for (auto it = live_.begin(); it != live_.end();) {
    if (it->second.call == call) {
      live_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace paceline::server
