#ifndef PACELINE_SERVER_CONFIG_H_
#define PACELINE_SERVER_CONFIG_H_

// The daemon's configuration file (schema: proto/paceline/v1/config.proto):
// reading it, filling in defaults, checking every field. Errors name the
// file, the line and the field path, e.g.
//   /etc/paceline/pacelined.textproto:14: field tenants[1].weight: must be > 0, got -1
// Functions here are thread-compatible (no shared state).

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "paceline/v1/config.pb.h"

namespace paceline::server {

struct ParsedConfigFile;

// Where each field of a config came from, to put in front of an error
// about it: a line of the config file, or a command-line flag that
// overrode it. Move-only (owns the parse positions).
class ConfigSource {
 public:
  // No file: errors name only the field (or its flag).
  ConfigSource();
  ~ConfigSource();
  ConfigSource(ConfigSource&&) noexcept;
  ConfigSource& operator=(ConfigSource&&) noexcept;

  // The file a config was parsed from; lines are unknown.
  const std::string& file() const { return file_; }

  // Records that `flag` (e.g. "--listen") set the field at `field_path`
  // ("listen", "kv_cache.block_size", "tenants[2]"); errors about it or
  // anything under it then name the flag instead of a file line.
  void MarkFromFlag(std::string field_path, std::string flag);

  // "FILE:LINE: field PATH" for a field parsed from the file (a field not
  // in the file takes the line of its nearest enclosing field that is),
  // "flag --F: field PATH" for one a flag set, "field PATH" otherwise.
  // `field_path` is dotted field names with [i] for repeated elements.
  std::string Describe(absl::string_view field_path) const;

 private:
  friend absl::StatusOr<ParsedConfigFile> ParseConfigFile(
      const std::string& path);
  struct Positions;  // the text-format parse tree, kept opaque here

  std::string file_;
  std::unique_ptr<Positions> positions_;
  absl::flat_hash_map<std::string, std::string> flags_;  // path -> flag
};

struct ParsedConfigFile {
  v1::ServerConfig config;
  ConfigSource source;
};

// Reads and parses the text-format file at `path`; no defaults, no checks.
// NotFound / PermissionDenied when it cannot be read; InvalidArgument with
// "FILE:LINE:COL: message" for each syntax error (unknown field, bad value,
// a field set twice, two members of a oneof).
absl::StatusOr<ParsedConfigFile> ParseConfigFile(const std::string& path);

// Fills every unset field that has a default (the defaults are documented
// in config.proto) and lower-cases API-key digests, so the daemon reads
// plain values. Leaves set fields alone; idempotent.
void ApplyDefaults(v1::ServerConfig* config);

// The name the model is served under: model.served_name, else the file's
// base name without ".gguf" (a dummy: path as it is).
std::string ServedName(const v1::ServerConfig::Model& model);

// Checks every field of `config` (after ApplyDefaults, or before: unset
// optional fields pass). OK, or InvalidArgument listing every problem, one
// per line, each described by `source` (nullptr: by field path only). Files
// the config names (model, TLS) must be readable; a dummy: model must name
// a known shape.
absl::Status ValidateConfig(const v1::ServerConfig& config,
                            const ConfigSource* source = nullptr);

// ParseConfigFile, ApplyDefaults, ValidateConfig: a config ready to serve
// from, or the first failing step's error.
absl::StatusOr<v1::ServerConfig> LoadConfigFile(const std::string& path);

// The default serving address.
inline constexpr absl::string_view kDefaultListen = "127.0.0.1:50051";
// The default OpenAI HTTP API address (http.listen).
inline constexpr absl::string_view kDefaultHttpListen = "127.0.0.1:8000";

// Checks a HOST:PORT address: a host name or IPv4 address, or an IPv6
// address in brackets ("[::1]:50051"), then a port in 0..65535.
// InvalidArgument saying what is wrong otherwise.
absl::Status CheckHostPort(absl::string_view address);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_CONFIG_H_
