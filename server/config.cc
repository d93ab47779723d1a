// The config file's parse and the positions of its fields (ConfigSource);
// the defaults are in config_defaults.cc, the checks in config_validate.cc.

#include "server/config.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace paceline::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;

// Text-format syntax errors as "FILE:LINE:COL: message" (1-based).
class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string file) : file_(std::move(file)) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors_.push_back(
        absl::StrCat(file_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string&) override {}

  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string file_;
  std::vector<std::string> errors_;
};

// "tenants[1]" -> {"tenants", 1}; "weight" -> {"weight", -1}.
struct PathSegment {
  absl::string_view name;
  int index = -1;
};

std::vector<PathSegment> SplitPath(absl::string_view path) {
  std::vector<PathSegment> segments;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    PathSegment segment;
    segment.name = part;
    if (size_t open = part.find('[');
        open != absl::string_view::npos && absl::EndsWith(part, "]")) {
      segment.name = part.substr(0, open);
      int index = 0;
      if (absl::SimpleAtoi(part.substr(open + 1, part.size() - open - 2),
                           &index)) {
        segment.index = index;
      }
    }
    segments.push_back(segment);
  }
  return segments;
}

// True when `path` is `prefix` or a field under it.
bool PathIsUnder(absl::string_view path, absl::string_view prefix) {
  if (!absl::StartsWith(path, prefix)) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' ||
         path[prefix.size()] == '[';
}

}  // namespace

struct ConfigSource::Positions {
  TextFormat::ParseInfoTree tree;
};

ConfigSource::ConfigSource() = default;
ConfigSource::~ConfigSource() = default;
ConfigSource::ConfigSource(ConfigSource&&) noexcept = default;
ConfigSource& ConfigSource::operator=(ConfigSource&&) noexcept = default;

void ConfigSource::MarkFromFlag(std::string field_path, std::string flag) {
  flags_[std::move(field_path)] = std::move(flag);
}

std::string ConfigSource::Describe(absl::string_view field_path) const {
  // The flag that set this field or the closest field above it.
  const std::string* flag = nullptr;
  size_t flag_prefix = 0;
  for (const auto& [path, f] : flags_) {
    if (PathIsUnder(field_path, path) && path.size() >= flag_prefix) {
      flag = &f;
      flag_prefix = path.size();
    }
  }
  if (flag != nullptr) {
    return absl::StrCat("flag ", *flag, ": field ", field_path);
  }
  if (file_.empty()) return absl::StrCat("field ", field_path);

  // The line of the deepest field on the path the file sets.
  int line = -1;
  const TextFormat::ParseInfoTree* tree =
      positions_ != nullptr ? &positions_->tree : nullptr;
  const Descriptor* message = v1::ServerConfig::descriptor();
  for (const PathSegment& segment : SplitPath(field_path)) {
    if (tree == nullptr || message == nullptr) break;
    const FieldDescriptor* field =
        message->FindFieldByName(std::string(segment.name));
    if (field == nullptr) break;
    int index = -1;
    if (field->is_repeated()) index = std::max(segment.index, 0);
    const TextFormat::ParseLocation where = tree->GetLocation(field, index);
    if (where.line < 0) break;
    line = where.line;
    if (field->type() != FieldDescriptor::TYPE_MESSAGE) break;
    tree = tree->GetTreeForNested(field, index);
    message = field->message_type();
  }
  if (line < 0) return absl::StrCat(file_, ": field ", field_path);
  return absl::StrCat(file_, ":", line + 1, ": field ", field_path);
}

absl::StatusOr<ParsedConfigFile> ParseConfigFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadWholeFile(path, "config file"));

  ParsedConfigFile parsed;
  parsed.source.file_ = path;
  parsed.source.positions_ = std::make_unique<ConfigSource::Positions>();
  CollectErrors errors(path);
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&parsed.source.positions_->tree);
  if (!parser.ParseFromString(text, &parsed.config)) {
    if (errors.errors().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a valid paceline.v1.ServerConfig"));
    }
    return absl::InvalidArgumentError(absl::StrJoin(errors.errors(), "\n"));
  }
  return parsed;
}

absl::StatusOr<v1::ServerConfig> LoadConfigFile(const std::string& path) {
  ASSIGN_OR_RETURN(ParsedConfigFile parsed, ParseConfigFile(path));
  ApplyDefaults(&parsed.config);
  RETURN_IF_ERROR(ValidateConfig(parsed.config, &parsed.source));
  return std::move(parsed.config);
}

}  // namespace paceline::server
