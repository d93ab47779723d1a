#ifndef PACELINE_SERVER_FRONTEND_SERVER_OBSERVERS_H_
#define PACELINE_SERVER_FRONTEND_SERVER_OBSERVERS_H_

// What the server side reports for metrics, next to what the scheduler
// reports through scheduler::SchedulerMetrics: delivery to clients
// (DeliveryObserver, in delivery/) and refusals before a request reaches
// the scheduler (the service). Plain observers: calls must be cheap,
// thread-safe and never block. Default implementations do nothing.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/delivery/delivery_observer.h"

namespace paceline::server {

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

#endif  // PACELINE_SERVER_FRONTEND_SERVER_OBSERVERS_H_
