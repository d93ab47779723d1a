#include "server/frontend/frontend.h"

#include <random>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/echo.h"
#include "common/status_macros.h"
#include "engine/tokenizer/detokenizer.h"

namespace paceline::server {
namespace {

absl::Status Draining() {
  return absl::UnavailableError("the server is draining; try another replica");
}

// SplitMix64: the server's seeds for requests that name none.
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Frontend::Frontend(FrontendOptions options, const TenantAuthenticator* auth,
                   const engine::ModelConfig* config,
                   const engine::Tokenizer* tokenizer,
                   scheduler::ServingLoop* loop, Pacer* pacer,
                   scheduler::Clock* clock)
    : options_(std::move(options)),
      auth_(auth),
      config_(config),
      tokenizer_(tokenizer),
      chat_encoder_(tokenizer),
      loop_(loop),
      pacer_(pacer),
      clock_(clock),
      seed_state_(std::random_device{}()),
      intake_(options_.intake) {
  for (const TenantPolicy& t : options_.tenants) tenants_[t.name] = &t;
}

Frontend::~Frontend() = default;

absl::StatusOr<const TenantPolicy*> Frontend::Authenticate(
    absl::StatusOr<absl::string_view> authorization) const {
  absl::StatusOr<std::string> name =
      draining() ? absl::StatusOr<std::string>(Draining())
      : authorization.ok()
          ? auth_->Authenticate(*authorization)
          : absl::StatusOr<std::string>(authorization.status());
  if (!name.ok()) return Rejected("", name.status());
  auto it = tenants_.find(*name);
  if (it == tenants_.end()) {
    return Rejected("", absl::UnauthenticatedError(
                            "the API key names no configured tenant"));
  }
  return it->second;
}

absl::Status Frontend::RunOnIntake(const TenantPolicy& tenant, Work work,
                                   IntakePool::Job job) {
  absl::Status posted =
      intake_.Post(tenant.name, tenant.weight, std::move(job));
  if (!posted.ok() && work == Work::kGeneration) {
    return Rejected(tenant.name, posted);
  }
  return posted;
}

absl::StatusOr<BuiltRequest> Frontend::Build(
    const TenantPolicy& tenant, const v1::GenerateRequest& request) {
  absl::Status checked = CheckModel(request.model());
  if (!checked.ok()) return Rejected(tenant.name, checked);
  ModelLimits limits;
  limits.vocab_size = static_cast<int32_t>(config_->n_vocab);
  limits.context_length = config_->context_length;
  ChatInput chat;
  chat.templates = options_.model.chat_templates;
  chat.encoder = &chat_encoder_;
  chat.now = clock_->Now();
  const uint64_t seed =
      request.sampling().has_seed() ? request.sampling().seed() : NextSeed();
  absl::StatusOr<BuiltRequest> built =
      BuildRequest(request, tenant, *tokenizer_, limits, seed, chat,
                   options_.model.grammars);
  if (!built.ok()) return Rejected(tenant.name, built.status());
  return built;
}

Stream Frontend::OpenStream(BuiltRequest built, StreamWriter* writer,
                            std::shared_ptr<UnreadBytes> call_unread,
                            bool observed) {
  built.delivery.max_unread_bytes = options_.max_unread_bytes;
  built.delivery.call_unread = std::move(call_unread);
  Stream stream;
  stream.buffer = std::make_shared<StreamBuffer>(
      built.delivery, writer, clock_, pacer_,
      observed ? options_.delivery : nullptr, built.spec.tenant);
  stream.buffer->SetCanceller(
      [loop = loop_](scheduler::RequestId id) { loop->Cancel(id); });
  stream.buffer->SetStringStopper(
      [loop = loop_](scheduler::RequestId id, std::string stop,
                     int32_t tokens) {
        loop->StopAtString(id, std::move(stop), tokens);
      });
  stream.spec = std::move(built.spec);
  stream.spec.sink = stream.buffer;
  return stream;
}

absl::Status Frontend::Submit(absl::Span<Stream* const> streams,
                              const void* call) {
  if (streams.empty()) return absl::InternalError("Submit: no stream");
  const std::string tenant = streams.front()->spec.tenant;
  absl::Status refused;
  {
    // Registered under mu_ together with the submission, so AbortAll
    // never misses a request the loop has.
    absl::MutexLock lock(&mu_);
    // (The serving loop reports its own refusals to the scheduler metrics.)
    if (draining_) {
      refused = Rejected(tenant, Draining());
    } else {
      std::vector<scheduler::RequestSpec> specs;
      for (Stream* s : streams) specs.push_back(std::move(s->spec));
      absl::StatusOr<std::vector<scheduler::RequestId>> ids =
          loop_->SubmitGroup(std::move(specs));
      if (ids.ok()) {
        for (size_t i = 0; i < streams.size(); ++i) {
          streams[i]->id = (*ids)[i];
          live_[(*ids)[i]] =
              Entry{tenant,
                    [buffer = streams[i]->buffer](const absl::Status& s) {
                      buffer->Abort(s);
                    },
                    clock_->Now(), call};
        }
        return absl::OkStatus();
      }
      refused = ids.status();
    }
  }
  for (Stream* s : streams) s->buffer->Detach();  // nothing was written
  return refused;
}

void Frontend::Stop(const Stream& stream, const absl::Status& status) {
  if (stream.id != 0) loop_->Cancel(stream.id);
  stream.buffer->Abort(status);
}

void Frontend::Unregister(scheduler::RequestId id) {
  absl::MutexLock lock(&mu_);
  live_.erase(id);
}

absl::Status Frontend::Cancel(const TenantPolicy& tenant,
                              scheduler::RequestId id) {
  AbortFn abort;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    // Another tenant's request looks exactly like an unknown one.
    if (it != live_.end() && it->second.tenant == tenant.name) {
      abort = it->second.abort;
    }
  }
  if (!abort) {
    return absl::NotFoundError(
        absl::StrCat("no live request ", id, " of this tenant"));
  }
  loop_->Cancel(id);
  abort(absl::CancelledError(absl::StrCat("request ", id, " was cancelled")));
  return absl::OkStatus();
}

void Frontend::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool Frontend::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

void Frontend::AbortAll(const absl::Status& status) {
  std::vector<std::pair<scheduler::RequestId, AbortFn>> calls;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : live_) calls.emplace_back(id, entry.abort);
  }
  AbortCalls(calls, status);
}

int64_t Frontend::AbortExpired() {
  const absl::Duration lifetime = options_.max_call_lifetime;
  if (lifetime <= absl::ZeroDuration()) return 0;
  const absl::Time cutoff = clock_->Now() - lifetime;
  std::vector<std::pair<scheduler::RequestId, AbortFn>> calls;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : live_) {
      if (entry.submitted <= cutoff) calls.emplace_back(id, entry.abort);
    }
  }
  AbortCalls(calls, absl::DeadlineExceededError(absl::StrCat(
                        "the call reached the server's max_stream_seconds (",
                        absl::FormatDuration(lifetime), ")")));
  return static_cast<int64_t>(calls.size());
}

void Frontend::AbortCalls(
    const std::vector<std::pair<scheduler::RequestId, AbortFn>>& calls,
    const absl::Status& status) {
  // The call is cut first, so that the engine's answer to the cancel
  // (a plain cancelled finish) cannot end it before the status does.
  for (const auto& [id, abort] : calls) {
    abort(status);
    loop_->Cancel(id);
  }
}

int64_t Frontend::live_calls() const {
  absl::MutexLock lock(&mu_);
  int64_t alone = 0;
  absl::flat_hash_set<const void*> calls;
  for (const auto& [id, entry] : live_) {
    if (entry.call == nullptr) {
      ++alone;
    } else {
      calls.insert(entry.call);
    }
  }
  return alone + static_cast<int64_t>(calls.size());
}

std::vector<int32_t> Frontend::TokenizeText(
    absl::string_view text, std::optional<bool> add_special) const {
  engine::EncodeOptions encode;
  encode.add_bos = add_special.has_value()
                       ? *add_special && tokenizer_->add_bos()
                       : tokenizer_->add_bos();
  return tokenizer_->Encode(text, encode);
}

absl::StatusOr<std::string> Frontend::DetokenizeIds(
    absl::Span<const int32_t> ids, bool skip_special) const {
  engine::IncrementalDetokenizer detokenizer(tokenizer_);
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_ids[", i, "] must be in [0, ",
                       tokenizer_->vocab_size(), "), got ", id));
    }
    if (!skip_special && tokenizer_->IsControl(id)) {
      text += tokenizer_->TokenText(id);
      continue;
    }
    text += detokenizer.Push(id);
  }
  text += detokenizer.Flush();
  return text;
}

absl::Status Frontend::CheckModel(absl::string_view model) const {
  if (model.empty() || model == options_.model.id) return absl::OkStatus();
  for (const std::string& alias : options_.model.aliases) {
    if (model == alias) return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("model '", Echo(model),
                                          "' is not served here; this server "
                                          "serves '",
                                          options_.model.id, "'"));
}

uint64_t Frontend::NextSeed() {
  absl::MutexLock lock(&mu_);
  return SplitMix64(&seed_state_);
}

absl::Status Frontend::Rejected(absl::string_view tenant,
                                absl::Status status) const {
  if (options_.rejections != nullptr) {
    options_.rejections->OnRejected(tenant, status.code());
  }
  return status;
}

}  // namespace paceline::server
