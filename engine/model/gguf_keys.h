#ifndef PACELINE_ENGINE_MODEL_GGUF_KEYS_H_
#define PACELINE_ENGINE_MODEL_GGUF_KEYS_H_

// Reading a model's hyper-parameters from GGUF metadata, with errors that
// name the key (model_config.cc and the architectures' files, arch/).

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_file.h"

namespace paceline::engine {

// `fallback` when the key is absent; any other error (wrong type) stands.
template <typename T>
absl::StatusOr<T> OrDefault(absl::StatusOr<T> value, T fallback) {
  if (absl::IsNotFound(value.status())) return fallback;
  return value;
}

// A positive integer no larger than `max`; `fallback` (when given) if absent.
absl::StatusOr<int64_t> ReadDim(const GgufFile& file, const std::string& key,
                                int64_t max, std::optional<int64_t> fallback);

// A finite positive number; `fallback` if absent.
absl::StatusOr<double> ReadPositive(const GgufFile& file,
                                    const std::string& key, double fallback);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_GGUF_KEYS_H_
