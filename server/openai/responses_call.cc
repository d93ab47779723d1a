#include "server/openai/responses_call.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/openai/generation_call.h"
#include "server/openai/openai_http.h"
#include "server/openai/responses_answer.h"
#include "server/openai/responses_request.h"

namespace paceline::server::openai {

void StartResponsesCall(Frontend* frontend, const TenantPolicy* tenant,
                        const http::HttpRequest& request,
                        std::shared_ptr<http::HttpExchange> exchange) {
  ResponsesContext context;
  absl::StatusOr<OpenAiRequest> parsed =
      ParseResponsesRequest(request.body, &context.echo);
  if (!parsed.ok()) return RespondError(*exchange, parsed.status());
  context.id = ResponsesId("resp_", frontend->NextSeed());
  context.created_at = absl::ToUnixSeconds(absl::Now());
  context.model = frontend->model().id;
  context.item_seed = frontend->NextSeed();
  StartGenerationCall(frontend, tenant, *std::move(parsed),
                      std::make_unique<ResponsesAnswer>(std::move(context)),
                      std::move(exchange));
}

void RespondResponseNotStored(const http::HttpRequest& request,
                              http::HttpExchange& exchange) {
  RespondError(exchange,
               absl::NotFoundError(absl::StrCat(
                   request.method, " ", request.path,
                   ": Paceline's Responses API is stateless and stores no "
                   "responses; resend the conversation as 'input' (the "
                   "earlier input items and the output items returned)")));
}

}  // namespace paceline::server::openai
