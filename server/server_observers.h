#ifndef PACELINE_SERVER_SERVER_OBSERVERS_H_
#define PACELINE_SERVER_SERVER_OBSERVERS_H_

// What the server side reports for metrics, next to what the scheduler
// reports through scheduler::SchedulerMetrics: delivery to clients (the
// StreamBuffer of each Generate stream) and refusals before a request
// reaches the scheduler (the service). Plain observers: calls come from
// gRPC, pacer and engine threads, must be cheap, thread-safe and never
// block. Default implementations do nothing.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace paceline::server {

class DeliveryObserver {
 public:
  virtual ~DeliveryObserver() = default;

  // A Generate stream's buffer was created / has handed its last message to
  // the writer (or was detached): once each per stream.
  virtual void OnStreamOpened() {}
  virtual void OnStreamClosed() {}
  // A write carrying `tokens` (>= 1) token ids has reached the client.
  // `first`: the stream's first such write; `since` is then the time since
  // the stream was queued, otherwise the time since the previous such
  // write completed.
  virtual void OnDelivered(absl::string_view tenant, bool first,
                           absl::Duration since, int32_t tokens) {
    (void)tenant;
    (void)first;
    (void)since;
    (void)tokens;
  }
};

class RejectionObserver {
 public:
  virtual ~RejectionObserver() = default;

  // A Generate or Complete call refused by the service itself
  // (UNAUTHENTICATED, INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE while
  // draining, ...). `tenant` is "" when the caller was not authenticated.
  // Refusals by the scheduler go through SchedulerMetrics::OnRejected.
  virtual void OnRejected(absl::string_view tenant, absl::StatusCode code) {
    (void)tenant;
    (void)code;
  }
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_SERVER_OBSERVERS_H_
