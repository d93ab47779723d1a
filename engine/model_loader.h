#ifndef PACELINE_ENGINE_MODEL_LOADER_H_
#define PACELINE_ENGINE_MODEL_LOADER_H_

// Where a model comes from: a GGUF file ("path/to/model.gguf") or random
// weights of a named shape ("dummy:SHAPE[:DTYPE]", e.g.
// "dummy:stories110m:q4_0"). Both give the same thing — config, weights,
// tokenizer and chat template text (chat/ parses it) — and run through the
// same engine code.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/weights.h"
#include "engine/tokenizer/chat_template_sources.h"
#include "engine/tokenizer/tokenizer.h"

namespace paceline::engine {

struct ModelSourceOptions {
  // Weights type of a dummy model whose spec names none.
  GgmlType dummy_type = GgmlType::kF16;
  uint64_t dummy_seed = 0;
  // A Jinja chat template file that replaces the model's templates (the
  // config's model.chat_template_file); empty: the model's own.
  std::string chat_template_file;
};

struct LoadedModel {
  std::shared_ptr<const ModelWeights> weights;  // weights->config()
  std::unique_ptr<Tokenizer> tokenizer;
  // The GGUF's tokenizer.chat_template(.tool_use), or the options' file; a
  // dummy model has none of its own. Unparsed: chat::ParseChatTemplates.
  ChatTemplateSources chat_templates;
};

// Opens `model`: a dummy spec (model_shapes.h ParseDummyModelSpec) or a
// GGUF path (GgufFile::Open, ModelWeights::FromGguf, Tokenizer::FromGguf,
// ChatTemplateSourcesFromGguf). Errors come from those calls, unchanged; a
// chat_template_file that cannot be read is NotFound naming it.
absl::StatusOr<LoadedModel> OpenModel(absl::string_view model,
                                      const ModelSourceOptions& options = {});

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_LOADER_H_
