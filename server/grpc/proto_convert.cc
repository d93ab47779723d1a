#include "server/grpc/proto_convert.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "scheduler/retry_hint.h"

namespace paceline::server {

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return;
  const absl::Duration since = t - absl::UnixEpoch();
  const int64_t seconds =
      absl::ToInt64Seconds(absl::Floor(since, absl::Seconds(1)));
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(since - absl::Seconds(seconds))));
}

void AddLogprob(const engine::SampleResult& sample,
                google::protobuf::RepeatedPtrField<v1::TokenLogprob>* out) {
  v1::TokenLogprob* lp = out->Add();
  lp->set_token_id(sample.token);
  lp->set_logprob(sample.logprob);
  for (const engine::TokenLogprob& top : sample.top_logprobs) {
    v1::TopLogprob* t = lp->add_top();
    t->set_token_id(top.token);
    t->set_logprob(top.logprob);
  }
}

void MarkToolCallsFinish(bool called_tools, v1::Finished* out) {
  if (!called_tools) return;
  if (out->reason() == v1::FINISH_REASON_EOS ||
      out->reason() == v1::FINISH_REASON_STOP_SEQUENCE) {
    out->set_reason(v1::FINISH_REASON_TOOL_CALLS);
  }
}

void AddToolCallDeltas(
    const std::vector<chat::ChatToolCallDelta>& calls,
    google::protobuf::RepeatedPtrField<v1::ToolCallDelta>* out) {
  for (const chat::ChatToolCallDelta& call : calls) {
    v1::ToolCallDelta* d = out->Add();
    d->set_index(call.index);
    d->set_id(call.id);
    d->set_name(call.name);
    d->set_arguments(call.arguments);
  }
}

void FillChatAnswer(const Outgoing& chat, v1::CompleteResponse* out) {
  out->set_text(chat.text);
  out->set_reasoning(chat.reasoning);
  for (const chat::ChatToolCallDelta& call : chat.tool_calls) {
    if (std::find(chat.broken_tool_calls.begin(), chat.broken_tool_calls.end(),
                  call.index) != chat.broken_tool_calls.end()) {
      continue;
    }
    v1::ToolCall* c = out->add_tool_calls();
    c->set_id(call.id);
    c->set_type("function");
    c->mutable_function()->set_name(call.name);
    c->mutable_function()->set_arguments(call.arguments);
  }
}

void FillFinished(const scheduler::FinishInfo& finish,
                  const engine::Tokenizer& tokenizer,
                  absl::Time first_delivered, absl::Time last_delivered,
                  v1::Finished* out) {
  switch (finish.reason) {
    case scheduler::FinishReason::kStop:
      if (!finish.stop_string.empty()) {
        out->set_reason(v1::FINISH_REASON_STOP_SEQUENCE);
        out->set_stop_sequence(finish.stop_string);
      } else if (finish.stop_token >= 0 && tokenizer.IsEog(finish.stop_token)) {
        out->set_reason(v1::FINISH_REASON_EOS);
        out->set_stop_token_id(finish.stop_token);
      } else {
        out->set_reason(v1::FINISH_REASON_STOP_SEQUENCE);
        if (finish.stop_token >= 0) out->set_stop_token_id(finish.stop_token);
      }
      break;
    case scheduler::FinishReason::kLength:
      out->set_reason(v1::FINISH_REASON_LENGTH);
      break;
    case scheduler::FinishReason::kCancelled:
      out->set_reason(v1::FINISH_REASON_CANCELLED);
      out->set_message(std::string(finish.status.message()));
      break;
    case scheduler::FinishReason::kError:
      out->set_reason(v1::FINISH_REASON_ERROR);
      out->set_message(std::string(finish.status.message()));
      break;
  }
  v1::Usage* usage = out->mutable_usage();
  usage->set_prompt_tokens(finish.usage.prompt_tokens);
  usage->set_completion_tokens(finish.usage.completion_tokens);
  usage->set_cached_prompt_tokens(finish.usage.cached_prompt_tokens);
  usage->set_preemptions(finish.usage.preemptions);
  usage->set_draft_tokens(finish.usage.draft_tokens);
  usage->set_accepted_draft_tokens(finish.usage.accepted_draft_tokens);
  usage->set_forced_tokens(finish.usage.forced_tokens);
  v1::Timings* t = out->mutable_timings();
  const auto set = [](absl::Time time, auto mutable_field) {
    if (time != absl::InfinitePast() && time != absl::InfiniteFuture()) {
      SetTimestamp(time, mutable_field());
    }
  };
  set(finish.timings.arrival, [t] { return t->mutable_queued(); });
  set(finish.timings.first_scheduled,
      [t] { return t->mutable_first_scheduled(); });
  set(finish.timings.first_token, [t] { return t->mutable_first_token(); });
  set(finish.timings.finished, [t] { return t->mutable_generation_done(); });
  set(first_delivered, [t] { return t->mutable_first_delivered(); });
  set(last_delivered, [t] { return t->mutable_last_delivered(); });
}

grpc::Status ToGrpcStatus(const absl::Status& status,
                          grpc::ServerContextBase* context) {
  if (status.ok()) return grpc::Status::OK;
  if (context != nullptr) {
    if (std::optional<absl::Duration> retry = scheduler::RetryAfter(status)) {
      context->AddTrailingMetadata(
          "retry-after-ms", absl::StrCat(absl::ToInt64Milliseconds(*retry)));
    }
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

void FillModelInfo(const engine::ModelConfig& config,
                   const engine::Tokenizer& tokenizer, v1::ModelInfo* out) {
  out->set_architecture(config.architecture);
  out->set_name(config.name);
  out->set_layers(config.n_layers);
  out->set_embedding_length(config.n_embd);
  out->set_heads(config.n_heads);
  out->set_kv_heads(config.n_kv_heads);
  out->set_head_dim(config.head_dim);
  out->set_feed_forward_length(config.n_ff);
  out->set_vocab_size(config.n_vocab);
  out->set_context_length(config.context_length);
  out->set_rope_freq_base(config.rope_freq_base);
  out->set_rms_norm_eps(config.rms_norm_eps);
  out->set_parameters(config.ParameterCount());
  out->set_tokenizer(tokenizer.model());
}

void FillMemoryPlan(const engine::MemoryPlan& plan, v1::MemoryPlan* out) {
  out->set_weights_dtype(plan.weights_dtype);
  out->set_weights_bytes(plan.weights_bytes);
  out->set_kv_dtype(engine::DtypeName(plan.kv_dtype));
  out->set_kv_bytes_per_token(plan.kv_bytes_per_token);
  out->set_context(plan.context);
  out->set_sequences(plan.sequences);
  out->set_kv_bytes(plan.kv_bytes);
  out->set_total_bytes(plan.total_bytes);
  out->set_rule_of_thumb_bytes(plan.rule_of_thumb_bytes);
  out->set_state_bytes_per_sequence(plan.state_bytes_per_sequence);
  out->set_state_bytes(plan.state_bytes);
  if (plan.fit.has_value()) {
    out->set_memory_bytes(plan.fit->memory_bytes);
    out->set_sequences_that_fit(plan.fit->sequences_that_fit);
  }
}

}  // namespace paceline::server
