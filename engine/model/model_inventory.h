#ifndef PACELINE_ENGINE_MODEL_MODEL_INVENTORY_H_
#define PACELINE_ENGINE_MODEL_MODEL_INVENTORY_H_

// What a model file may hold, per architecture, and the load-time check
// that nothing in it goes unread in silence (an ignored rope_freqs.weight
// once served every Llama 3 file subtly wrong).
//
// Tensors: every tensor must be one the engine reads for this config
// (`blk.N.` names for layers 0 .. n_layers - 1), or one known not to change
// the forward pass (then named in a warning); any other fails the load,
// naming it: the engine cannot tell what it would have changed.
//
// Metadata: every `<arch>.*` key is read, known to be informational, or
// changes the math in a way the engine does not implement — the last fail
// the load naming the key, unless their value is the neutral one (an
// expert_count of 0, a softcap of 0). Keys nobody listed, and keys of
// other namespaces, are named in a warning. `general.*`, `tokenizer.*`
// (the tokenizer's business) and `quantize.*` are out of this rule.
//
// Each architecture has one table in model_inventory.cc; a new
// architecture adds its table there (and its tensor conditions to
// TensorNeed).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"

namespace paceline::engine {

struct InventoryReport {
  // Present, known not to change the forward pass, not read.
  std::vector<std::string> unused_tensors;
  // Present, not read, not known either way.
  std::vector<std::string> unknown_keys;

  // At most two lines (tensors, keys), empty when there is nothing to say.
  std::vector<std::string> WarningLines() const;
};

// Checks `file` against `config`'s architecture table. InvalidArgument
// naming the tensors (up to eight) or the key that would change the math;
// Internal when the architecture has no table.
absl::StatusOr<InventoryReport> CheckModelInventory(const GgufFile& file,
                                                    const ModelConfig& config);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_MODEL_INVENTORY_H_
