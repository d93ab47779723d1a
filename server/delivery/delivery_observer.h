#ifndef PACELINE_SERVER_DELIVERY_DELIVERY_OBSERVER_H_
#define PACELINE_SERVER_DELIVERY_DELIVERY_OBSERVER_H_

// What delivery reports for metrics: the StreamBuffer of each Generate
// stream calls it. A plain observer: calls come from gRPC threads and the
// pacer thread (never from the engine thread), must be cheap, thread-safe
// and never block. Default implementations do nothing.

#include <cstdint>

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

}  // namespace paceline::server

#endif  // PACELINE_SERVER_DELIVERY_DELIVERY_OBSERVER_H_
