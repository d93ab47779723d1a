#include "server/grpc/call_stream.h"

#include <utility>

namespace paceline::server {

absl::Status CallStream::Start(absl::StatusOr<BuiltRequest> built,
                               StreamWriter* writer, bool observed) {
  if (CancelledEarly()) return absl::CancelledError("the client cancelled");
  if (!built.ok()) return built.status();
  stream_ = frontend_->OpenStream(*std::move(built), writer, nullptr, observed);
  if (absl::Status submitted = frontend_->Submit(stream_); !submitted.ok()) {
    stream_.buffer = nullptr;  // detached: nothing was written
    return submitted;
  }
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
    cancelled = cancelled_;
  }
  if (cancelled) Stop();  // OnCancel came while it was submitted
  return absl::OkStatus();
}

void CallStream::OnCancel() {
  bool started = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    started = started_;
  }
  if (started) Stop();
}

void CallStream::Stop() {
  frontend_->Stop(stream_, absl::CancelledError("the client cancelled"));
}

bool CallStream::Release() {
  if (owners_.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
  if (stream_.buffer != nullptr) stream_.buffer->Detach();
  if (stream_.id != 0) frontend_->Unregister(stream_.id);
  return true;
}

}  // namespace paceline::server
