#ifndef PACELINE_TOOLS_PACELINE_OPENAI_SENDER_H_
#define PACELINE_TOOLS_PACELINE_OPENAI_SENDER_H_

// `paceline bench --api openai`'s Sender: each planned request becomes a
// streamed POST /v1/completions (openai_wire.h has the body and how the
// stream is timed) on a keep-alive HTTP connection, with the tenant's key
// as `Authorization: Bearer KEY` (none for an empty key).

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tools/paceline/bench_runner.h"
#include "tools/paceline/http_client.h"
#include "tools/paceline/openai_wire.h"

namespace paceline::tools::bench {

// Synthetic prompt ids are below this without --vocab-size or a
// vocabulary size from the server: ids 3..258 are the byte tokens of
// llama vocabularies and valid in any vocabulary of 259 or more.
inline constexpr int64_t kPortableVocabSize = 259;

// --url: ParseHttpUrl's, with a trailing "/v1" dropped from the prefix
// (OpenAI clients' base URLs end in /v1; the targets here carry it).
absl::StatusOr<HttpUrl> ParseBenchUrl(absl::string_view url);

// GET /v1/models with `key` (trusting `tls_ca` over https), within `timeout_s`
// seconds: the served model. The HTTP errors as Unavailable, with
// HttpErrorText's line.
absl::StatusOr<ServedModel> FetchServedModel(const HttpUrl& url,
                                             const std::string& tls_ca,
                                             const std::string& key,
                                             double timeout_s);

class OpenAiSender : public Sender {
 public:
  // Sends to `url` for `model` with the flags' tenants, --tls-ca,
  // --timeout and --extra-body (checked by the caller), writing each
  // request's OutputLine to `outputs` when not null. `flags` and `outputs`
  // must outlive it.
  OpenAiSender(HttpUrl url, std::string model, const BenchFlags& flags,
               std::ostream* outputs = nullptr);

  // A non-2xx answer is a failed record with HttpErrorText's line (a 429
  // included: it is counted, with the server's retry hint, not retried,
  // as gRPC's RESOURCE_EXHAUSTED is); so is a broken or unfinished
  // stream, or a connection that fails.
  RequestRecord Send(const Planned& planned, Clock::time_point origin) override;

 private:
  // An idle connection (the one returned last, so a closed-loop worker
  // keeps its own), or a new one.
  std::unique_ptr<HttpConnection> Take();
  // Keeps `c` for the next request when it is still open.
  void Give(std::unique_ptr<HttpConnection> c);
  void WriteOutput(const Planned& p, const RequestRecord& rec,
                   const CompletionStream& stream);

  const HttpUrl url_;
  const std::string model_;
  const BenchFlags& flags_;

  absl::Mutex mu_;
  std::vector<std::unique_ptr<HttpConnection>> idle_ ABSL_GUARDED_BY(mu_);

  absl::Mutex outputs_mu_;  // one line at a time
  std::ostream* const outputs_ ABSL_PT_GUARDED_BY(outputs_mu_);
};

}  // namespace paceline::tools::bench

#endif  // PACELINE_TOOLS_PACELINE_OPENAI_SENDER_H_
