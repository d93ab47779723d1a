#include "server/frontend/sha256.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"

namespace paceline::server {

Sha256Digest Sha256(absl::string_view data) {
  Sha256Digest digest{};
  unsigned int size = 0;
  // EVP_Digest only fails on allocation failure inside OpenSSL; the digest
  // is then left zeroed, which matches no configured key.
  EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(),
             nullptr);
  return digest;
}

std::string Sha256Hex(absl::string_view data) {
  const Sha256Digest digest = Sha256(data);
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace paceline::server
