#include "server/engine_factory.h"

namespace paceline::server {

engine::BackendOptions BackendOptionsFrom(const v1::ServerConfig& config) {
  engine::BackendOptions o;
  o.backend = config.model().backend();
  o.backend_setting = "model.backend";
  o.threads = config.threads();
  o.block_size = config.kv_cache().block_size();
  // Validated: "" (the backend's) or a ParseKvDtype name (the backend
  // refuses one it does not store).
  if (absl::StatusOr<engine::GgmlType> t =
          engine::ParseKvDtype(config.kv_cache().dtype());
      t.ok()) {
    o.kv_type = *t;
  }
  if (config.kv_cache().has_memory_bytes()) {
    o.kv_memory_bytes = config.kv_cache().memory_bytes();
  } else if (config.kv_cache().has_memory_fraction()) {
    o.kv_memory_fraction = config.kv_cache().memory_fraction();
  }
  o.max_running = config.scheduler().max_running();
  return o;
}

}  // namespace paceline::server
