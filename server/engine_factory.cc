#include "server/engine_factory.h"

#include <cstdlib>
#include <string>

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
  o.measure_kernels = config.cpu_kernels() != "highest";
  o.state_dir = config.state_dir();
  // systemd's StateDirectory= (colon-separated when it names several).
  if (const char* env = std::getenv("STATE_DIRECTORY");
      o.state_dir.empty() && env != nullptr) {
    const std::string dirs = env;
    o.state_dir = dirs.substr(0, dirs.find(':'));
  }
  return o;
}

}  // namespace paceline::server
