#ifndef PACELINE_COMMON_BYTE_SIZE_H_
#define PACELINE_COMMON_BYTE_SIZE_H_

// Byte counts as people write them on command lines and in configs.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline {

// A byte count with an optional unit: "1000000", "1e9", "16GB", "24GiB",
// "512 MiB", "1.5TB", ".5KiB". The number is decimal digits with an optional
// fraction and exponent (no sign); surrounding spaces and spaces before the
// unit are allowed. Units (case-insensitive): B, KB/MB/GB/TB (powers of
// 1000), KiB/MiB/GiB/TiB (powers of 1024). The value is exact, and a
// fractional result is rounded down to whole bytes. InvalidArgument for
// anything else (negative numbers included), or for more than 20
// significant digits; OutOfRange past 2^64 - 1 bytes. Thread-safe (pure).
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

}  // namespace paceline

#endif  // PACELINE_COMMON_BYTE_SIZE_H_
