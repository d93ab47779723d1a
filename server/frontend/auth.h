#ifndef PACELINE_SERVER_FRONTEND_AUTH_H_
#define PACELINE_SERVER_FRONTEND_AUTH_H_

// API-key authentication: which tenant sent a request.
//
// The config holds, per tenant, the SHA-256 digests of its API keys (never
// the keys). A client sends `authorization: Bearer <key>`; the key is hashed
// and compared against every configured digest in constant time, so neither
// where a wrong key first differs nor which tenant a right key belongs to
// shows in the time taken.

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/frontend/sha256.h"

namespace paceline::server {

// One configured API key of a tenant, as the SHA-256 digest of the key.
struct TenantKeyDigest {
  std::string tenant;
  std::string sha256_hex;  // 64 hex digits, either case
};

// OK when `key` can be sent as a bearer token: non-empty, printable ASCII,
// no whitespace. InvalidArgument otherwise; the message never contains the
// key.
absl::Status ValidateApiKey(absl::string_view key);

// Immutable after Create; thread-safe (every method is const).
class TenantAuthenticator {
 public:
  // InvalidArgument when a tenant name is empty, a digest is not 64 hex
  // digits, or two entries share a digest (one key would name two tenants).
  // A tenant may have several keys (rotation). An empty list is allowed:
  // every request then fails to authenticate.
  static absl::StatusOr<TenantAuthenticator> Create(
      std::span<const TenantKeyDigest> keys);

  // `authorization` is an `authorization` header value. It must be
  // "Bearer <key>": the scheme in any case, one or more spaces, then a key
  // that passes ValidateApiKey. Returns the key's tenant; UNAUTHENTICATED
  // when the value is empty, malformed or holds an unknown key. Error
  // messages never contain the key.
  absl::StatusOr<std::string> Authenticate(
      absl::string_view authorization) const;

  // The number of configured keys.
  size_t num_keys() const { return entries_.size(); }

 private:
  struct Entry {
    std::string tenant;
    Sha256Digest digest{};
  };

  explicit TenantAuthenticator(std::vector<Entry> entries)
      : entries_(std::move(entries)) {}

  std::vector<Entry> entries_;
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_AUTH_H_
