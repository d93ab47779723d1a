#include "metrics/exposer.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "metrics/metrics_impl.h"
#include "prometheus/exposer.h"

namespace paceline::metrics {

struct MetricsExposer::State {
  std::unique_ptr<prometheus::Exposer> exposer;
};

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    absl::string_view address, Metrics* metrics) {
  auto state = std::make_unique<State>();
  // prometheus-cpp reports a failed bind by throwing (civetweb's
  // CivetException); nothing else here throws.
  try {
    state->exposer = std::make_unique<prometheus::Exposer>(std::string(address),
                                                           /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  const std::vector<int> ports = state->exposer->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": no port bound"));
  }
  state->exposer->RegisterCollectable(metrics->impl_->collectable);
  const int port = ports.front();
  return std::unique_ptr<MetricsExposer>(
      new MetricsExposer(std::move(state), port));
}

MetricsExposer::MetricsExposer(std::unique_ptr<State> state, int port)
    : state_(std::move(state)), port_(port) {}

MetricsExposer::~MetricsExposer() = default;

}  // namespace paceline::metrics
