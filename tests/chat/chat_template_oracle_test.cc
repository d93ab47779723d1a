// The oracle test of our Jinja interpreter (issue 15): every real template
// in ${PACELINE_SHARED_DIR}/chat_templates rendered with every conversation
// (the shared conversations.json plus tests/engine/data/
// chat_conversations.json) by ChatTemplate and by Python's jinja2 through
// jinja2_reference.py, run here. Where jinja2 renders, the bytes must be
// identical; where it raises, ours must fail, passing raise_exception's
// message through.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chat/chat_template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"
#include "tests/testing/chat_template_reference.h"

namespace paceline::chat {
namespace {

using ::paceline::testing::kChatTemplateDir;
using ::paceline::testing::ReferenceNow;
using ::paceline::testing::ReferenceUnavailable;
using ::paceline::testing::RunReference;

using json = nlohmann::ordered_json;

// "template|conversation" pairs known to differ from jinja2, each with its
// reason. Empty: every pair matches.
const std::map<std::string, std::string> kKnownDifferences = {};

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct Conversation {
  std::string name;
  json context;
  bool shared;
};

std::vector<Conversation> LoadConversations(const std::string& path,
                                            bool shared) {
  json all = json::parse(ReadAll(path), nullptr, false);
  std::vector<Conversation> out;
  if (all.is_discarded() || !all.is_array()) {
    ADD_FAILURE() << "cannot read " << path;
    return out;
  }
  for (const json& c : all) {
    Conversation conv{c.value("name", "?"), json::object(), shared};
    for (const auto& [k, v] : c.items()) {
      if (k != "name") conv.context[k] = v;
    }
    conv.context["bos_token"] = "<s>";
    conv.context["eos_token"] = "</s>";
    out.push_back(std::move(conv));
  }
  return out;
}

// A few bytes either side of the first difference.
std::string DiffContext(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i > 60 ? i - 60 : 0;
  return absl::StrCat(
      "first difference at byte ", i, "\n  jinja2: ",
      json(want.substr(from, 120))
          .dump(-1, ' ', false, json::error_handler_t::replace),
      "\n  ours:   ",
      json(got.substr(from, 120))
          .dump(-1, ' ', false, json::error_handler_t::replace));
}

// Whether ours agrees with jinja2's answer; `why` says how not.
bool Agrees(const json& want, const absl::StatusOr<std::string>& got,
            std::string* why) {
  if (want.value("ok", false)) {
    if (!got.ok()) {
      *why =
          absl::StrCat("jinja2 renders, ours fails: ", got.status().message());
      return false;
    }
    const std::string text = want.value("text", "");
    if (text == *got) return true;
    *why = DiffContext(text, *got);
    return false;
  }
  const std::string error = want.value("error", "");
  if (got.ok()) {
    *why = absl::StrCat("jinja2 raises (", error, "), ours renders");
    return false;
  }
  const std::string prefix = "raise_exception: ";
  if (absl::StartsWith(error, prefix) &&
      !absl::StrContains(got.status().message(), error.substr(prefix.size()))) {
    *why = absl::StrCat("raise_exception message not passed through: want '",
                        error, "', got '", got.status().message(), "'");
    return false;
  }
  return true;
}

TEST(ChatTemplateOracleTest, MatchesJinja2OnEveryTemplateAndConversation) {
  if (std::string why = ReferenceUnavailable(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  std::vector<std::filesystem::path> templates;
  for (const auto& entry :
       std::filesystem::directory_iterator(kChatTemplateDir)) {
    if (entry.path().extension() == ".jinja") templates.push_back(entry.path());
  }
  std::sort(templates.begin(), templates.end());
  ASSERT_FALSE(templates.empty());
  std::vector<Conversation> conversations = LoadConversations(
      std::string(kChatTemplateDir) + "/conversations.json", true);
  for (Conversation& c :
       LoadConversations(::paceline::testing::SourcePath(
                             "tests/chat/data/chat_conversations.json"),
                         false)) {
    conversations.push_back(std::move(c));
  }

  std::vector<json> requests;
  std::vector<std::string> sources;
  for (const auto& path : templates) {
    sources.push_back(ReadAll(path));
    for (const Conversation& c : conversations) {
      requests.push_back(
          {{"template", sources.back()}, {"context", c.context}});
    }
  }
  absl::StatusOr<std::vector<json>> answers = RunReference(requests);
  ASSERT_TRUE(answers.ok()) << answers.status();

  ChatRenderOptions options;
  options.now = ReferenceNow();
  int shared_total = 0, shared_match = 0, own_total = 0, own_match = 0;
  size_t k = 0;
  for (size_t t = 0; t < templates.size(); ++t) {
    const std::string name = templates[t].filename().string();
    absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::Parse(sources[t]);
    for (const Conversation& c : conversations) {
      const json& want = (*answers)[k++];
      absl::StatusOr<std::string> got =
          tmpl.ok() ? tmpl->Render(c.context, options)
                    : absl::StatusOr<std::string>(tmpl.status());
      std::string why;
      bool agrees = Agrees(want, got, &why);
      (c.shared ? shared_total : own_total) += 1;
      (c.shared ? shared_match : own_match) += agrees ? 1 : 0;
      const std::string key = absl::StrCat(name, "|", c.name);
      auto known = kKnownDifferences.find(key);
      if (known != kKnownDifferences.end()) {
        if (agrees)
          std::cout << "now matches, remove from the list: " << key << "\n";
        continue;
      }
      EXPECT_TRUE(agrees) << key << ": " << why;
    }
  }
  std::cout << shared_match << " of " << shared_total << " shared pairs match; "
            << own_match << " of " << own_total
            << " pairs with our conversations match; "
            << kKnownDifferences.size() << " known differences\n";
}

}  // namespace
}  // namespace paceline::chat
