#ifndef PACELINE_SERVER_OPENAI_ANSWER_FORMAT_H_
#define PACELINE_SERVER_OPENAI_ANSWER_FORMAT_H_

// How one HTTP API writes a generation's answer: the bytes, and only the
// bytes. The generation call (generation_call.h) owns everything else —
// admission, submission, pacing, the answer-size bound, cancellation when
// the client leaves, drain — identically for every API; each API brings an
// AnswerFormat: OpenAI's Completions and Chat Completions (chat_answer.h),
// the Responses API (responses_answer.h), Anthropic's Messages
// (server/anthropic/messages_answer.h).
//
// A call has choices 0..n-1 (n > 1 only for OpenAI's n and batch
// prompts). The call invokes a format from one thread at a time (under its
// lock), in this order per choice: Accepted, then its Deltas, then either
// Finished (it ended by itself: stop, length, a tool call) or nothing (the
// answer failed). Streamed answers get the Stream* calls and write what
// they return as they return it; whole answers get Add / Finished and then
// Body once.
//
// Thread-compatible: one instance per call.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "scheduler/request_types.h"
#include "server/delivery/stream_buffer.h"
#include "server/http/http_server.h"
#include "server/openai/openai_response.h"

namespace paceline::server::openai {

class AnswerFormat {
 public:
  virtual ~AnswerFormat() = default;

  // --- refusals ---
  // Answers `exchange` with `status` in the API's error shape (status code,
  // retry headers, body), before anything else was written.
  virtual void RespondError(http::HttpExchange& exchange,
                            const absl::Status& status,
                            std::function<void(bool)> done = {}) const = 0;
  // The request field whose lowering shrinks the answer, named as the API
  // names it ("max_tokens", "max_output_tokens").
  virtual absl::string_view MaxTokensParam() const { return "max_tokens"; }
  // The field asking for logprobs, likewise.
  virtual absl::string_view LogprobsParam() const { return "logprobs"; }

  // --- streamed (server-sent events): each returns the bytes to write ---
  // The SSE answer opened (the first choice was accepted; `accepted` is
  // its AcceptInfo): the stream's first bytes.
  virtual std::string StreamOpened(const scheduler::AcceptInfo& accepted) = 0;
  // Choice `index` was accepted (after StreamOpened for the first).
  virtual std::string StreamAccepted(int index) = 0;
  // A kDelta of choice `index`.
  virtual std::string StreamDelta(int index, const Outgoing& delta) = 0;
  // Choice `index` ended by itself (`finished` is its kFinished message).
  virtual std::string StreamFinished(int index, const Outgoing& finished) = 0;
  // Every choice ended by itself: the stream's last bytes. `usage` sums
  // the choices.
  virtual std::string StreamEnd(const UsageCounter& usage) = 0;
  // The answer failed after the stream opened: its last bytes.
  virtual std::string StreamFailed(const absl::Status& status) = 0;

  // --- a whole answer (not streamed) ---
  virtual void Add(int index, const Outgoing& delta) = 0;
  virtual void Finished(int index, const Outgoing& finished) = 0;
  // After every choice finished: the answer's body.
  virtual Json Body(const UsageCounter& usage) = 0;
};

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_ANSWER_FORMAT_H_
