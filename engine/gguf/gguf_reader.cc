#include "engine/gguf/gguf_reader.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace paceline::engine {
namespace {

// GGUF is little-endian; assemble integers byte by byte so that the reader
// needs no alignment and gives the same answer on any host.
uint64_t LoadLittleEndian(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string TypeIdName(uint32_t type) {
  if (IsKnownGgufValueType(type)) {
    return std::string(GgufValueTypeName(static_cast<GgufValueType>(type)));
  }
  return absl::StrCat("unknown type ", type);
}

}  // namespace

bool IsKnownGgufValueType(uint32_t type) {
  return type <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

uint64_t GgufMinValueBytes(uint32_t type) {
  if (!IsKnownGgufValueType(type)) return 0;
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:  // the u64 length
      return 8;
    case GgufValueType::kArray:  // element type u32 + count u64
      return 12;
  }
  return 0;
}

absl::Status AnnotateStatus(const absl::Status& status,
                            absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

absl::Status GgufReader::Need(uint64_t bytes, absl::string_view what) const {
  if (bytes <= remaining()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "unexpected end of data reading ", what, " at offset ", offset_,
      ": need ", bytes, " bytes, ", remaining(), " remain"));
}

absl::StatusOr<uint8_t> GgufReader::ReadU8(absl::string_view what) {
  RETURN_IF_ERROR(Need(1, what));
  return data_[offset_++];
}

absl::StatusOr<uint16_t> GgufReader::ReadU16(absl::string_view what) {
  RETURN_IF_ERROR(Need(2, what));
  const auto v = static_cast<uint16_t>(LoadLittleEndian(data_ + offset_, 2));
  offset_ += 2;
  return v;
}

absl::StatusOr<uint32_t> GgufReader::ReadU32(absl::string_view what) {
  RETURN_IF_ERROR(Need(4, what));
  const auto v = static_cast<uint32_t>(LoadLittleEndian(data_ + offset_, 4));
  offset_ += 4;
  return v;
}

absl::StatusOr<uint64_t> GgufReader::ReadU64(absl::string_view what) {
  RETURN_IF_ERROR(Need(8, what));
  const uint64_t v = LoadLittleEndian(data_ + offset_, 8);
  offset_ += 8;
  return v;
}

absl::StatusOr<absl::string_view> GgufReader::ReadString(
    absl::string_view what) {
  const uint64_t at = offset_;
  // The message is built only on error: this runs once per token string.
  if (remaining() < 8) return Need(8, absl::StrCat(what, " length"));
  const uint64_t length = LoadLittleEndian(data_ + offset_, 8);
  offset_ += 8;
  if (length > remaining()) {
    return absl::DataLossError(absl::StrCat(what, " at offset ", at, " claims ",
                                            length, " bytes but only ",
                                            remaining(), " remain"));
  }
  absl::string_view s(reinterpret_cast<const char*>(data_ + offset_), length);
  offset_ += length;
  return s;
}

absl::StatusOr<GgufValue> GgufReader::ReadValue(uint32_t type,
                                                uint64_t* elements_left) {
  return ReadValueAt(type, /*depth=*/0, elements_left);
}

absl::StatusOr<GgufValue> GgufReader::ReadValueAt(uint32_t type, int depth,
                                                  uint64_t* elements_left) {
  if (!IsKnownGgufValueType(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown value type ", type, " at offset ", offset_));
  }
  GgufValue v;
  v.type = static_cast<GgufValueType>(type);
  switch (v.type) {
    case GgufValueType::kUint8: {
      ASSIGN_OR_RETURN(v.u, ReadU8("uint8 value"));
      break;
    }
    case GgufValueType::kInt8: {
      ASSIGN_OR_RETURN(const uint8_t raw, ReadU8("int8 value"));
      v.i = static_cast<int8_t>(raw);
      break;
    }
    case GgufValueType::kUint16: {
      ASSIGN_OR_RETURN(v.u, ReadU16("uint16 value"));
      break;
    }
    case GgufValueType::kInt16: {
      ASSIGN_OR_RETURN(const uint16_t raw, ReadU16("int16 value"));
      v.i = static_cast<int16_t>(raw);
      break;
    }
    case GgufValueType::kUint32: {
      ASSIGN_OR_RETURN(v.u, ReadU32("uint32 value"));
      break;
    }
    case GgufValueType::kInt32: {
      ASSIGN_OR_RETURN(const uint32_t raw, ReadU32("int32 value"));
      v.i = static_cast<int32_t>(raw);
      break;
    }
    case GgufValueType::kUint64: {
      ASSIGN_OR_RETURN(v.u, ReadU64("uint64 value"));
      break;
    }
    case GgufValueType::kInt64: {
      ASSIGN_OR_RETURN(const uint64_t raw, ReadU64("int64 value"));
      v.i = static_cast<int64_t>(raw);
      break;
    }
    case GgufValueType::kFloat32: {
      ASSIGN_OR_RETURN(const uint32_t raw, ReadU32("float32 value"));
      float f;
      std::memcpy(&f, &raw, sizeof(f));
      v.f = f;
      break;
    }
    case GgufValueType::kFloat64: {
      ASSIGN_OR_RETURN(const uint64_t raw, ReadU64("float64 value"));
      std::memcpy(&v.f, &raw, sizeof(v.f));
      break;
    }
    case GgufValueType::kBool: {
      const uint64_t at = offset_;
      ASSIGN_OR_RETURN(const uint8_t raw, ReadU8("bool value"));
      // gguf writers emit 0 or 1; anything else means we are misaligned in a
      // corrupt file, and saying so beats guessing.
      if (raw > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bool value ", raw, " at offset ", at, " is neither 0 nor 1"));
      }
      v.u = raw;
      break;
    }
    case GgufValueType::kString: {
      ASSIGN_OR_RETURN(v.s, ReadString("string value"));
      break;
    }
    case GgufValueType::kArray:
      return ReadArray(depth + 1, elements_left);
  }
  return v;
}

absl::StatusOr<GgufValue> GgufReader::ReadArray(int depth,
                                                uint64_t* elements_left) {
  const uint64_t at = offset_;
  if (depth > kGgufMaxArrayDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("array at offset ", at, " nests deeper than ",
                     kGgufMaxArrayDepth, " levels"));
  }
  ASSIGN_OR_RETURN(const uint32_t element_type, ReadU32("array element type"));
  if (!IsKnownGgufValueType(element_type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "array at offset ", at, " has unknown element type ", element_type));
  }
  ASSIGN_OR_RETURN(const uint64_t count, ReadU64("array length"));
  // Check the count against the bytes left before reserving anything: each
  // element takes at least GgufMinValueBytes on disk. Dividing avoids the
  // overflow of count * size.
  const uint64_t min_bytes = GgufMinValueBytes(element_type);
  if (count > remaining() / min_bytes) {
    return absl::DataLossError(
        absl::StrCat("array of ", TypeIdName(element_type), " at offset ", at,
                     " claims ", count, " elements (at least ", min_bytes,
                     " bytes each) but only ", remaining(), " bytes remain"));
  }
  if (count > *elements_left) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "array at offset ", at, " has ", count, " elements, over the limit of ",
        kGgufMaxArrayElements, " array elements per file"));
  }
  *elements_left -= count;

  GgufValue v;
  v.type = GgufValueType::kArray;
  v.element_type = static_cast<GgufValueType>(element_type);
  v.elements.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t element_at = offset_;
    absl::StatusOr<GgufValue> element =
        ReadValueAt(element_type, depth, elements_left);
    if (!element.ok()) {
      return AnnotateStatus(element.status(),
                            absl::StrCat("array at offset ", at, ", element #",
                                         i, " at offset ", element_at));
    }
    v.elements.push_back(*std::move(element));
  }
  return v;
}

}  // namespace paceline::engine
