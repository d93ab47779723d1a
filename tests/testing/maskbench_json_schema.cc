#include "engine/sampling/grammar/json_schema.h"
#include "tests/testing/maskbench.h"

namespace paceline::testing {

SchemaToGrammar MaskBenchJsonSchema() {
  return [](const nlohmann::ordered_json& schema) {
    return engine::grammar::JsonSchemaToGrammar(schema);
  };
}

}  // namespace paceline::testing
