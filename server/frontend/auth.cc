#include "server/frontend/auth.h"

#include <openssl/crypto.h>

#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace paceline::server {
namespace {

// Error messages here must never quote the presented key or any part of the
// header value: a mistyped key is usually one character off a real one.
constexpr absl::string_view kMalformed =
    "authorization must be 'Bearer <API key>'";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<Sha256Digest> ParseDigestHex(absl::string_view hex) {
  Sha256Digest digest{};
  if (hex.size() != 2 * digest.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("is ", hex.size(), " characters, not 64 hex digits"));
  }
  for (size_t i = 0; i < digest.size(); ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError("is not 64 hex digits");
    }
    digest[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return digest;
}

// 1 when a == b, else 0. CRYPTO_memcmp reads every byte whatever the
// contents; its nonzero result is folded to 1 without a branch.
size_t DigestsEqual(const Sha256Digest& a, const Sha256Digest& b) {
  const auto r =
      static_cast<uint32_t>(CRYPTO_memcmp(a.data(), b.data(), a.size()));
  const uint32_t differs = (r | (0u - r)) >> 31;
  return static_cast<size_t>(differs ^ 1u);
}

}  // namespace

absl::Status ValidateApiKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("the API key is empty");
  for (const char c : key) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "an API key must be printable ASCII without whitespace");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TenantAuthenticator> TenantAuthenticator::Create(
    std::span<const TenantKeyDigest> keys) {
  std::vector<Entry> entries;
  entries.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const TenantKeyDigest& key = keys[i];
    if (key.tenant.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("API key #", i, ": the tenant name is empty"));
    }
    absl::StatusOr<Sha256Digest> digest = ParseDigestHex(key.sha256_hex);
    if (!digest.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("API key #", i, " of tenant '", key.tenant,
                       "': the SHA-256 digest ", digest.status().message()));
    }
    for (const Entry& e : entries) {
      if (e.digest == *digest) {
        return absl::InvalidArgumentError(absl::StrCat(
            "API key #", i, " of tenant '", key.tenant,
            "' has the same SHA-256 digest as a key of tenant '", e.tenant,
            "'; each key must be configured once"));
      }
    }
    entries.push_back(Entry{key.tenant, *digest});
  }
  return TenantAuthenticator(std::move(entries));
}

absl::StatusOr<std::string> TenantAuthenticator::Authenticate(
    absl::string_view authorization) const {
  constexpr absl::string_view kScheme = "Bearer";
  if (authorization.empty()) {
    return absl::UnauthenticatedError("missing authorization");
  }
  if (authorization.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()),
                              kScheme) ||
      authorization[kScheme.size()] != ' ') {
    return absl::UnauthenticatedError(kMalformed);
  }
  absl::string_view key = authorization.substr(kScheme.size());
  const size_t start = key.find_first_not_of(' ');
  if (start == absl::string_view::npos) {
    return absl::UnauthenticatedError(kMalformed);
  }
  key.remove_prefix(start);
  if (!ValidateApiKey(key).ok()) {
    return absl::UnauthenticatedError(kMalformed);
  }

  // Every entry is compared, match or not; `match` is the matching index
  // plus one, or 0. Digests are unique (Create), so at most one matches.
  const Sha256Digest presented = Sha256(key);
  size_t match = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const size_t mask = 0 - DigestsEqual(presented, entries_[i].digest);
    match |= mask & (i + 1);
  }
  if (match == 0) return absl::UnauthenticatedError("unknown API key");
  return entries_[match - 1].tenant;
}

}  // namespace paceline::server
