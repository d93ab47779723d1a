#ifndef PACELINE_TOOLS_PACELINE_OPENAI_WIRE_H_
#define PACELINE_TOOLS_PACELINE_OPENAI_WIRE_H_

// What `paceline bench --api openai` writes to and reads from an
// OpenAI-compatible server (Paceline's HTTP API, vLLM, llama.cpp's
// llama-server), apart from any socket: the body of a streamed
// POST /v1/completions, the chunks of its event stream, error answers, and
// the served model out of GET /v1/models. Pure functions; nothing here
// throws (nlohmann is used in its non-throwing forms).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "paceline/v1/paceline.pb.h"
#include "tools/paceline/bench_stats.h"
#include "tools/paceline/sse_parser.h"

namespace paceline::tools::bench {

// The body for `request` (as the gRPC path would send it) to `model`:
//   {"model", "prompt", "max_tokens", "stream": true,
//    "stream_options": {"include_usage": true}, "ignore_eos",
//    "temperature" (when set), "seed", "pace_tokens_per_s" (when > 0)}
// `prompt` is the token ids as a JSON array of integers when the request
// has token_ids (OpenAI's `number[]` prompt, which Paceline, vLLM and
// llama-server accept), else its text. The seed is written as the signed
// 64-bit integer with the same bits (OpenAI's seed is an int64; Paceline
// reads a negative seed back to the same bits). Invalid UTF-8 in a text
// prompt is replaced with U+FFFD. `extra_body`, a JSON object's text (see
// CheckExtraBody; "" = none), is merged in last: each of its members
// replaces the one of that name (e.g. {"json_schema": {...}, "ignore_eos":
// false}).
std::string CompletionBody(const v1::GenerateRequest& request,
                           absl::string_view model,
                           absl::string_view extra_body = "");

// InvalidArgument unless `text` is a JSON object (what --extra-body wants).
absl::Status CheckExtraBody(absl::string_view text);

// One `data:` payload of a completions event stream.
struct StreamChunk {
  enum class Kind {
    kDone,   // "[DONE]": the stream's last event
    kData,   // a completion chunk (text, usage, or both)
    kError,  // {"error": {...}}: the server gave up mid-stream
  };
  Kind kind = Kind::kData;
  std::string text;           // choices[0].text; "" when absent
  std::string finish_reason;  // choices[0].finish_reason; "" when null
  // `usage`, when the chunk carries one (the include_usage chunk).
  std::optional<int64_t> prompt_tokens, completion_tokens;
  std::string error;  // kError: "TYPE: MESSAGE" (or the raw object)
};

// InvalidArgument when `data` is neither "[DONE]" nor a JSON object.
absl::StatusOr<StreamChunk> ParseStreamChunk(absl::string_view data);

// A failed request's error line: "HTTP 429 rate_limit_exceeded: MESSAGE
// (retry after 1200 ms)". The code (or else the type) and message come
// from an OpenAI error body {"error": {"message", "type", "code"}}; another
// body is quoted (its first 200 bytes). The retry hint is `retry-after-ms`,
// else `retry-after` in seconds, when the answer sent one.
std::string HttpErrorText(int http_status, absl::string_view body,
                          const std::optional<std::string>& retry_after_ms,
                          const std::optional<std::string>& retry_after);

// The served model: GET /v1/models's first entry. `vocab_size` is its
// `meta.n_vocab` when the server reports one (llama-server does; OpenAI's
// schema has no such field). InvalidArgument when the body is not a list
// with an entry that has a string id.
struct ServedModel {
  std::string id;
  std::optional<int64_t> vocab_size;
};
absl::StatusOr<ServedModel> FirstServedModel(absl::string_view models_body);

// One line of --outputs (no newline): {"salt", "index" (the planned
// request's), "ok", "finish_reason", "completion_tokens", "text"}, and
// "error" when !ok. Invalid UTF-8 in the text is replaced with U+FFFD.
std::string OutputLine(uint64_t salt, int64_t index, const RequestRecord& rec,
                       absl::string_view text, absl::string_view finish_reason);

// The receiving side of one completions stream: fed the body's pieces
// with the time each arrived, it keeps what the record needs. A chunk
// "with text" is one whose choices[0].text is non-empty; the last usage
// seen counts. Not thread-safe.
class CompletionStream {
 public:
  using Clock = std::chrono::steady_clock;

  // False once the stream is broken (not an event stream, a chunk that is
  // not JSON, an error chunk); error() then says why. Events after
  // [DONE] are ignored.
  bool Feed(absl::string_view piece, Clock::time_point now);

  bool done() const { return done_at_.has_value(); }
  // When [DONE] came; nullopt before.
  std::optional<Clock::time_point> done_at() const { return done_at_; }
  const std::string& error() const { return error_; }
  // The text of every chunk so far, and the last finish_reason given.
  const std::string& text() const { return text_; }
  const std::string& finish_reason() const { return finish_reason_; }

  // Fills `rec` for a stream sent at `sent` whose prompt was `prompt_ids`
  // token ids (0 for a text prompt): ok only when [DONE] came and nothing
  // broke (else `error`); prompt and completion tokens from the usage
  // chunk, else the ids sent and the chunks with text
  // (tokens_from_chunks); delivered TTFT = first text chunk - sent, E2E =
  // [DONE] - sent, TPOT = (last - first text chunk) / (tokens - 1); ITL =
  // the gap before each text chunk after the first, plus a 0 for each
  // token past the chunks (tokens that came coalesced), so there are
  // tokens - 1 of them, as on the gRPC side. `rec.sent`, `rec.done` and
  // `rec.tenant` are left to the caller.
  void Fill(Clock::time_point sent, int32_t prompt_ids,
            RequestRecord* rec) const;

 private:
  void Event(const SseEvent& event, Clock::time_point now);

  SseParser parser_;
  std::vector<SseEvent> events_;  // reused between pieces
  std::string error_;
  std::optional<Clock::time_point> done_at_;
  std::optional<Clock::time_point> first_, last_;  // text chunks
  std::vector<double> gaps_;                       // seconds
  int32_t chunks_ = 0;                             // with text
  std::string text_, finish_reason_;
  std::optional<int64_t> prompt_tokens_, completion_tokens_;
};

}  // namespace paceline::tools::bench

#endif  // PACELINE_TOOLS_PACELINE_OPENAI_WIRE_H_
