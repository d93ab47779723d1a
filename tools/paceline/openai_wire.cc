#include "tools/paceline/openai_wire.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace paceline::tools::bench {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The value at `key` of object `j`; null when `j` is no object or lacks it.
const Json* Member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::optional<int64_t> IntMember(const Json& j, const char* key) {
  const Json* v = Member(j, key);
  if (v == nullptr || !v->is_number_integer()) return std::nullopt;
  if (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX) {
    return std::nullopt;
  }
  return v->get<int64_t>();
}

std::string StringMember(const Json& j, const char* key) {
  const Json* v = Member(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

// "TYPE: MESSAGE" of an OpenAI error object; the object itself when it
// has neither.
std::string ErrorSummary(const Json& error) {
  if (error.is_string()) return error.get<std::string>();
  std::string kind = StringMember(error, "code");
  if (kind.empty()) kind = StringMember(error, "type");
  const std::string message = StringMember(error, "message");
  if (kind.empty() && message.empty()) return Dump(error);
  if (kind.empty()) return message;
  return message.empty() ? kind : absl::StrCat(kind, ": ", message);
}

// The double that prints as `f`'s shortest form (0.7f as 0.7, not as
// 0.699999988079071), so every server reads back the float sent.
double FloatAsDouble(float f) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), f);
  if (ec != std::errc()) return f;
  double d = f;
  std::from_chars(text, end, d);
  return d;
}

Json ParseObject(absl::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr,
                     /*allow_exceptions=*/false);
}

}  // namespace

absl::Status CheckExtraBody(absl::string_view text) {
  const Json j = ParseObject(text);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("is not a JSON object");
  }
  return absl::OkStatus();
}

std::string CompletionBody(const v1::GenerateRequest& request,
                           absl::string_view model,
                           absl::string_view extra_body) {
  Json body = Json::object();
  body["model"] = std::string(model);
  if (request.has_token_ids()) {
    Json ids = Json::array();
    for (int32_t id : request.token_ids().ids()) ids.push_back(id);
    body["prompt"] = std::move(ids);
  } else {
    body["prompt"] = request.text();
  }
  body["max_tokens"] = request.stopping().max_tokens();
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["ignore_eos"] = request.stopping().ignore_eos();
  if (request.sampling().has_temperature()) {
    body["temperature"] = FloatAsDouble(request.sampling().temperature());
  }
  body["seed"] = static_cast<int64_t>(request.sampling().seed());
  if (request.delivery().pace_tokens_per_s() > 0) {
    body["pace_tokens_per_s"] = request.delivery().pace_tokens_per_s();
  }
  if (request.speculation().has_max_draft_tokens()) {  // Paceline's extension
    body["speculation"] = {
        {"max_draft_tokens", request.speculation().max_draft_tokens()}};
  }
  switch (request.priority()) {  // Paceline's extension, as its API names it
    case v1::PRIORITY_INTERACTIVE:
      body["priority"] = "interactive";
      break;
    case v1::PRIORITY_STANDARD:
      body["priority"] = "standard";
      break;
    case v1::PRIORITY_BATCH:
      body["priority"] = "batch";
      break;
    default:
      break;
  }
  if (!extra_body.empty()) {
    const Json extra = ParseObject(extra_body);
    if (extra.is_object()) body.update(extra);
  }
  return Dump(body);
}

absl::StatusOr<StreamChunk> ParseStreamChunk(absl::string_view data) {
  StreamChunk chunk;
  if (data == "[DONE]") {
    chunk.kind = StreamChunk::Kind::kDone;
    return chunk;
  }
  const Json j = Json::parse(data.begin(), data.end(), nullptr,
                             /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an event-stream chunk is not a JSON object: ", data.substr(0, 200)));
  }
  if (const Json* error = Member(j, "error"); error != nullptr) {
    chunk.kind = StreamChunk::Kind::kError;
    chunk.error = ErrorSummary(*error);
    return chunk;
  }
  if (const Json* choices = Member(j, "choices");
      choices != nullptr && choices->is_array() && !choices->empty()) {
    chunk.text = StringMember(choices->front(), "text");
    chunk.finish_reason = StringMember(choices->front(), "finish_reason");
  }
  if (const Json* usage = Member(j, "usage"); usage != nullptr) {
    chunk.prompt_tokens = IntMember(*usage, "prompt_tokens");
    chunk.completion_tokens = IntMember(*usage, "completion_tokens");
  }
  return chunk;
}

std::string HttpErrorText(int http_status, absl::string_view body,
                          const std::optional<std::string>& retry_after_ms,
                          const std::optional<std::string>& retry_after) {
  std::string out = absl::StrCat("HTTP ", http_status);
  const Json j = Json::parse(body.begin(), body.end(), nullptr,
                             /*allow_exceptions=*/false);
  if (const Json* error = j.is_discarded() ? nullptr : Member(j, "error");
      error != nullptr) {
    absl::StrAppend(
        &out, " ",
        error->is_string() ? error->get<std::string>() : ErrorSummary(*error));
  } else if (!body.empty()) {
    absl::StrAppend(&out, ": ", Dump(Json(std::string(body.substr(0, 200)))));
  }
  if (retry_after_ms) {
    absl::StrAppend(&out, " (retry after ", *retry_after_ms, " ms)");
  } else if (retry_after) {
    absl::StrAppend(&out, " (retry after ", *retry_after, " s)");
  }
  return out;
}

absl::StatusOr<ServedModel> FirstServedModel(absl::string_view models_body) {
  const Json j = Json::parse(models_body.begin(), models_body.end(), nullptr,
                             /*allow_exceptions=*/false);
  const Json* data = j.is_discarded() ? nullptr : Member(j, "data");
  if (data == nullptr || !data->is_array() || data->empty() ||
      StringMember(data->front(), "id").empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GET /v1/models did not answer a model list: ",
                     models_body.substr(0, 200)));
  }
  ServedModel model;
  model.id = StringMember(data->front(), "id");
  if (const Json* meta = Member(data->front(), "meta"); meta != nullptr) {
    if (auto n = IntMember(*meta, "n_vocab"); n && *n > 0) model.vocab_size = n;
  }
  return model;
}

std::string OutputLine(uint64_t salt, int64_t index, const RequestRecord& rec,
                       absl::string_view text,
                       absl::string_view finish_reason) {
  Json line = {{"salt", salt},
               {"index", index},
               {"ok", rec.ok},
               {"finish_reason", std::string(finish_reason)},
               {"completion_tokens", rec.completion_tokens},
               {"text", std::string(text)}};
  if (!rec.ok) line["error"] = rec.error;
  return Dump(line);
}

bool CompletionStream::Feed(absl::string_view piece, Clock::time_point now) {
  if (!error_.empty()) return false;
  events_.clear();
  if (absl::Status s = parser_.Feed(piece, &events_); !s.ok()) {
    error_ = std::string(s.message());
    return false;
  }
  for (const SseEvent& e : events_) {
    if (done() || !error_.empty()) break;
    Event(e, now);
  }
  return error_.empty();
}

void CompletionStream::Event(const SseEvent& event, Clock::time_point now) {
  absl::StatusOr<StreamChunk> chunk = ParseStreamChunk(event.data);
  if (!chunk.ok()) {
    error_ = std::string(chunk.status().message());
    return;
  }
  switch (chunk->kind) {
    case StreamChunk::Kind::kDone:
      done_at_ = now;
      return;
    case StreamChunk::Kind::kError:
      error_ = absl::StrCat("error in the stream: ", chunk->error);
      return;
    case StreamChunk::Kind::kData:
      break;
  }
  if (!chunk->finish_reason.empty()) finish_reason_ = chunk->finish_reason;
  text_ += chunk->text;
  if (chunk->completion_tokens) {
    prompt_tokens_ = chunk->prompt_tokens;
    completion_tokens_ = chunk->completion_tokens;
  }
  if (chunk->text.empty()) return;
  if (last_)
    gaps_.push_back(std::chrono::duration<double>(now - *last_).count());
  if (!first_) first_ = now;
  last_ = now;
  ++chunks_;
}

void CompletionStream::Fill(Clock::time_point sent, int32_t prompt_ids,
                            RequestRecord* rec) const {
  const auto seconds = [](Clock::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  if (!error_.empty()) {
    rec->error = error_;
    return;
  }
  if (!done()) {
    rec->error = "the stream ended without data: [DONE]";
    return;
  }
  rec->ok = true;
  rec->tokens_from_chunks = !completion_tokens_.has_value();
  const int64_t tokens = completion_tokens_.value_or(chunks_);
  rec->completion_tokens = static_cast<int32_t>(tokens);
  rec->prompt_tokens =
      static_cast<int32_t>(prompt_tokens_.value_or(prompt_ids));
  rec->delivered_tokens = rec->completion_tokens;
  rec->e2e_delivered = seconds(*done_at_ - sent);
  if (!first_) return;
  rec->ttft_delivered = seconds(*first_ - sent);
  if (tokens >= 2) {
    rec->tpot_delivered =
        seconds(*last_ - *first_) / static_cast<double>(tokens - 1);
  }
  rec->itl_delivered = gaps_;
  if (tokens > chunks_)
    rec->itl_delivered.insert(rec->itl_delivered.end(), tokens - chunks_, 0.0);
}

}  // namespace paceline::tools::bench
