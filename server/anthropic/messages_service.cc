#include "server/anthropic/messages_service.h"

#include <memory>
#include <string>
#include <utility>

#include "server/anthropic/anthropic_error.h"
#include "server/anthropic/messages_answer.h"
#include "server/anthropic/messages_request.h"
#include "server/openai/generation_call.h"
#include "server/openai/openai_http.h"
#include "server/openai/openai_json.h"

namespace paceline::server::anthropic {
namespace {

using openai::OpenAiService;

void Messages(Frontend* frontend, OpenAiService::RouteCall& call) {
  absl::StatusOr<openai::OpenAiRequest> parsed =
      ParseMessagesRequest(call.request.body);
  if (!parsed.ok()) return RespondError(*call.exchange, parsed.status());
  const v1::StoppingOptions& stopping = parsed->prompts.front().stopping();
  auto format = std::make_unique<MessagesAnswer>(
      MessageId(frontend->NextSeed()), frontend->model().id,
      std::vector<std::string>(stopping.stop().begin(), stopping.stop().end()));
  openai::StartGenerationCall(frontend, call.tenant, *std::move(parsed),
                              std::move(format), std::move(call.exchange));
}

void CountTokens(Frontend* frontend, OpenAiService::RouteCall& call) {
  absl::StatusOr<openai::OpenAiRequest> parsed =
      ParseCountTokensRequest(call.request.body);
  if (!parsed.ok()) return RespondError(*call.exchange, parsed.status());
  v1::GenerateRequest& request = parsed->prompts.front();
  // Only the prompt counts: no output, so no constraint to compile.
  request.mutable_stopping()->set_max_tokens(1);
  request.mutable_sampling()->clear_constraint();
  absl::StatusOr<BuiltRequest> built = frontend->Build(*call.tenant, request);
  if (!built.ok()) return RespondError(*call.exchange, built.status());
  openai::Json body = openai::Json::object();
  body["input_tokens"] = built->spec.prompt.size();
  openai::RespondJson(*call.exchange, body);
}

}  // namespace

std::vector<OpenAiService::ApiRoute> MessagesRoutes(Frontend* frontend) {
  auto route = [frontend](
                   const char* path, OpenAiService::Runs runs,
                   void (*handler)(Frontend*, OpenAiService::RouteCall&)) {
    OpenAiService::ApiRoute r;
    r.pattern = {"POST", path};
    r.needs_key = true;
    r.takes_x_api_key = true;
    r.runs = runs;
    r.handler = [frontend, handler](OpenAiService::RouteCall& call) {
      handler(frontend, call);
    };
    r.respond_error = [](http::HttpExchange& exchange,
                         const absl::Status& status) {
      RespondError(exchange, status);
    };
    return r;
  };
  return {
      route("/v1/messages", OpenAiService::Runs::kOnIntakeGeneration,
            &Messages),
      route("/v1/messages/count_tokens", OpenAiService::Runs::kOnIntake,
            &CountTokens),
  };
}

}  // namespace paceline::server::anthropic
