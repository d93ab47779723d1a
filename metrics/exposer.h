#ifndef PACELINE_METRICS_EXPOSER_H_
#define PACELINE_METRICS_EXPOSER_H_

// Serves a Metrics registry over HTTP at /metrics on its own address (the
// scrape endpoint; nothing else is served there: other paths 404, methods
// other than GET / HEAD 405). One thread of its own serves up to 64
// connections at once from a poll loop, each closed after its response or
// 10 s after it opened, whichever is first (a client dripping its request
// or never reading holds only its own connection); each scrape runs the
// registry's collect hook.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "metrics/metrics.h"

namespace paceline::metrics {

class MetricsExposer {
 public:
  // Listens on `address` ("HOST:PORT" or "[V6HOST]:PORT"; port 0 picks a
  // free port) and serves `metrics`, which must outlive the exposer.
  // InvalidArgument for a malformed address; Unavailable when it cannot
  // listen (address in use, unknown host).
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      absl::string_view address, Metrics* metrics);

  // Stops serving at once (a scrape in progress finishes first).
  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // The bound port.
  int port() const { return port_; }

 private:
  struct State;
  MetricsExposer(std::unique_ptr<State> state, int port);

  const std::unique_ptr<State> state_;
  const int port_;
};

}  // namespace paceline::metrics

#endif  // PACELINE_METRICS_EXPOSER_H_
