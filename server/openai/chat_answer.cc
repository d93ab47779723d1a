#include "server/openai/chat_answer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_http.h"

namespace paceline::server::openai {

ChatAnswer::ChatAnswer(ResponseContext context,
                       const engine::Tokenizer* tokenizer, int choices)
    : context_(std::move(context)) {
  for (int i = 0; i < choices; ++i) {
    choices_.push_back(std::make_unique<Choice>(&context_, tokenizer, i));
  }
}

void ChatAnswer::RespondError(http::HttpExchange& exchange,
                              const absl::Status& status,
                              std::function<void(bool)> done) const {
  openai::RespondError(exchange, status, std::move(done));
}

absl::string_view ChatAnswer::LogprobsParam() const {
  return context_.api == Api::kChat ? "top_logprobs" : "logprobs";
}

std::string ChatAnswer::StreamOpened(const scheduler::AcceptInfo&) {
  return "";
}

std::string ChatAnswer::StreamAccepted(int index) {
  // A chat choice opens with its role.
  if (context_.api != Api::kChat) return "";
  return SseEvent(choices_[index]->stream.Chunk(Outgoing{}));
}

std::string ChatAnswer::StreamDelta(int index, const Outgoing& delta) {
  if (!HasVisibleOutput(context_, delta)) return "";
  return SseEvent(choices_[index]->stream.Chunk(delta));
}

std::string ChatAnswer::StreamFinished(int index, const Outgoing& finished) {
  return SseEvent(FinishChunkJson(
      context_, index,
      FinishReasonName(finished.finish, finished.called_tools)));
}

std::string ChatAnswer::StreamEnd(const UsageCounter& usage) {
  std::string tail;
  if (context_.include_usage) {
    tail = SseEvent(UsageChunkJson(context_, usage.ToJson()));
  }
  return absl::StrCat(tail, kSseDone);
}

std::string ChatAnswer::StreamFailed(const absl::Status& status) {
  return absl::StrCat("data: ", ToErrorResponse(status).body, "\n\n");
}

void ChatAnswer::Add(int index, const Outgoing& delta) {
  choices_[index]->builder.Add(delta);
}

void ChatAnswer::Finished(int index, const Outgoing& finished) {
  choices_[index]->finish_reason =
      std::string(FinishReasonName(finished.finish, finished.called_tools));
}

Json ChatAnswer::Body(const UsageCounter& usage) {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    choices.push_back(choices_[i]->builder.ToJson(static_cast<int>(i),
                                                  choices_[i]->finish_reason));
  }
  return ResponseJson(context_, std::move(choices), usage.ToJson());
}

}  // namespace paceline::server::openai
