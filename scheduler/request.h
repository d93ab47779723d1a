#ifndef PACELINE_SCHEDULER_REQUEST_H_
#define PACELINE_SCHEDULER_REQUEST_H_

// One generation request inside the scheduler.
//
// A request is its tokens (prompt, then generated) and how many of them
// have K/V in its blocks: num_computed_tokens. There are no prefill or
// decode phases (STYLE.md 2): every step the scheduler grants a running
// request some of [num_computed_tokens, num_tokens) — the rest of its prompt
// in chunks, then one token at a time — and a logits row once the grant
// reaches num_tokens, from which the next token is sampled.
//
// States:
//   kWaiting  --Start-->  kRunning  --Finish-->  kFinished
//      ^                     |
//      +------ Preempt ------+    (K/V dropped, recomputed on readmission)
//   kWaiting --Finish (cancelled)--> kFinished
//
// Groups (Scheduler::SubmitGroup): a group's parent holds the other
// members, its children, from submission until its fork point or their
// fallback (scheduler.h); a held child is kWaiting and in no queue.
//
// Preemption keeps the tokens and the sampler: on readmission the whole
// sequence (prompt + generated) is recomputed (mostly from the prefix
// cache), and the next token is sampled
// from the same logits with the same RNG step (the sampler's counter-based
// draw depends only on the number of tokens generated), so output is
// unchanged by preemption.
//
// Stop conditions, checked by AcceptSample right after each sample:
//   1. EOS / end-of-generation (Tokenizer::IsEog) unless ignore_eos, or a
//      stop token id: kStop; the token is not delivered.
//   2. max_tokens generated: kLength.
// The request's text is the delivery side's (engine/tokenizer/
// text_output.h): a stop string it finds there ends the request one step
// late (StopAtString), with usage counting the tokens it delivered.
//
// Thread-compatible: owned by the scheduler on the engine thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/embedding_pooler.h"
#include "engine/model/model_config.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "kvpager/block_lease.h"
#include "scheduler/token_sink.h"

namespace paceline::scheduler {

// Ordered: a smaller value is served first and preempted last.
enum class PriorityClass : int8_t {
  kInteractive = 0,
  kStandard = 1,
  kBatch = 2
};
inline constexpr int kNumPriorityClasses = 3;
absl::string_view PriorityClassName(PriorityClass priority);

enum class RequestState : int8_t { kWaiting, kRunning, kFinished };

// The most draft tokens a request may ask for per step.
inline constexpr int32_t kMaxDraftTokens = 16;
// The most tokens one fast-forward appends (RequestSpec::max_forced_tokens).
inline constexpr int32_t kMaxForcedTokens = 32;

// Why a cancelled request was cancelled (queue-skip counters by reason).
enum class CancelReason : int8_t { kClient, kShutdown };
inline constexpr int kNumCancelReasons = 2;
absl::string_view CancelReasonName(CancelReason reason);

struct StopConditions {
  int32_t max_tokens = 16;  // >= 1
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // ids in [0, vocab)
};

// What a submitter gives.
struct RequestSpec {
  std::string tenant;           // a configured tenant
  std::vector<int32_t> prompt;  // non-empty, ids in [0, vocab)
  engine::SamplingParams sampling;
  StopConditions stop;
  PriorityClass priority = PriorityClass::kStandard;
  // The client's delivery pace in tokens/s (>= 0; 0 = unpaced). Used only
  // to rank decodes under overload (slack).
  double pace_tokens_per_s = 0;
  // The prefix-cache salt; empty = the tenant name (no cross-tenant
  // sharing). Use a bounded set of values.
  std::string cache_salt;
  // Speculative decoding: up to this many n-gram draft tokens per step
  // (ngram_proposer.h), verified in the same step; 0..kMaxDraftTokens,
  // 0 = off. Output is what it would be without (scheduler.h).
  int32_t max_draft_tokens = 0;
  // Fast-forward (token_mask.h, ForcedTokens): after each sampled token,
  // up to this many tokens the token mask forces are appended without
  // sampling and computed in the next step, as a prompt's are;
  // 0..kMaxForcedTokens, 0 = off. They carry no logprobs: leave it off
  // when the request asks for them.
  int32_t max_forced_tokens = 0;
  // An embedding request (POST /v1/embeddings): the prompt is computed and
  // pooled as the model's pooling type says (model_config.h), nothing is
  // sampled, and the request finishes (kStop, its blocks freed) with the
  // vector in FinishInfo::embedding once its prompt is computed. Needs a
  // model with a pooling type, stop.max_tokens 1 (what it reserves beside
  // the prompt) and a group of one. Mean and cls pooling compute the
  // whole prompt: such a request neither uses nor fills the prefix cache.
  bool embed = false;
  std::shared_ptr<TokenSink> sink;  // required
};

class Request {
 public:
  // `tokenizer` must outlive the request. The sampler was created over the
  // spec's prompt.
  Request(RequestId id, RequestSpec spec, int32_t tenant_index,
          uint64_t arrival_seq, absl::Time arrival,
          engine::SequenceSampler sampler, const engine::Tokenizer* tokenizer);

  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // --- Constant after construction ---------------------------------------
  RequestId id() const { return id_; }
  const std::string& tenant() const { return spec_.tenant; }
  int32_t tenant_index() const { return tenant_index_; }
  PriorityClass priority() const { return spec_.priority; }
  // Submission order across the scheduler: larger = later arrival.
  uint64_t arrival_seq() const { return arrival_seq_; }
  double pace() const { return spec_.pace_tokens_per_s; }
  absl::string_view cache_salt() const {
    if (UncachedPrompt()) return kUncachedSalt;
    return spec_.cache_salt.empty() ? spec_.tenant : spec_.cache_salt;
  }
  // An embedding request pooled over the whole prompt: its blocks must
  // not come from or enter the prefix cache (no MarkComputed).
  bool UncachedPrompt() const {
    return pooler_ != nullptr &&
           engine::EmbeddingPooler::NeedsWholePrompt(pooler_->pooling());
  }
  const StopConditions& stop() const { return spec_.stop; }
  int32_t max_draft_tokens() const { return spec_.max_draft_tokens; }
  int32_t max_forced_tokens() const { return spec_.max_forced_tokens; }
  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }

  // --- State ------------------------------------------------------------
  RequestState state() const { return state_; }
  absl::Span<const int32_t> tokens() const { return tokens_; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_generated() const { return num_tokens() - num_prompt_tokens_; }
  int32_t num_computed_tokens() const { return num_computed_tokens_; }
  // Tokens still to compute before the next sample.
  int32_t num_uncomputed() const { return num_tokens() - num_computed_tokens_; }
  kvpager::BlockLease& lease() { return lease_; }
  const kvpager::BlockLease& lease() const { return lease_; }
  engine::SequenceSampler& sampler() { return sampler_; }
  const RequestTimings& timings() const { return timings_; }
  // When the last token was sampled; InfinitePast() before the first.
  absl::Time last_token_time() const { return last_token_; }
  int32_t preemptions() const { return usage_.preemptions; }
  int32_t recomputed_tokens() const { return usage_.recomputed_tokens; }
  // Whether the prompt has been charged to the tenant (first admission).
  bool prompt_charged() const { return prompt_charged_; }
  void set_prompt_charged() { prompt_charged_ = true; }

  // --- Embedding (RequestSpec::embed) ----------------------------------
  bool embed() const { return spec_.embed; }
  // Set once by the scheduler at submission for an embedding request.
  void set_pooling(engine::PoolingType pooling, int64_t width) {
    pooler_ = std::make_unique<engine::EmbeddingPooler>(pooling, width);
  }
  // Null unless an embedding request.
  engine::EmbeddingPooler* pooler() { return pooler_.get(); }

  // --- Token budget (tenant_queues.h: Token budget) -----------------------
  // A request reserves prompt + max_tokens of its tenant's tokens per
  // minute (max_tokens already fits the context: Scheduler::CheckRequest),
  // once: at its first admission, or at its parent's for a held child.
  // What admitting it now would reserve: its own and each held child's;
  // 0 once reserved (a readmission, or a child released after its
  // parent's admission).
  int64_t ReservationNeeded() const;
  // Marks it and its held children reserved; returns ReservationNeeded().
  int64_t TakeReservation();
  // Ends the reservation; returns the part it did not use: the prompt if
  // it was never charged, and max_tokens less the tokens generated. 0 if
  // it held none.
  int64_t ReturnReservation();
  // Valid once finished by a cancel.
  CancelReason cancel_reason() const { return cancel_reason_; }

  // This step's draft tokens (scheduler.cc, AddDrafts): set by
  // Schedule after the request's last token, cleared by Update.
  absl::Span<const int32_t> draft() const { return draft_; }
  void set_draft(absl::Span<const int32_t> draft) {
    draft_.assign(draft.begin(), draft.end());
    usage_.draft_tokens += static_cast<int32_t>(draft.size());
  }
  // Update's verdict, token by token: the next draft token was the
  // request's own (counted before the token after it may finish it).
  void AcceptDraftToken() { ++usage_.accepted_draft_tokens; }
  void ClearDraft() { draft_.clear(); }

  // Seconds of delivery the client has buffered: the sink's undelivered
  // tokens / pace; 0 when unpaced.
  double Slack() const;

  // --- Group (scheduler_group.cc) -----------------------------------------
  // This request and the children it holds.
  int32_t group_size() const { return 1 + static_cast<int32_t>(held_.size()); }
  bool holds_children() const { return !held_.empty(); }
  // The parent holding this request, or null.
  Request* holder() const { return holder_; }
  // Holds `child` (not holding any itself) until released.
  void Hold(std::unique_ptr<Request> child);
  // Gives up every held child, in the order held; their holder becomes null.
  std::vector<std::unique_ptr<Request>> ReleaseHeld();
  // Gives up one held child. Precondition: child->holder() == this.
  std::unique_ptr<Request> ReleaseHeld(const Request* child);

  // --- Transitions (the scheduler calls these) -------------------------
  // kWaiting -> kRunning with a lease covering a prefix of tokens() (all of
  // them, or less for a group's parent, see scheduler_group.cc); the lease's
  // computed tokens — its cached prefix, or its source's progress for a
  // fork — count as computed. Usage counts its cached prefix.
  void Start(kvpager::BlockLease lease, absl::Time now);
  // kRunning -> kWaiting: the lease is destroyed, nothing stays computed.
  void Preempt();
  // `n` more tokens computed (<= num_uncomputed()).
  void AddComputed(int32_t n) { num_computed_tokens_ += n; }
  // Only the first `n` tokens count as computed again (<=
  // num_computed_tokens()): the rest are fed again, as a prompt chunk
  // (a hybrid model's rejected draft, scheduler.cc AddDrafts).
  void RollBackComputed(int32_t n) { num_computed_tokens_ = n; }
  // A hybrid model's latest snapshot of its generated tokens' state
  // (kvpager::KvPager::KeepStateSnapshot's block; -1 for none): the next
  // one replaces it.
  int32_t rolling_snapshot() const { return rolling_snapshot_; }
  void set_rolling_snapshot(int32_t block) { rolling_snapshot_ = block; }
  // Records a sampled token (the request must be running with nothing
  // uncomputed), applies the stop checks and hands the id to the sink.
  // Returns the finish reason when the request must now finish (the caller
  // then calls Finish with it and an OK status).
  std::optional<FinishReason> AcceptSample(const engine::SampleResult& sample,
                                           absl::Time now);
  // Records a token the token mask forced after the last sampled one
  // (fast-forward), with the same stop checks and no logprobs; it is
  // computed in a later step, as a prompt token is.
  std::optional<FinishReason> AcceptForced(int32_t token);
  // -> kFinished: destroys the lease and tells the sink; returns what the
  // sink was told. Precondition: not finished yet.
  FinishInfo Finish(FinishReason reason, absl::Status status, absl::Time now);
  // Finish(kCancelled, CANCELLED for a client, UNAVAILABLE for shutdown).
  FinishInfo Cancel(CancelReason reason, absl::Time now);
  // Finish(kStop) for a stop string the delivery side found in the text of
  // the first `tokens` generated tokens: usage counts no more than those.
  FinishInfo StopAtString(std::string stop_string, int32_t tokens,
                          absl::Time now);

 private:
  // Appends a generated token, applies the stop checks, delivers it.
  std::optional<FinishReason> Append(int32_t token,
                                     const engine::SampleResult* logprobs);
  // Hands `token` (and its sample, when asked for) to the sink.
  void Deliver(int32_t token, const engine::SampleResult* sample);

  // Constant after construction.
  const RequestId id_;
  RequestSpec spec_;  // its prompt moved into tokens_
  const int32_t tenant_index_;
  const uint64_t arrival_seq_;
  const int32_t num_prompt_tokens_;
  const engine::Tokenizer* const tokenizer_;

  // Engine thread.
  RequestState state_ = RequestState::kWaiting;
  std::vector<int32_t> tokens_;  // prompt, then generated
  int32_t num_computed_tokens_ = 0;
  int32_t lost_computed_tokens_ = 0;  // computed when last preempted
  int32_t rolling_snapshot_ = -1;     // rolling_snapshot()
  kvpager::BlockLease lease_;
  engine::SequenceSampler sampler_;
  std::vector<int32_t> draft_;  // this step's draft tokens
  bool prompt_charged_ = false;
  bool reserved_ = false;  // of the tenant's tokens per minute
  CancelReason cancel_reason_ = CancelReason::kClient;
  std::string stop_string_;
  int32_t stop_token_ = -1;
  Usage usage_;
  RequestTimings timings_;
  absl::Time last_token_ = absl::InfinitePast();
  std::vector<std::unique_ptr<Request>> held_;       // a parent's children
  Request* holder_ = nullptr;                        // a held child's parent
  std::unique_ptr<engine::EmbeddingPooler> pooler_;  // embedding requests

  // The salt no lookup ever matches (nothing is marked under it).
  static constexpr absl::string_view kUncachedSalt =
      "\x1f"
      "uncached";
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_REQUEST_H_
