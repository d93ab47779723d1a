#include "engine/model_loader.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_shapes.h"
#include "engine/tokenizer/byte_level.h"

namespace paceline::engine {

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
                            spec.weights_type.value_or(options.dummy_type),
                            options.dummy_seed));
    return loaded;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file,
                   GgufFile::Open(std::string(model)));
  ASSIGN_OR_RETURN(loaded.tokenizer, Tokenizer::FromGguf(*file));
  ASSIGN_OR_RETURN(loaded.weights, ModelWeights::FromGguf(std::move(file)));
  return loaded;
}

}  // namespace paceline::engine
