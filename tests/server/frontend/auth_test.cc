#include "server/frontend/auth.h"
#include "server/grpc/grpc_auth.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/frontend/sha256.h"

namespace paceline::server {
namespace {

using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

// A call's key as the gRPC service reads it: the metadata entry, then
// the authenticator.
absl::StatusOr<std::string> AuthenticateMetadata(
    const TenantAuthenticator& auth, const Metadata& metadata) {
  absl::StatusOr<absl::string_view> value = AuthorizationMetadata(metadata);
  if (!value.ok()) return value.status();
  return auth.Authenticate(*value);
}

constexpr char kAliceKey[] = "pl-alice-secret";
constexpr char kBobKey[] = "pl-bob-secret";

TenantAuthenticator MakeAuthenticator() {
  const std::vector<TenantKeyDigest> keys = {
      {"alice", Sha256Hex(kAliceKey)},
      {"bob", Sha256Hex(kBobKey)},
  };
  auto auth = TenantAuthenticator::Create(keys);
  EXPECT_TRUE(auth.ok()) << auth.status();
  return *std::move(auth);
}

void ExpectUnauthenticated(const absl::StatusOr<std::string>& result) {
  ASSERT_FALSE(result.ok()) << "authenticated as " << *result;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnauthenticated)
      << result.status();
}

TEST(TenantAuthenticatorTest, GoodKeyNamesItsTenant) {
  const TenantAuthenticator auth = MakeAuthenticator();
  EXPECT_EQ(auth.num_keys(), 2u);
  auto alice = auth.Authenticate(std::string("Bearer ") + kAliceKey);
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(*alice, "alice");
  auto bob = auth.Authenticate(std::string("Bearer ") + kBobKey);
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_EQ(*bob, "bob");
}

TEST(TenantAuthenticatorTest, SchemeIsCaseInsensitiveAndSpacesMayRepeat) {
  const TenantAuthenticator auth = MakeAuthenticator();
  for (const std::string prefix : {"bearer ", "BEARER ", "bEaReR    "}) {
    auto tenant = auth.Authenticate(prefix + kAliceKey);
    ASSERT_TRUE(tenant.ok()) << prefix << ": " << tenant.status();
    EXPECT_EQ(*tenant, "alice");
  }
}

TEST(TenantAuthenticatorTest, WrongKeyIsRejectedWithoutEchoingIt) {
  const TenantAuthenticator auth = MakeAuthenticator();
  const std::string wrong = "pl-alice-secreT";
  const auto result = auth.Authenticate("Bearer " + wrong);
  ExpectUnauthenticated(result);
  EXPECT_EQ(result.status().message().find(wrong), absl::string_view::npos)
      << result.status();
  EXPECT_EQ(result.status().message().find("alice"), absl::string_view::npos)
      << result.status();
}

TEST(TenantAuthenticatorTest, MalformedValuesAreRejected) {
  const TenantAuthenticator auth = MakeAuthenticator();
  const std::string key = kAliceKey;
  for (const std::string& value : std::vector<std::string>{
           std::string(), "Basic x", "Basic " + key, "Bearer", "Bearer ",
        "Bearer    ", "Bearer" + key, key, " Bearer " + key,
        "Bearer\t" + key, "Bearer " + key + " ", "Bearer " + key + " extra",
        "Bearer pl-alice\nsecret", "Token " + key}) {
    const auto result = auth.Authenticate(value);
    ExpectUnauthenticated(result);
    if (!result.ok()) {
      EXPECT_EQ(result.status().message().find(key), absl::string_view::npos)
          << result.status();
    }
  }
}

TEST(TenantAuthenticatorTest, UppercaseDigestIsAccepted) {
  const std::vector<TenantKeyDigest> keys = {
      {"carol", absl::AsciiStrToUpper(Sha256Hex("carol-key"))}};
  auto auth = TenantAuthenticator::Create(keys);
  ASSERT_TRUE(auth.ok()) << auth.status();
  auto tenant = auth->Authenticate("Bearer carol-key");
  ASSERT_TRUE(tenant.ok()) << tenant.status();
  EXPECT_EQ(*tenant, "carol");
}

TEST(TenantAuthenticatorTest, TenantMayHaveSeveralKeys) {
  const std::vector<TenantKeyDigest> keys = {{"alice", Sha256Hex("old")},
                                             {"alice", Sha256Hex("new")}};
  auto auth = TenantAuthenticator::Create(keys);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(*auth->Authenticate("Bearer old"), "alice");
  EXPECT_EQ(*auth->Authenticate("Bearer new"), "alice");
}

TEST(TenantAuthenticatorTest, DuplicateDigestsAreRejected) {
  const std::string digest = Sha256Hex("shared");
  const std::vector<TenantKeyDigest> keys = {
      {"alice", digest}, {"bob", absl::AsciiStrToUpper(digest)}};
  auto auth = TenantAuthenticator::Create(keys);
  ASSERT_FALSE(auth.ok());
  EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(auth.status().message().find("alice"), absl::string_view::npos)
      << auth.status();
  EXPECT_NE(auth.status().message().find("bob"), absl::string_view::npos)
      << auth.status();
}

TEST(TenantAuthenticatorTest, BadDigestsAndTenantsAreRejected) {
  const std::string good = Sha256Hex("k");
  for (const TenantKeyDigest& bad : std::vector<TenantKeyDigest>{
           {"alice", ""},
           {"alice", good.substr(1)},
           {"alice", good + "0"},
           {"alice", absl::StrCat("g", good.substr(1))},
           {"alice", absl::StrCat(" ", good.substr(1))},
           {"", good}}) {
    auto auth = TenantAuthenticator::Create(std::vector<TenantKeyDigest>{bad});
    ASSERT_FALSE(auth.ok()) << "'" << bad.tenant << "' " << bad.sha256_hex;
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(TenantAuthenticatorTest, NoKeysAuthenticatesNobody) {
  auto auth = TenantAuthenticator::Create({});
  ASSERT_TRUE(auth.ok()) << auth.status();
  ExpectUnauthenticated(auth->Authenticate("Bearer anything"));
}

TEST(TenantAuthenticatorTest, MetadataWithOneAuthorizationEntry) {
  const TenantAuthenticator auth = MakeAuthenticator();
  const std::string value = std::string("Bearer ") + kBobKey;
  const Metadata metadata = {{"user-agent", "grpc-c++/1.51"},
                             {"authorization", value}};
  auto tenant = AuthenticateMetadata(auth, metadata);
  ASSERT_TRUE(tenant.ok()) << tenant.status();
  EXPECT_EQ(*tenant, "bob");
}

TEST(TenantAuthenticatorTest, MetadataWithoutAuthorizationIsRejected) {
  const TenantAuthenticator auth = MakeAuthenticator();
  ExpectUnauthenticated(AuthenticateMetadata(auth, {}));
  ExpectUnauthenticated(
      AuthenticateMetadata(auth, {{"authorizatio", "Bearer x"}}));
}

TEST(TenantAuthenticatorTest, MetadataWithTwoAuthorizationEntriesIsRejected) {
  const TenantAuthenticator auth = MakeAuthenticator();
  const std::string alice = std::string("Bearer ") + kAliceKey;
  const std::string bob = std::string("Bearer ") + kBobKey;
  ExpectUnauthenticated(AuthenticateMetadata(auth, 
      {{"authorization", alice}, {"authorization", bob}}));
  // Even two copies of the same good value.
  ExpectUnauthenticated(AuthenticateMetadata(auth, 
      {{"authorization", alice}, {"authorization", alice}}));
}

TEST(ValidateApiKeyTest, PrintableAsciiWithoutWhitespace) {
  EXPECT_TRUE(ValidateApiKey("pl-AbC_09-~!").ok());
  EXPECT_FALSE(ValidateApiKey("").ok());
  EXPECT_FALSE(ValidateApiKey("a b").ok());
  EXPECT_FALSE(ValidateApiKey("a\tb").ok());
  EXPECT_FALSE(ValidateApiKey("ab\n").ok());
  EXPECT_FALSE(ValidateApiKey("caf\xc3\xa9").ok());
  EXPECT_FALSE(ValidateApiKey(std::string("a\0b", 3)).ok());
}

}  // namespace
}  // namespace paceline::server
