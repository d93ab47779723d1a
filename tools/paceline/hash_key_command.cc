// `paceline hash-key [--generate] [KEY]`: the SHA-256 digest of an API key,
// as the config's api_key_sha256 wants it; or a fresh random key and its
// digest.

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/frontend/auth.h"
#include "server/frontend/sha256.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"

namespace paceline::tools {
namespace {

constexpr char kUsage[] =
    "usage: paceline hash-key [KEY]\n"
    "       paceline hash-key --generate\n"
    "\n"
    "Prints the SHA-256 digest (64 hex digits) of the API key KEY, for a\n"
    "tenant's api_key_sha256 in the daemon's config. Without KEY, the key is\n"
    "the first line of stdin (keeps it out of shell history and `ps`).\n"
    "\n"
    "  --generate   make a fresh random key (256 bits from the kernel) and\n"
    "               print it and its digest:\n"
    "                 key: pl-<43 URL-safe base64 characters>\n"
    "                 sha256: <64 hex digits>\n"
    "               Give the key to the client; put only the digest in the\n"
    "               config.\n";

constexpr FlagDef kFlags[] = {{"generate", false}};

// "pl-" and 32 bytes from getrandom(2) in unpadded URL-safe base64.
absl::StatusOr<std::string> GenerateKey() {
  std::array<uint8_t, 32> bytes{};
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    filled += static_cast<size_t>(n);
  }
  return absl::StrCat(
      "pl-", absl::WebSafeBase64Escape(absl::string_view(
                 reinterpret_cast<const char*>(bytes.data()), bytes.size())));
}

// The first line of stdin without its line ending.
std::string ReadKeyLine() {
  std::string line;
  std::getline(std::cin, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace

int RunHashKey(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("hash-key", kUsage, parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (parsed->positional().size() > 1) {
    return UsageError("hash-key", kUsage, "expected at most one KEY");
  }
  if (parsed->Has("generate")) {
    if (!parsed->positional().empty()) {
      return UsageError("hash-key", kUsage, "--generate takes no KEY");
    }
    absl::StatusOr<std::string> key = GenerateKey();
    if (!key.ok()) return Failure("hash-key", key.status());
    std::cout << "key: " << *key << "\nsha256: " << server::Sha256Hex(*key)
              << "\n";
    return kExitOk;
  }
  const std::string key = parsed->positional().empty()
                              ? ReadKeyLine()
                              : parsed->positional()[0];
  // A key that could never be sent as "Bearer KEY" is a mistake worth
  // reporting rather than hashing.
  if (const absl::Status valid = server::ValidateApiKey(key); !valid.ok()) {
    return Failure("hash-key", valid);
  }
  std::cout << server::Sha256Hex(key) << "\n";
  return kExitOk;
}

}  // namespace paceline::tools
