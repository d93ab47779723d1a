#include "tools/paceline/openai_sender.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace paceline::tools::bench {
namespace {

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

HttpHeaders Auth(const std::string& key) {
  if (key.empty()) return {};
  return {{"authorization", absl::StrCat("Bearer ", key)}};
}

}  // namespace

absl::StatusOr<HttpUrl> ParseBenchUrl(absl::string_view url) {
  absl::StatusOr<HttpUrl> parsed = ParseHttpUrl(url);
  if (parsed.ok() && absl::EndsWith(parsed->prefix, "/v1")) {
    parsed->prefix.resize(parsed->prefix.size() - 3);
  }
  return parsed;
}

absl::StatusOr<ServedModel> FetchServedModel(const HttpUrl& url,
                                             const std::string& tls_ca,
                                             const std::string& key,
                                             double timeout_s) {
  HttpConnection c(url, tls_ca);
  HttpRequest request;
  request.target = "/v1/models";
  request.headers = Auth(key);
  absl::StatusOr<HttpResponse> r = c.Exchange(request, After(timeout_s));
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return absl::UnavailableError(absl::StrCat(
        "GET /v1/models: ",
        HttpErrorText(r->status, r->body, r->Header("retry-after-ms"),
                      r->Header("retry-after"))));
  }
  return FirstServedModel(r->body);
}

OpenAiSender::OpenAiSender(HttpUrl url, std::string model,
                           const BenchFlags& flags, std::ostream* outputs)
    : url_(std::move(url)),
      model_(std::move(model)),
      flags_(flags),
      outputs_(outputs) {}

std::unique_ptr<HttpConnection> OpenAiSender::Take() {
  absl::MutexLock lock(&mu_);
  if (idle_.empty())
    return std::make_unique<HttpConnection>(url_, flags_.tls_ca);
  std::unique_ptr<HttpConnection> c = std::move(idle_.back());
  idle_.pop_back();
  return c;
}

void OpenAiSender::Give(std::unique_ptr<HttpConnection> c) {
  if (!c->is_open()) return;
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(c));
}

void OpenAiSender::WriteOutput(const Planned& p, const RequestRecord& rec,
                               const CompletionStream& stream) {
  if (outputs_ == nullptr) return;
  const std::string line =
      OutputLine(p.salt, p.index, rec, stream.text(), stream.finish_reason());
  absl::MutexLock lock(&outputs_mu_);
  *outputs_ << line << '\n';
}

RequestRecord OpenAiSender::Send(const Planned& p, Clock::time_point origin) {
  RequestRecord rec;
  rec.tenant = p.tenant;
  HttpRequest request;
  request.method = "POST";
  request.target = "/v1/completions";
  request.headers = Auth(flags_.tenants[p.tenant].key);
  request.headers.emplace_back("accept", "text/event-stream");
  request.body = CompletionBody(p.request, model_, flags_.extra_body);
  std::unique_ptr<HttpConnection> c = Take();
  CompletionStream stream;
  const Clock::time_point sent = Clock::now();
  rec.sent = Seconds(sent - origin);
  std::optional<Clock::time_point> deadline;
  if (flags_.timeout) deadline = After(*flags_.timeout);
  absl::StatusOr<HttpResponse> r =
      c->Exchange(request, deadline, [&](absl::string_view piece) {
        return stream.Feed(piece, Clock::now());
      });
  rec.done = Seconds(stream.done_at().value_or(Clock::now()) - origin);
  if (!r.ok()) {
    // A broken stream says why better than the connection it closed.
    rec.error = stream.error().empty() ? r.status().ToString() : stream.error();
    WriteOutput(p, rec, stream);
    return rec;
  }
  if (r->status != 200) {
    rec.error = HttpErrorText(r->status, r->body, r->Header("retry-after-ms"),
                              r->Header("retry-after"));
  } else {
    stream.Fill(sent, p.request.token_ids().ids_size(), &rec);
  }
  WriteOutput(p, rec, stream);
  Give(std::move(c));
  return rec;
}

}  // namespace paceline::tools::bench
