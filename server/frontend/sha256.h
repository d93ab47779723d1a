#ifndef PACELINE_SERVER_FRONTEND_SHA256_H_
#define PACELINE_SERVER_FRONTEND_SHA256_H_

// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto, for API-key digests.

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace paceline::server {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(absl::string_view data);

// The digest as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view data);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_SHA256_H_
