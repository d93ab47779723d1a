#include "engine/model/gguf_keys.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace paceline::engine {

// A positive integer no larger than `max`; `fallback` (when given) if absent.
absl::StatusOr<int64_t> ReadDim(const GgufFile& file, const std::string& key,
                                int64_t max, std::optional<int64_t> fallback) {
  absl::StatusOr<uint64_t> raw = file.GetUint(key);
  if (fallback.has_value() && absl::IsNotFound(raw.status())) {
    return *fallback;
  }
  RETURN_IF_ERROR(raw.status());
  if (*raw == 0 || *raw > static_cast<uint64_t>(max)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", key, "' is ", *raw, "; want 1 to ", max));
  }
  return static_cast<int64_t>(*raw);
}

// A finite positive number; `fallback` if absent.
absl::StatusOr<double> ReadPositive(const GgufFile& file,
                                    const std::string& key, double fallback) {
  ASSIGN_OR_RETURN(const double v, OrDefault(file.GetFloat(key), fallback));
  if (!std::isfinite(v) || v <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", key, "' is ", v, "; want a finite positive number"));
  }
  return v;
}

}  // namespace paceline::engine
