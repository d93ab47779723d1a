#ifndef PACELINE_SERVER_ENGINE_FACTORY_H_
#define PACELINE_SERVER_ENGINE_FACTORY_H_

// The daemon's config as backend-selection options (engine/backend.h
// chooses CPU or CUDA and sizes the KV pool).

#include "engine/backend.h"
#include "paceline/v1/config.pb.h"

namespace paceline::server {

// model.backend, threads, kv_cache (memory_bytes, or memory_fraction,
// default 0.5; block_size), scheduler.max_running, cpu_kernels and
// state_dir (or $STATE_DIRECTORY's first directory), for a config that
// passed validation. Errors name the config's field (model.backend).
engine::BackendOptions BackendOptionsFrom(const v1::ServerConfig& config);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_ENGINE_FACTORY_H_
