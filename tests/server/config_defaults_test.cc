// One home for each config default: ApplyDefaults (server/config_defaults.cc)
// declares them; what config.proto's comments, the README's config table
// and the HTTP server's option initialisers say must agree with it. Each
// side is read here (the proto and README files from the source tree) and
// compared field by field.

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "gtest/gtest.h"
#include "paceline/v1/config.pb.h"
#include "server/config.h"
#include "server/http/http_server.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"

namespace paceline::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// "16", "0.5", "4 MiB", "16 KiB" as a number; nullopt for anything else.
std::optional<double> Number(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  double scale = 1;
  if (absl::ConsumeSuffix(&text, " MiB")) scale = 1 << 20;
  if (absl::ConsumeSuffix(&text, " KiB")) scale = 1 << 10;
  absl::ConsumeSuffix(&text, ".");  // "Default 16."
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) return std::nullopt;
  return value * scale;
}

// Every numeric field with presence of a defaulted config (one tenant), by
// "Message.field" (the message's name without its package, e.g.
// "ServerConfig.Http.max_header_bytes", "TenantConfig.weight").
void CollectSet(const Message& m, std::map<std::string, double>* out) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  const std::string prefix(
      absl::StripPrefix(m.GetDescriptor()->full_name(), "paceline.v1."));
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) {
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          CollectSet(r->GetRepeatedMessage(m, f, i), out);
        }
      }
      continue;
    }
    const std::string key = absl::StrCat(prefix, ".", f->name());
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        CollectSet(r->GetMessage(m, f), out);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        (*out)[key] = r->GetInt32(m, f);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        (*out)[key] = static_cast<double>(r->GetInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        (*out)[key] = static_cast<double>(r->GetUInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        (*out)[key] = r->GetDouble(m, f);
        break;
      default:
        break;
    }
  }
}

std::map<std::string, double> Defaults() {
  v1::ServerConfig config;
  config.add_tenants()->set_name("t");
  ApplyDefaults(&config);
  std::map<std::string, double> out;
  CollectSet(config, &out);
  return out;
}

// The numbers a comment block gives as defaults, in order: "Default N",
// "Defaults A and B", "default N" inside a sentence.
std::vector<double> CommentDefaults(const std::string& comment) {
  static const std::regex kDefault(
      R"([Dd]efaults? ([0-9.]+(?: [KM]iB)?)(?: and ([0-9.]+))?)");
  std::vector<double> out;
  for (auto it = std::sregex_iterator(comment.begin(), comment.end(), kDefault);
       it != std::sregex_iterator(); ++it) {
    for (int group : {1, 2}) {
      if (auto v = Number((*it)[group].str()); v) out.push_back(*v);
    }
  }
  return out;
}

// What config.proto's comments say: each `optional` field takes the next
// numeric default of the comment block before it (one block may serve the
// fields after it, in order), by "Message.field".
std::map<std::string, double> ProtoDefaults(const std::string& proto) {
  static const std::regex kOpen(R"(^\s*(message|oneof|enum) (\w+) \{)");
  static const std::regex kField(R"(^\s*optional \w+ (\w+) = \d+;)");
  std::map<std::string, double> out;
  std::vector<std::string> scope;  // "" for a oneof or an enum
  std::string comment;             // the block being read
  std::vector<double> pending;     // the last block's defaults, in order
  for (absl::string_view view : absl::StrSplit(proto, '\n')) {
    const std::string line(view);
    const absl::string_view text = absl::StripAsciiWhitespace(view);
    if (absl::StartsWith(text, "//")) {
      absl::StrAppend(&comment, " ",
                      absl::StripAsciiWhitespace(text.substr(2)));
      continue;
    }
    if (!comment.empty()) {
      pending = CommentDefaults(comment);
      comment.clear();
    }
    std::smatch m;
    if (std::regex_search(line, m, kOpen)) {
      scope.push_back(m[1].str() == "message" ? m[2].str() : "");
      pending.clear();
    } else if (text == "}") {
      if (!scope.empty()) scope.pop_back();
    } else if (std::regex_search(line, m, kField)) {
      if (!pending.empty()) {
        std::string key;
        for (const std::string& name : scope) {
          if (!name.empty()) absl::StrAppend(&key, name, ".");
        }
        out[absl::StrCat(key, m[1].str())] = pending.front();
        pending.erase(pending.begin());
      }
    } else if (!text.empty()) {
      pending.clear();  // a plain field or oneof: its comment is used up
    }
  }
  return out;
}

// Each default `said` somewhere is the one ApplyDefaults sets.
void ExpectAgree(const std::map<std::string, double>& said,
                 const std::map<std::string, double>& defaults) {
  for (const auto& [field, value] : said) {
    auto it = defaults.find(field);
    if (it == defaults.end()) {
      ADD_FAILURE() << field << " is not set by ApplyDefaults";
      continue;
    }
    EXPECT_EQ(it->second, value) << field;
  }
}

TEST(ConfigDefaultsTest, ConfigProtoCommentsSayWhatApplyDefaultsSets) {
  const std::map<std::string, double> defaults = Defaults();
  const std::map<std::string, double> said =
      ProtoDefaults(::paceline::testing::ReadFile(
          ::paceline::testing::SourcePath("proto/paceline/v1/config.proto")));
  // Enough of them to mean the reading works (every numeric default but
  // intake.threads, whose default depends on the machine).
  EXPECT_GE(said.size(), 25u);
  ExpectAgree(said, defaults);
}

// The README's config table (the rows after "| field | default |"):
// "| `name` | default | ... |" and "| `group { a b c }` | A, B, C | ... |",
// numeric defaults only, by "name" or "group.name".
std::map<std::string, double> ReadmeDefaults(const std::string& readme) {
  static const std::regex kRow(R"(^\| `([^`]+)` \| ([^|]+) \|)");
  static const std::regex kGroup(R"(^(\w+) \{ ([^}]*) \}$)");
  static const std::regex kAlternative(R"( \\\| \w+)");
  std::map<std::string, double> out;
  bool in_table = false;
  for (absl::string_view view : absl::StrSplit(readme, '\n')) {
    const std::string line(view);
    if (absl::StartsWith(line, "| field | default |")) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!absl::StartsWith(line, "|")) break;  // the table's end
    std::smatch m;
    if (!std::regex_search(line, m, kRow)) continue;
    std::string fields = m[1].str();
    std::string values = m[2].str();
    absl::StripTrailingAsciiWhitespace(&values);
    std::string group;
    if (std::smatch g; std::regex_match(fields, g, kGroup)) {
      group = g[1].str();
      // "memory_bytes \| memory_fraction," is one slot: its first name.
      fields = std::regex_replace(g[2].str(), kAlternative, "");
    }
    const std::vector<std::string> names =
        absl::StrSplit(fields, absl::ByAnyChar(" ,"), absl::SkipEmpty());
    const std::vector<std::string> parts = absl::StrSplit(values, ", ");
    if (parts.size() != names.size()) continue;  // prose, not a list
    for (size_t i = 0; i < names.size(); ++i) {
      if (auto v = Number(parts[i]); v) {
        out[group.empty() ? names[i] : absl::StrCat(group, ".", names[i])] = *v;
      }
    }
  }
  return out;
}

TEST(ConfigDefaultsTest, TheReadmeTableSaysWhatApplyDefaultsSets) {
  std::map<std::string, double> defaults;
  for (const auto& [field, value] : Defaults()) {
    // The table names top-level fields and one level of groups, in their
    // config spelling: "http.max_header_bytes", "drain_timeout_seconds".
    std::string key(absl::StripPrefix(field, "ServerConfig."));
    for (const char* group :
         {"Http", "Grpc", "KvCache", "Scheduler", "Intake"}) {
      std::string spelled = absl::AsciiStrToLower(group);
      if (spelled == "kvcache") spelled = "kv_cache";
      const std::string prefix = absl::StrCat(group, ".");
      if (absl::StartsWith(key, prefix)) {
        key = absl::StrCat(spelled, ".", key.substr(prefix.size()));
      }
    }
    defaults[key] = value;
  }
  const std::map<std::string, double> said =
      ReadmeDefaults(::paceline::testing::ReadFile(
          ::paceline::testing::SourcePath("README.md")));
  EXPECT_GE(said.size(), 15u);
  ExpectAgree(said, defaults);
}

TEST(ConfigDefaultsTest, TheHttpServersOwnDefaultsAreTheConfigs) {
  v1::ServerConfig config;
  ApplyDefaults(&config);
  const v1::ServerConfig::Http& h = config.http();
  const http::HttpServerOptions o;
  EXPECT_EQ(o.max_header_bytes, h.max_header_bytes());
  EXPECT_EQ(o.max_body_bytes, h.max_body_bytes());
  EXPECT_EQ(o.request_timeout, absl::Seconds(h.request_timeout_seconds()));
  EXPECT_EQ(o.idle_timeout, absl::Seconds(h.idle_timeout_seconds()));
  EXPECT_EQ(o.max_connections, h.max_connections());
  EXPECT_EQ(o.threads, h.threads());
  EXPECT_FALSE(h.has_send_buffer_bytes());
  EXPECT_EQ(o.send_buffer_bytes, 0);  // the kernel's autotuning
}

}  // namespace
}  // namespace paceline::server
