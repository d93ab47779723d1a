#ifndef PACELINE_SERVER_OPENAI_CHAT_ANSWER_H_
#define PACELINE_SERVER_OPENAI_CHAT_ANSWER_H_

// OpenAI's Completions and Chat Completions answers (answer_format.h):
//   stream: per choice its chunks in order (a chat choice opens with the
//     role chunk), then its finish chunk; after every choice, the usage
//     chunk (stream_options.include_usage) and "data: [DONE]". A failure
//     after the stream opened is one `data: {"error": ...}` event.
//   whole: {id, object, created, model, choices, usage}.
// The JSON is openai_response.h's; errors are openai_error.h's.

#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "server/openai/answer_format.h"
#include "server/openai/openai_response.h"

namespace paceline::server::openai {

class ChatAnswer final : public AnswerFormat {
 public:
  // `choices` is the call's choice count; `tokenizer` must outlive this.
  ChatAnswer(ResponseContext context, const engine::Tokenizer* tokenizer,
             int choices);

  void RespondError(http::HttpExchange& exchange, const absl::Status& status,
                    std::function<void(bool)> done) const override;
  absl::string_view LogprobsParam() const override;

  std::string StreamOpened(const scheduler::AcceptInfo& accepted) override;
  std::string StreamAccepted(int index) override;
  std::string StreamDelta(int index, const Outgoing& delta) override;
  std::string StreamFinished(int index, const Outgoing& finished) override;
  std::string StreamEnd(const UsageCounter& usage) override;
  std::string StreamFailed(const absl::Status& status) override;

  void Add(int index, const Outgoing& delta) override;
  void Finished(int index, const Outgoing& finished) override;
  Json Body(const UsageCounter& usage) override;

 private:
  struct Choice {
    Choice(const ResponseContext* context, const engine::Tokenizer* tokenizer,
           int index)
        : builder(context, tokenizer), stream(context, tokenizer, index) {}
    ChoiceBuilder builder;  // the whole answer
    ChoiceStream stream;    // the chunks
    std::string finish_reason;
  };

  const ResponseContext context_;
  std::vector<std::unique_ptr<Choice>> choices_;
};

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_CHAT_ANSWER_H_
