// Malformed GGUF files, built in the test: each must be rejected with the
// right status code and a message that says what is wrong and where.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"

namespace paceline::engine {
namespace {

namespace gt = ::paceline::testing;
using ::testing::HasSubstr;

// The file views `bytes`, which must outlive it (ASan found a test parsing
// a temporary): a temporary does not compile.
absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const std::string& bytes) {
  return GgufFile::FromBuffer(reinterpret_cast<const uint8_t*>(bytes.data()),
                              bytes.size());
}
absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::string&& bytes) = delete;

// Parses `bytes`, expects failure with `code` and every one of `parts` in
// the message.
void ExpectError(const std::string& bytes, absl::StatusCode code,
                 const std::vector<std::string>& parts) {
  auto file = Parse(bytes);
  ASSERT_FALSE(file.ok()) << "parsed a corrupt file";
  EXPECT_EQ(file.status().code(), code) << file.status();
  for (const std::string& part : parts) {
    EXPECT_THAT(file.status().message(), HasSubstr(part));
  }
}

// A small valid file: two metadata entries and two F32 tensors, the last one
// ending exactly at the end of the file.
gt::GgufBuilder BaseBuilder() {
  gt::GgufBuilder b;
  b.Add("general.architecture", gt::Str("llama"))
      .Add("tokens", gt::StrArray({"a", "bc"}))
      .AddF32Tensor("first", {4})
      .AddF32Tensor("second", {2, 4});
  return b;
}

TEST(GgufCorruptTest, BaseFileIsValid) {
  const std::string bytes = BaseBuilder().Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 2u);
}

TEST(GgufCorruptTest, EveryTruncationIsDataLoss) {
  const std::string bytes = BaseBuilder().Build();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string prefix = bytes.substr(0, n);
    auto file = Parse(prefix);
    ASSERT_FALSE(file.ok()) << "truncated to " << n << " bytes parsed";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss)
        << n << ": " << file.status();
  }
}

TEST(GgufCorruptTest, TruncatedAtKnownPoints) {
  gt::GgufLayout l;
  const std::string bytes = BaseBuilder().Build(&l);
  const auto cut = [&](uint64_t n) { return bytes.substr(0, n); };

  ExpectError(cut(2), absl::StatusCode::kDataLoss,
              {"magic at offset 0", "need 4 bytes, 2 remain"});
  ExpectError(cut(12), absl::StatusCode::kDataLoss,
              {"tensor count at offset 8", "need 8 bytes, 4 remain"});
  // Inside the second entry's value (the array's element type and count).
  ExpectError(
      cut(l.kv_value_offsets[1] + 6), absl::StatusCode::kDataLoss,
      {"metadata 'tokens' (#1, at offset " + std::to_string(l.kv_offsets[1]) +
           ")",
       "array length at offset " + std::to_string(l.kv_value_offsets[1] + 4)});
  // Inside the second tensor's name.
  ExpectError(cut(l.tensor_info_offsets[1] + 9), absl::StatusCode::kDataLoss,
              {"tensor #1 (info at offset " +
               std::to_string(l.tensor_info_offsets[1]) + ")"});
  // One byte short of the last tensor's data.
  const uint64_t begin = l.tensor_data_offsets[1];
  ExpectError(cut(bytes.size() - 1), absl::StatusCode::kDataLoss,
              {"tensor 'second' (#1, info at offset " +
                   std::to_string(l.tensor_info_offsets[1]) + ")",
               absl::StrCat("data [", begin, ", ", begin + 32,
                            ") extends past end of file (", bytes.size() - 1,
                            " bytes)")});
}

TEST(GgufCorruptTest, WrongMagic) {
  ExpectError(BaseBuilder().SetMagic("GGML").Build(),
              absl::StatusCode::kInvalidArgument,
              {"not a GGUF file", "magic at offset 0 is GGML"});
}

TEST(GgufCorruptTest, UnsupportedVersions) {
  ExpectError(BaseBuilder().SetVersion(1).Build(),
              absl::StatusCode::kUnimplemented, {"unsupported GGUF version 1"});
  ExpectError(BaseBuilder().SetVersion(4).Build(),
              absl::StatusCode::kUnimplemented,
              {"unsupported GGUF version 4 (offset 4)"});
  ExpectError(BaseBuilder().SetVersion(0x03000000).Build(),
              absl::StatusCode::kUnimplemented, {"big-endian"});
}

TEST(GgufCorruptTest, TensorCountBeyondTheFile) {
  ExpectError(BaseBuilder().OverrideTensorCount(uint64_t{1} << 60).Build(),
              absl::StatusCode::kDataLoss,
              {"tensor count 1152921504606846976 at offset 8 cannot fit"});
}

TEST(GgufCorruptTest, MetadataCountBeyondTheFile) {
  ExpectError(BaseBuilder().OverrideKvCount(~uint64_t{0}).Build(),
              absl::StatusCode::kDataLoss,
              {"metadata count 18446744073709551615 at offset 16"});
  // A count merely one too high runs into the tensor infos, which do not
  // parse as an entry.
  const std::string bytes = BaseBuilder().OverrideKvCount(3).Build();
  EXPECT_FALSE(Parse(bytes).ok());
}

TEST(GgufCorruptTest, HugeStringLength) {
  gt::GgufLayout l;
  const std::string value =
      gt::GgufBuilder()
          .Add("name", gt::RawValue(gt::gguf_type::kString,
                                    gt::EncodeU64(uint64_t{1} << 40) + "abc"))
          .Build(&l);
  ExpectError(
      value, absl::StatusCode::kDataLoss,
      {"metadata 'name' (#0, at offset 24)",
       "string value at offset " + std::to_string(l.kv_value_offsets[0]),
       "claims 1099511627776 bytes but only 3 remain"});

  // The same in a key.
  std::string key = gt::GgufBuilder().Add("k", gt::U8(0)).Build();
  gt::PatchU64(&key, 24, uint64_t{1} << 40);
  ExpectError(key, absl::StatusCode::kDataLoss,
              {"metadata #0 (at offset 24)", "key at offset 24 claims"});
}

TEST(GgufCorruptTest, HugeArrayLength) {
  gt::GgufLayout l;
  const std::string bytes =
      gt::GgufBuilder()
          .Add("a", gt::RawArray(gt::gguf_type::kUint32, uint64_t{1} << 50,
                                 std::string(40, '\0')))
          .Build(&l);
  ExpectError(
      bytes, absl::StatusCode::kDataLoss,
      {"metadata 'a' (#0, at offset 24)",
       "array of uint32 at offset " + std::to_string(l.kv_value_offsets[0]),
       "claims 1125899906842624 elements (at least 4 bytes each) but "
       "only 40 bytes remain"});
}

TEST(GgufCorruptTest, ArrayElementsOverThePerFileLimit) {
  // Enough bytes to back every element, but more elements than the reader
  // will hold in memory.
  const uint64_t n = kGgufMaxArrayElements + 1;
  const std::string bytes =
      gt::GgufBuilder()
          .Add("a", gt::RawArray(gt::gguf_type::kUint8, n, std::string(n, 1)))
          .Build();
  ExpectError(bytes, absl::StatusCode::kResourceExhausted,
              {"metadata 'a'", absl::StrCat("has ", n, " elements")});
}

TEST(GgufCorruptTest, ArraysNestedTooDeep) {
  gt::GgufValueBytes v = gt::I32Array({1});
  for (int depth = 1; depth < kGgufMaxArrayDepth; ++depth) {
    v = gt::Array(gt::gguf_type::kArray, {v});
  }
  const std::string bytes = gt::GgufBuilder().Add("ok", v).Build();
  EXPECT_TRUE(Parse(bytes).ok());
  v = gt::Array(gt::gguf_type::kArray, {v});
  ExpectError(gt::GgufBuilder().Add("deep", v).Build(),
              absl::StatusCode::kInvalidArgument,
              {"metadata 'deep'", "nests deeper than 8 levels"});
}

TEST(GgufCorruptTest, UnknownValueTypes) {
  gt::GgufLayout l;
  std::string bytes = gt::GgufBuilder()
                          .Add("x", gt::U8(1))
                          .Add("bad", gt::RawValue(13, "abcd"))
                          .Build(&l);
  ExpectError(
      bytes, absl::StatusCode::kInvalidArgument,
      {"metadata 'bad' (#1, at offset " + std::to_string(l.kv_offsets[1]) + ")",
       "unknown value type 13 at offset " +
           std::to_string(l.kv_value_offsets[1])});

  bytes = gt::GgufBuilder().Add("arr", gt::RawArray(0xDEAD, 1, "x")).Build(&l);
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"array at offset " + std::to_string(l.kv_value_offsets[0]),
               "unknown element type 57005"});
}

TEST(GgufCorruptTest, BoolMustBeZeroOrOne) {
  ExpectError(gt::GgufBuilder()
                  .Add("b", gt::RawValue(gt::gguf_type::kBool, "\x02"))
                  .Build(),
              absl::StatusCode::kInvalidArgument,
              {"metadata 'b'", "bool value 2 at offset", "neither 0 nor 1"});
}

TEST(GgufCorruptTest, DuplicateMetadataKey) {
  gt::GgufLayout l;
  const std::string bytes = gt::GgufBuilder()
                                .Add("k", gt::U8(1))
                                .Add("other", gt::U8(2))
                                .Add("k", gt::U32(3))
                                .Build(&l);
  ExpectError(
      bytes, absl::StatusCode::kInvalidArgument,
      {"metadata 'k' (#2, at offset " + std::to_string(l.kv_offsets[2]) + ")",
       "duplicate key, first defined as metadata #0 at offset 24"});
}

TEST(GgufCorruptTest, BadAlignment) {
  for (uint32_t alignment : {0u, 3u, 96u}) {
    ExpectError(gt::GgufBuilder()
                    .Add("general.alignment", gt::U32(alignment))
                    .AddF32Tensor("t", {1})
                    .Build(),
                absl::StatusCode::kInvalidArgument,
                {"metadata 'general.alignment' (#0, at offset 24)",
                 absl::StrCat("alignment ", alignment,
                              " is not a nonzero power of two")});
  }
  ExpectError(gt::GgufBuilder()
                  .Add("x", gt::U8(0))
                  .Add("general.alignment", gt::U64(32))
                  .Build(),
              absl::StatusCode::kInvalidArgument,
              {"metadata 'general.alignment' (#1", "is uint64, want uint32"});
}

TEST(GgufCorruptTest, UnknownTensorType) {
  for (uint32_t id : {4u, 99u}) {  // 4 is a retired ggml id (Q4_2)
    gt::GgufLayout l;
    const std::string bytes =
        gt::GgufBuilder()
            .AddTensor({.name = "w", .type = id, .dims = {32}, .data = "xx"})
            .Build(&l);
    ExpectError(bytes, absl::StatusCode::kInvalidArgument,
                {"tensor 'w' (#0, info at offset 24)",
                 absl::StrCat("unknown ggml type id ", id, " at offset ",
                              l.tensor_info_offsets[0] + 9 + 4 + 8)});
  }
}

TEST(GgufCorruptTest, BadDimensionCount) {
  for (uint64_t n_dims : {0, 5}) {
    const std::string bytes =
        gt::GgufBuilder()
            .AddF32Tensor("ok", {1})
            .AddTensor({.name = "t",
                        .type = 0,
                        .dims = std::vector<uint64_t>(n_dims, 1),
                        .data = "1234"})
            .Build();
    ExpectError(bytes, absl::StatusCode::kInvalidArgument,
                {"tensor 't' (#1", absl::StrCat("n_dims ", n_dims),
                 "is not in [1, 4]"});
  }
}

TEST(GgufCorruptTest, BadDimensions) {
  gt::GgufLayout l;
  std::string bytes = gt::GgufBuilder().AddF32Tensor("t", {4, 0}).Build(&l);
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"tensor 't'",
               absl::StrCat("dimension 1 at offset ",
                            l.tensor_info_offsets[0] + 9 + 4 + 8, " is 0")});

  bytes = gt::GgufBuilder()
              .AddTensor({.name = "t", .type = 0, .dims = {~uint64_t{0}}})
              .Build();
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"dimension 0", "is 18446744073709551615"});

  bytes = gt::GgufBuilder()
              .AddTensor({.name = "t",
                          .type = 0,
                          .dims = {uint64_t{1} << 32, uint64_t{1} << 32}})
              .Build();
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"tensor 't'", "element count overflows int64 at dimension 1"});

  // Elements fit in int64, bytes do not.
  bytes = gt::GgufBuilder()
              .AddTensor({.name = "t",
                          .type = 0,
                          .dims = {uint64_t{1} << 31, uint64_t{1} << 31}})
              .Build();
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"tensor 't'", "byte size of F32 [2147483648, 2147483648]"});
}

TEST(GgufCorruptTest, RowNotAMultipleOfTheBlockSize) {
  const std::string bytes =
      gt::GgufBuilder()
          .AddTensor("q", GgmlType::kQ8_0, {33, 1}, std::string(68, '\0'))
          .Build();
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"tensor 'q' (#0, info at offset 24)",
               "row length 33 is not a multiple of Q8_0's block size 32"});
}

TEST(GgufCorruptTest, TensorDataOutsideTheFile) {
  gt::GgufLayout l;
  std::string bytes = BaseBuilder().Build(&l);
  const uint64_t offset_field = l.tensor_info_offsets[0] + 8 + 5 + 4 + 8 + 4;
  gt::PatchU64(&bytes, offset_field, 4096);
  const uint64_t begin = l.data_offset + 4096;
  ExpectError(
      bytes, absl::StatusCode::kDataLoss,
      {"tensor 'first' (#0, info at offset " +
           std::to_string(l.tensor_info_offsets[0]) + ")",
       absl::StrCat("data [", begin, ", ", begin + 16,
                    ") extends past end of file (", bytes.size(), " bytes)")});

  // An offset so large that offset + size wraps around.
  gt::PatchU64(&bytes, offset_field, ~uint64_t{0} - 31);
  ExpectError(bytes, absl::StatusCode::kDataLoss,
              {"tensor 'first'", "overflows"});
}

TEST(GgufCorruptTest, MisalignedTensorOffset) {
  ExpectError(gt::GgufBuilder()
                  .AddTensor({.name = "t",
                              .type = 0,
                              .dims = {2},
                              .data = std::string(8, '\0'),
                              .offset = 4})
                  .Build(),
              absl::StatusCode::kInvalidArgument,
              {"tensor 't' (#0, info at offset 24)",
               "data offset 4 is not a multiple of the alignment 32"});
}

TEST(GgufCorruptTest, OverlappingTensors) {
  gt::GgufLayout l;
  const std::string bytes = gt::GgufBuilder()
                                .AddF32Tensor("a", {16})  // [0, 64)
                                .AddTensor({.name = "b",
                                            .type = 0,
                                            .dims = {4},
                                            .data = std::string(16, '\0'),
                                            .offset = 32})
                                .Build(&l);
  const uint64_t d = l.data_offset;
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"tensor 'b' (#1, info at offset " +
                   std::to_string(l.tensor_info_offsets[1]) + ")",
               absl::StrCat("data [", d + 32, ", ", d + 48,
                            ") overlaps tensor 'a' (#0) data [", d, ", ",
                            d + 64, ")")});
}

TEST(GgufCorruptTest, DuplicateTensorName) {
  gt::GgufLayout l;
  const std::string bytes = gt::GgufBuilder()
                                .AddF32Tensor("w", {1})
                                .AddF32Tensor("v", {1})
                                .AddF32Tensor("w", {1})
                                .Build(&l);
  ExpectError(bytes, absl::StatusCode::kInvalidArgument,
              {"tensor 'w' (#2, info at offset " +
                   std::to_string(l.tensor_info_offsets[2]) + ")",
               "duplicate name, first defined as tensor #0 (info at offset " +
                   std::to_string(l.tensor_info_offsets[0]) + ")"});
}

TEST(GgufCorruptTest, NullBuffer) {
  auto file = GgufFile::FromBuffer(nullptr, 8);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GgufFile::FromBuffer(nullptr, 0).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(GgufCorruptTest, MissingRequiredTensor) {
  gt::GgufBuilder b;
  gt::AddTinyModel(b, {});
  std::string bytes = b.Build();
  // Rename blk.1.ffn_up.weight so the file stays valid but lacks it.
  const size_t at = bytes.find("blk.1.ffn_up.weight");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 6] = 'X';
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ModelConfigFromGguf(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::Status s = CheckModelTensors(**file, *config);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("tensor 'blk.1.ffn_up.weight' is missing"));
}

TEST(GgufCorruptTest, UnknownArchitecture) {
  const std::string bytes =
      gt::GgufBuilder().Add("general.architecture", gt::Str("gpt2")).Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::Status s = ModelConfigFromGguf(**file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unsupported architecture 'gpt2'"));
  EXPECT_THAT(s.message(), HasSubstr("supported: llama, qwen2, qwen3"));
}

TEST(GgufCorruptTest, EveryByteFlipParsesSafely) {
  // Not a proof, but every field of the base file is hit: flipping any byte
  // must give an error or a file whose tensors lie inside the buffer.
  const std::string base = BaseBuilder().Build();
  int rejected = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    std::string bytes = base;
    bytes[i] = static_cast<char>(bytes[i] ^ 0x80);
    auto file = Parse(bytes);
    if (!file.ok()) {
      ++rejected;
      continue;
    }
    const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
    for (const GgufTensorInfo& t : (*file)->tensors()) {
      EXPECT_GE(t.data, begin) << "flip at " << i;
      EXPECT_LE(t.data + t.size_bytes, begin + bytes.size()) << "flip at " << i;
    }
  }
  // Flips in the header, counts, lengths and type ids must all be caught;
  // only flips inside string bytes and tensor data may pass.
  EXPECT_GT(rejected, 40);
}

}  // namespace
}  // namespace paceline::engine
