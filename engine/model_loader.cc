#include "engine/model_loader.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_shapes.h"
#include "engine/tokenizer/byte_level.h"

namespace paceline::engine {
namespace {

absl::StatusOr<ChatTemplateSources> ReadChatTemplateFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadWholeFile(path, "chat template file"));
  return ChatTemplateSourcesFromFile(path, text);
}

// The model's own templates, or the options' file instead.
absl::Status LoadChatTemplates(const GgufFile* file,
                               const ModelSourceOptions& options,
                               LoadedModel* loaded) {
  if (!options.chat_template_file.empty()) {
    ASSIGN_OR_RETURN(loaded->chat_templates,
                     ReadChatTemplateFile(options.chat_template_file));
  } else if (file != nullptr) {
    ASSIGN_OR_RETURN(loaded->chat_templates,
                     ChatTemplateSourcesFromGguf(*file));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadedModel> OpenModel(absl::string_view model,
                                      const ModelSourceOptions& options) {
  LoadedModel loaded;
  if (IsDummyModelSpec(model)) {
    ASSIGN_OR_RETURN(DummyModelSpec spec, ParseDummyModelSpec(model));
    ASSIGN_OR_RETURN(loaded.tokenizer,
                     MakeByteLevelTokenizer(spec.config.n_vocab));
    ASSIGN_OR_RETURN(
        loaded.weights,
        ModelWeights::Dummy(spec.config,
                            spec.weights_recipe.value_or(
                                WeightRecipe::Uniform(options.dummy_type)),
                            options.dummy_seed));
    RETURN_IF_ERROR(LoadChatTemplates(nullptr, options, &loaded));
    return loaded;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file,
                   GgufFile::Open(std::string(model)));
  ASSIGN_OR_RETURN(loaded.tokenizer, Tokenizer::FromGguf(*file));
  RETURN_IF_ERROR(LoadChatTemplates(file.get(), options, &loaded));
  ASSIGN_OR_RETURN(loaded.weights, ModelWeights::FromGguf(std::move(file)));
  return loaded;
}

}  // namespace paceline::engine
