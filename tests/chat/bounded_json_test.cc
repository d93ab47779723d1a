#include "chat/bounded_json.h"

#include <string>

#include "gtest/gtest.h"

namespace paceline::chat {
namespace {

using Json = nlohmann::ordered_json;

// A JSON object text {"k0":0,"k1":1,...} of `n` keys.
std::string ObjectOfKeys(int n) {
  std::string text = "{";
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ",", "\"k", i, "\":", i);
  }
  return text + "}";
}

// nlohmann's own parser is the oracle for what the value is.
void ExpectSameAsNlohmann(const std::string& text) {
  SCOPED_TRACE(text);
  absl::StatusOr<Json> ours = ParseBoundedJson(text, "the text", {}, nullptr);
  ASSERT_TRUE(ours.ok()) << ours.status();
  const Json theirs = Json::parse(text);
  EXPECT_EQ(*ours, theirs);
  EXPECT_EQ(ours->dump(), theirs.dump());  // member order too
}

TEST(BoundedJsonTest, ValuesAreWhatNlohmannParses) {
  for (const char* text :
       {"null", "true", "-12", "18446744073709551615", "1.5e3", "\"a\\u00e9\"",
        "[]", "{}", "[1,[2,[3]],{\"a\":{}}]",
        "{\"z\":1,\"a\":[true,null],\"m\":{\"y\":\"x\",\"b\":2}}"}) {
    ExpectSameAsNlohmann(text);
  }
  ExpectSameAsNlohmann(ObjectOfKeys(100));  // past the scanned size
}

TEST(BoundedJsonTest, RepeatedKeyKeepsFirstPlaceAndLastValue) {
  ExpectSameAsNlohmann(R"({"a":1,"b":2,"a":3})");
  // The same past the size where keys are indexed.
  std::string text = ObjectOfKeys(20);
  text.back() = ',';
  text += R"("k3":"again","k19":[1]})";
  ExpectSameAsNlohmann(text);
}

TEST(BoundedJsonTest, MalformedTextIsRefusedByName) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "1 2", "nul"}) {
    absl::StatusOr<Json> got = ParseBoundedJson(text, "the body", {}, nullptr);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(got.status().message(), "the body is not valid JSON") << text;
  }
}

TEST(BoundedJsonTest, KeysPerObjectAreBounded) {
  JsonLimits limits;
  limits.max_object_keys = 50;
  EXPECT_TRUE(ParseBoundedJson(ObjectOfKeys(50), "b", limits, nullptr).ok());
  std::string where = "unset";
  absl::StatusOr<Json> top =
      ParseBoundedJson(ObjectOfKeys(51), "the body", limits, nullptr, &where);
  EXPECT_EQ(top.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(top.status().message(), "the body has more than 50 keys");
  EXPECT_EQ(where, "");
  const std::string nested =
      absl::StrCat(R"({"model":"m","kw":[0,{"x":)", ObjectOfKeys(51), "}]}");
  absl::StatusOr<Json> inner =
      ParseBoundedJson(nested, "the body", limits, nullptr, &where);
  EXPECT_EQ(inner.status().message(),
            "the body: 'kw[1].x' has more than 50 keys");
  EXPECT_EQ(where, "kw[1].x");
}

TEST(BoundedJsonTest, DepthIsBounded) {
  JsonLimits limits;
  limits.max_depth = 3;
  EXPECT_TRUE(ParseBoundedJson("[[[1]]]", "b", limits, nullptr).ok());
  std::string where = "unset";
  absl::StatusOr<Json> deep =
      ParseBoundedJson(R"({"a":[1,[{}]]})", "the body", limits, nullptr,
                       &where);
  EXPECT_EQ(deep.status().message(),
            "the body (at 'a[1][0]') nests arrays and objects deeper than 3 "
            "levels");
  EXPECT_EQ(where, "unset");  // set by the key limit only
  // A million levels are refused at the fourth: no recursion, no blow-up.
  const std::string million(1'000'000, '[');
  EXPECT_EQ(ParseBoundedJson(million, "b", limits, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BoundedJsonTest, ValuesAreCountedAcrossTextsSharingABudget) {
  JsonBudget budget(10);
  // [1,2,3] is 4 values, {"a":[true]} 3.
  EXPECT_TRUE(ParseBoundedJson("[1,2,3]", "one", {}, &budget).ok());
  EXPECT_TRUE(ParseBoundedJson(R"({"a":[true]})", "two", {}, &budget).ok());
  EXPECT_EQ(budget.left, 3);
  std::string where;
  absl::StatusOr<Json> third =
      ParseBoundedJson("[0,[1,2]]", "three", {}, &budget, &where);
  EXPECT_EQ(third.status().message(),
            "three (at '[1][0]') holds more than 10 JSON values (arrays, "
            "objects and scalars) in all");
}

TEST(BoundedJsonTest, AppendNewMemberKeepsOrder) {
  Json object = Json::object();
  AppendNewMember(&object, "b", 1);
  AppendNewMember(&object, "a", Json::array({2}));
  EXPECT_EQ(object.dump(), R"({"b":1,"a":[2]})");
  EXPECT_EQ(object["a"][0], 2);
}

}  // namespace
}  // namespace paceline::chat
