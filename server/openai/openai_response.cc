#include "server/openai/openai_response.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::server::openai {
namespace {

// OpenAI's value for "very unlikely"; also keeps -inf and NaN (which JSON
// cannot hold) out of the body.
constexpr double kMinLogprob = -9999.0;

double ClampLogprob(float logprob) {
  if (!(logprob >= kMinLogprob)) return kMinLogprob;  // NaN too
  return logprob;
}

// Code points in valid UTF-8: the bytes that are not continuation bytes.
int64_t CodePoints(absl::string_view utf8) {
  return std::count_if(utf8.begin(), utf8.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  });
}

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Json Envelope(const ResponseContext& context, const char* object) {
  Json out = Json::object();
  out["id"] = context.id;
  out["object"] = object;
  out["created"] = context.created;
  out["model"] = context.model;
  return out;
}

const char* ChunkObject(Api api) {
  return api == Api::kChat ? "chat.completion.chunk" : "text_completion";
}

Json ChunkEnvelope(const ResponseContext& context, Json choice) {
  Json out = Envelope(context, ChunkObject(context.api));
  out["choices"] = Json::array({std::move(choice)});
  if (context.include_usage) out["usage"] = nullptr;
  return out;
}

// The chat shape's wrapper around a content list.
Json ChatLogprobs(Json content) {
  Json out = Json::object();
  out["content"] = content.is_null() ? Json::array() : std::move(content);
  out["refusal"] = nullptr;
  return out;
}

// A completions logprobs object with empty arrays.
Json EmptyCompletionLogprobs() {
  Json out = Json::object();
  out["tokens"] = Json::array();
  out["token_logprobs"] = Json::array();
  out["top_logprobs"] = Json::array();
  out["text_offset"] = Json::array();
  return out;
}

// A tool call of a delta or a message: {[index,] id, type, function {name,
// arguments}}; a later stream piece has only {index, function {arguments}}.
Json ToolCallJson(const chat::ChatToolCallDelta& call, bool with_index) {
  Json out = Json::object();
  if (with_index) out["index"] = call.index;
  const bool announces = !with_index || !call.id.empty();
  if (announces) {
    out["id"] = call.id;
    out["type"] = "function";
  }
  Json function = Json::object();
  if (announces) function["name"] = call.name;
  function["arguments"] = call.arguments;
  out["function"] = std::move(function);
  return out;
}

}  // namespace

std::string ResponseId(Api api, uint64_t random) {
  return absl::StrFormat("%s%016x", api == Api::kChat ? "chatcmpl-" : "cmpl-",
                         random);
}

absl::string_view FinishReasonName(const scheduler::FinishInfo& finish,
                                   bool called_tools) {
  switch (finish.reason) {
    case scheduler::FinishReason::kStop:
      return called_tools ? "tool_calls" : "stop";
    case scheduler::FinishReason::kLength:
      return "length";
    case scheduler::FinishReason::kCancelled:
      return "abort";
    case scheduler::FinishReason::kError:
      return "error";
  }
  return "error";
}

Json UsageJson(int64_t prompt_tokens, int64_t completion_tokens,
               int64_t cached_tokens) {
  Json out = Json::object();
  out["prompt_tokens"] = prompt_tokens;
  out["completion_tokens"] = completion_tokens;
  out["total_tokens"] = prompt_tokens + completion_tokens;
  Json details = Json::object();
  details["cached_tokens"] = cached_tokens;
  out["prompt_tokens_details"] = std::move(details);
  return out;
}

void UsageCounter::Add(const scheduler::Usage& usage,
                       bool first_choice_of_prompt) {
  completion_ += usage.completion_tokens;
  drafted_ += usage.draft_tokens;
  accepted_ += usage.accepted_draft_tokens;
  forced_ += usage.forced_tokens;
  if (first_choice_of_prompt) {
    prompt_ += usage.prompt_tokens;
    cached_ += usage.cached_prompt_tokens;
  }
}

Json UsageCounter::ToJson() const {
  Json out = UsageJson(prompt_, completion_, cached_);
  Json details = Json::object();
  if (drafted_ > 0) {
    details["accepted_prediction_tokens"] = accepted_;
    details["rejected_prediction_tokens"] = drafted_ - accepted_;
  }
  if (forced_ > 0) details["forced_tokens"] = forced_;
  if (!details.empty()) out["completion_tokens_details"] = std::move(details);
  return out;
}

// --- LogprobsBuilder ------------------------------------------------------

LogprobsBuilder::LogprobsBuilder(const engine::Tokenizer* tokenizer)
    : tokenizer_(tokenizer), offsets_(tokenizer) {}

const std::string& LogprobsBuilder::RawBytes(int32_t id) const {
  const std::string& bytes = tokenizer_->TokenBytes(id);
  if (bytes.empty() && tokenizer_->IsControl(id)) {
    return tokenizer_->TokenText(id);
  }
  return bytes;
}

std::string LogprobsBuilder::TokenString(int32_t id) const {
  return engine::SanitizeUtf8(RawBytes(id));
}

Json LogprobsBuilder::TokenBytesJson(int32_t id) const {
  Json out = Json::array();
  for (char c : RawBytes(id)) out.push_back(static_cast<unsigned char>(c));
  return out;
}

void LogprobsBuilder::AppendCompletion(
    absl::Span<const engine::SampleResult> samples, Json* out) {
  if (out->is_null()) *out = EmptyCompletionLogprobs();
  for (const engine::SampleResult& sample : samples) {
    const std::string token = TokenString(sample.token);
    (*out)["tokens"].push_back(token);
    (*out)["token_logprobs"].push_back(ClampLogprob(sample.logprob));
    Json top = Json::object();
    for (const engine::TokenLogprob& t : sample.top_logprobs) {
      std::string key = TokenString(t.token);
      if (!top.contains(key)) top[std::move(key)] = ClampLogprob(t.logprob);
    }
    if (!top.contains(token)) top[token] = ClampLogprob(sample.logprob);
    (*out)["top_logprobs"].push_back(std::move(top));
    (*out)["text_offset"].push_back(offset_);
    offset_ += CodePoints(offsets_.Push(sample.token));
  }
}

void LogprobsBuilder::AppendChat(absl::Span<const engine::SampleResult> samples,
                                 Json* content) const {
  if (content->is_null()) *content = Json::array();
  for (const engine::SampleResult& sample : samples) {
    Json entry = Json::object();
    entry["token"] = TokenString(sample.token);
    entry["logprob"] = ClampLogprob(sample.logprob);
    entry["bytes"] = TokenBytesJson(sample.token);
    Json top = Json::array();
    for (const engine::TokenLogprob& t : sample.top_logprobs) {
      Json alt = Json::object();
      alt["token"] = TokenString(t.token);
      alt["logprob"] = ClampLogprob(t.logprob);
      alt["bytes"] = TokenBytesJson(t.token);
      top.push_back(std::move(alt));
    }
    entry["top_logprobs"] = std::move(top);
    content->push_back(std::move(entry));
  }
}

// --- ChoiceBuilder --------------------------------------------------------

ChoiceBuilder::ChoiceBuilder(const ResponseContext* context,
                             const engine::Tokenizer* tokenizer)
    : context_(context), logprobs_builder_(tokenizer) {}

void ChoiceBuilder::Add(const Outgoing& delta) {
  if (delta.kind != Outgoing::Kind::kDelta) return;
  text_ += delta.text;
  reasoning_ += delta.reasoning;
  for (const chat::ChatToolCallDelta& call : delta.tool_calls) {
    auto it = std::find_if(calls_.begin(), calls_.end(),
                           [&](const chat::ChatToolCallDelta& c) {
                             return c.index == call.index;
                           });
    if (it == calls_.end()) {
      calls_.push_back(call);
      continue;
    }
    if (it->id.empty()) it->id = call.id;
    if (it->name.empty()) it->name = call.name;
    it->arguments += call.arguments;
  }
  broken_.insert(broken_.end(), delta.broken_tool_calls.begin(),
                 delta.broken_tool_calls.end());
  if (!context_->logprobs) return;
  if (context_->api == Api::kCompletion) {
    logprobs_builder_.AppendCompletion(delta.samples, &logprobs_);
  } else {
    logprobs_builder_.AppendChat(delta.samples, &logprobs_);
  }
}

Json ChoiceBuilder::ToJson(int index, absl::string_view finish_reason) const {
  Json out = Json::object();
  out["index"] = index;
  if (context_->api == Api::kCompletion) {
    out["text"] = text_;
    if (!context_->logprobs) {
      out["logprobs"] = nullptr;
    } else {
      out["logprobs"] =
          logprobs_.is_null() ? EmptyCompletionLogprobs() : logprobs_;
    }
    out["finish_reason"] = finish_reason;
    return out;
  }
  Json calls = Json::array();
  for (const chat::ChatToolCallDelta& call : calls_) {
    if (Contains(broken_, call.index)) continue;
    calls.push_back(ToolCallJson(call, /*with_index=*/false));
  }
  Json message = Json::object();
  message["role"] = "assistant";
  if (text_.empty() && !calls.empty()) {
    message["content"] = nullptr;
  } else {
    message["content"] = text_;
  }
  message["refusal"] = nullptr;
  if (!reasoning_.empty()) {
    message["reasoning_content"] = reasoning_;
  }
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  out["message"] = std::move(message);
  out["logprobs"] = context_->logprobs ? ChatLogprobs(logprobs_) : Json();
  out["finish_reason"] = finish_reason;
  return out;
}

Json ResponseJson(const ResponseContext& context, Json choices, Json usage) {
  Json out = Envelope(context, context.api == Api::kChat ? "chat.completion"
                                                         : "text_completion");
  out["choices"] = std::move(choices);
  out["usage"] = std::move(usage);
  return out;
}

// --- Streams --------------------------------------------------------------

bool HasVisibleOutput(const ResponseContext& context, const Outgoing& delta) {
  if (!delta.text.empty() || !delta.reasoning.empty()) return true;
  if (context.logprobs && !delta.samples.empty()) return true;
  return std::any_of(delta.tool_calls.begin(), delta.tool_calls.end(),
                     [&](const chat::ChatToolCallDelta& call) {
                       return !Contains(delta.broken_tool_calls, call.index);
                     });
}

ChoiceStream::ChoiceStream(const ResponseContext* context,
                           const engine::Tokenizer* tokenizer, int index)
    : context_(context), index_(index), logprobs_builder_(tokenizer) {}

Json ChoiceStream::Chunk(const Outgoing& delta) {
  Json choice = Json::object();
  choice["index"] = index_;
  Json logprobs;  // null unless asked for
  if (context_->api == Api::kCompletion) {
    choice["text"] = delta.text;
    if (context_->logprobs) {
      logprobs_builder_.AppendCompletion(delta.samples, &logprobs);
    }
  } else {
    Json d = Json::object();
    if (first_) d["role"] = "assistant";
    if (first_ || !delta.text.empty()) d["content"] = delta.text;
    if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
    Json calls = Json::array();
    for (const chat::ChatToolCallDelta& call : delta.tool_calls) {
      if (Contains(delta.broken_tool_calls, call.index)) continue;
      calls.push_back(ToolCallJson(call, /*with_index=*/true));
    }
    if (!calls.empty()) d["tool_calls"] = std::move(calls);
    choice["delta"] = std::move(d);
    if (context_->logprobs) {
      Json content;
      logprobs_builder_.AppendChat(delta.samples, &content);
      logprobs = ChatLogprobs(std::move(content));
    }
  }
  first_ = false;
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = nullptr;
  return ChunkEnvelope(*context_, std::move(choice));
}

Json FinishChunkJson(const ResponseContext& context, int index,
                     absl::string_view finish_reason) {
  Json choice = Json::object();
  choice["index"] = index;
  if (context.api == Api::kCompletion) {
    choice["text"] = "";
  } else {
    choice["delta"] = Json::object();
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  return ChunkEnvelope(context, std::move(choice));
}

Json UsageChunkJson(const ResponseContext& context, Json usage) {
  Json out = Envelope(context, ChunkObject(context.api));
  out["choices"] = Json::array();
  out["usage"] = std::move(usage);
  return out;
}

// --- Models, tokenize -----------------------------------------------------

Json ModelJson(absl::string_view id, int64_t created,
               absl::string_view owned_by) {
  Json out = Json::object();
  out["id"] = std::string(id);
  out["object"] = "model";
  out["created"] = created;
  out["owned_by"] = std::string(owned_by);
  return out;
}

Json ModelListJson(std::vector<Json> models) {
  Json out = Json::object();
  out["object"] = "list";
  out["data"] = Json::array();
  for (Json& m : models) out["data"].push_back(std::move(m));
  return out;
}

Json TokenizeJson(absl::Span<const int32_t> tokens, int64_t max_model_len,
                  const engine::Tokenizer* token_strs_from) {
  Json out = Json::object();
  out["count"] = tokens.size();
  out["max_model_len"] = max_model_len;
  out["tokens"] = Json::array();
  for (int32_t id : tokens) out["tokens"].push_back(id);
  if (token_strs_from != nullptr) {
    Json strs = Json::array();
    for (int32_t id : tokens) {
      strs.push_back(engine::SanitizeUtf8(token_strs_from->TokenText(id)));
    }
    out["token_strs"] = std::move(strs);
  }
  return out;
}

Json DetokenizeJson(absl::string_view text) {
  Json out = Json::object();
  out["prompt"] = engine::SanitizeUtf8(text);
  return out;
}

}  // namespace paceline::server::openai
