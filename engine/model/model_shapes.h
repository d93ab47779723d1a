#ifndef PACELINE_ENGINE_MODEL_MODEL_SHAPES_H_
#define PACELINE_ENGINE_MODEL_MODEL_SHAPES_H_

// The registry of named model shapes: the published hyper-parameters of
// known models, without weights. `paceline plan` plans memory for them and
// the engine's `dummy:` model source builds random weights of their shape
// (as vLLM's dummy load format does). This is the only list of shapes.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_recipe.h"

namespace paceline::engine {

// The known shape names, smallest model first.
std::vector<absl::string_view> ModelShapeNames();

// The shape called `name` (exact, lower-case), with `ModelConfig::name` set
// to it. NotFound listing the known names otherwise.
absl::StatusOr<ModelConfig> FindModelShape(absl::string_view name);

inline constexpr absl::string_view kDummyModelPrefix = "dummy:";

// True when `model` names a dummy model ("dummy:..."), not a file.
bool IsDummyModelSpec(absl::string_view model);

// A parsed "dummy:SHAPE[:DTYPE]" model spec, e.g. "dummy:llama-1b:q4_k_m".
struct DummyModelSpec {
  std::string shape;  // as found in the registry
  ModelConfig config;
  // The weights dtype named by the spec (weight_recipe.h ParseWeightsDtype:
  // a type or a llama.cpp mix such as q4_k_m); absent when the spec names
  // none, and the user of the spec picks its default.
  std::optional<WeightRecipe> weights_recipe;
};

// Parses `model`. InvalidArgument when it does not start with "dummy:", has
// an empty shape, more than one ':' after the prefix, or an unknown dtype;
// NotFound (listing the known shapes) for an unknown shape.
absl::StatusOr<DummyModelSpec> ParseDummyModelSpec(absl::string_view model);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_MODEL_SHAPES_H_
