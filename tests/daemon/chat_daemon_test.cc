// Chat requests through the real pacelined (stories260K: a vocabulary
// without chat tokens and a GGUF without a chat template): refused with
// FAILED_PRECONDITION while there is no template; with a real template
// from ../shared/chat_templates as model.chat_template_file, the greedy
// answer equals that of jinja2's rendering sent as plain text. Start-up
// fails on a missing or malformed template file. A GGUF built here with a
// template of its own serves chat the same way.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "chat/chat_template.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/chat_template_reference.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/gguf_edit.h"
#include "tests/testing/run_command.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::server {
namespace {

using ::paceline::testing::DaemonProcess;
using ::paceline::testing::HaveStories260K;
using ::paceline::testing::kStories260KPath;
using ::paceline::testing::MakeClientContext;
using Json = nlohmann::ordered_json;

constexpr char kKey[] = "chat-test-key";
const std::string kTemplate = ::paceline::testing::SharedPath(
    "chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja");

std::vector<std::string> Args(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model",     kStories260KPath,
                                   "--listen",    "127.0.0.1:0",
                                   "--tenant",    absl::StrCat("alice:", kKey),
                                   "--allow-root"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

v1::GenerateRequest Chat() {
  v1::GenerateRequest r;
  v1::ChatMessage* system = r.mutable_chat()->add_messages();
  system->set_role("system");
  system->set_content("Tell a story.");
  v1::ChatMessage* user = r.mutable_chat()->add_messages();
  user->set_role("user");
  user->set_content("Once upon a time");
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(16);
  return r;
}

class ChatDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  }
  void Start(std::vector<std::string> extra = {}) {
    ASSERT_TRUE(daemon_.Start(Args(std::move(extra))).ok())
        << daemon_.stderr_text();
    stub_ = v1::Paceline::NewStub(daemon_.Channel());
  }
  v1::ChatSupport ChatSupport() {
    v1::GetModelInfoResponse info;
    auto ctx = MakeClientContext(kKey);
    EXPECT_TRUE(stub_->GetModelInfo(ctx.get(), {}, &info).ok());
    return info.chat();
  }

  DaemonProcess daemon_;
  std::unique_ptr<v1::Paceline::Stub> stub_;
};

TEST_F(ChatDaemonTest, NoTemplateIsAFailedPrecondition) {
  Start();
  EXPECT_EQ(ChatSupport().template_source(), "");
  EXPECT_FALSE(ChatSupport().has_tool_use_template());
  v1::CompleteResponse out;
  auto ctx = MakeClientContext(kKey);
  const grpc::Status st = stub_->Complete(ctx.get(), Chat(), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message(),
            "the model has no chat template; set model.chat_template_file or "
            "send text");
  EXPECT_EQ(daemon_.Drain().value_or(-1), 0);
}

TEST_F(ChatDaemonTest, MissingTemplateFileFailsStartUp) {
  EXPECT_FALSE(
      daemon_.Start(Args({"--chat-template-file", "/no/such/chat.jinja"}))
          .ok());
  EXPECT_EQ(daemon_.WaitExit(absl::Seconds(30)).value_or(-1), 2);
  EXPECT_NE(daemon_.stderr_text().find(
                "flag --chat-template-file: field model.chat_template_file: "
                "cannot read '/no/such/chat.jinja'"),
            std::string::npos)
      << daemon_.stderr_text();
}

TEST_F(ChatDaemonTest, MalformedTemplateFileFailsStartUp) {
  const std::string path =
      ::paceline::testing::WriteFile("malformed.jinja", "hi\n{% if %}");
  EXPECT_FALSE(daemon_.Start(Args({"--chat-template-file", path})).ok());
  EXPECT_EQ(daemon_.WaitExit(absl::Seconds(30)).value_or(-1), 1);
  EXPECT_NE(daemon_.stderr_text().find(
                absl::StrCat(path, ": chat template: line 2, column ")),
            std::string::npos)
      << daemon_.stderr_text();
}

// jinja2's rendering of the chat with `template_path`, by
// jinja2_reference.py (`kwargs`: more variables).
std::string Reference(const v1::GenerateRequest& request,
                      const std::string& template_path = kTemplate,
                      const Json& kwargs = Json::object()) {
  Json messages = Json::array();
  for (const v1::ChatMessage& m : request.chat().messages()) {
    messages.push_back({{"role", m.role()}, {"content", m.content()}});
  }
  Json context = {{"messages", messages},
                  {"add_generation_prompt", true},
                  {"bos_token", "<s>"},  // stories260K's BOS and EOS texts
                  {"eos_token", "</s>"}};
  for (const auto& [name, value] : kwargs.items()) context[name] = value;
  absl::StatusOr<Json> answer = ::paceline::testing::RunReference(
      Json{{"template", ::paceline::testing::ReadFile(template_path)},
           {"context", context}});
  EXPECT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(answer.ok() && answer->value("ok", false)) << answer->dump();
  return answer.ok() ? answer->value("text", "") : "";
}

TEST_F(ChatDaemonTest, ChatAnswersAsItsRenderedPromptSentAsText) {
  Start({"--chat-template-file", kTemplate});
  EXPECT_EQ(ChatSupport().template_source(), "config");
  const v1::GenerateRequest chat = Chat();
  v1::GenerateRequest text = chat;
  text.set_text(Reference(chat));
  ASSERT_FALSE(text.text().empty());

  v1::CompleteResponse from_chat;
  v1::CompleteResponse from_text;
  auto a = MakeClientContext(kKey);
  grpc::Status st = stub_->Complete(a.get(), chat, &from_chat);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto b = MakeClientContext(kKey);
  st = stub_->Complete(b.get(), text, &from_text);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(from_chat.accepted().prompt_tokens(),
            from_text.accepted().prompt_tokens());
  EXPECT_FALSE(from_chat.text().empty());
  EXPECT_EQ(from_chat.text(), from_text.text());
  EXPECT_EQ(daemon_.Drain().value_or(-1), 0);
}

// The end-to-end check on a model file that carries its template:
// stories260K's weights and tokenizer with Qwen3's template added to the
// GGUF. The chat (thinking off) answers as jinja2's rendering sent as text,
// streamed or not, and GetModelInfo names the template's output parsers.
TEST_F(ChatDaemonTest, AGgufWithItsOwnTemplateAnswersAsItsRenderingAsText) {
  const std::string qwen3 =
      ::paceline::testing::SharedPath("chat_templates/Qwen-Qwen3-0.6B.jinja");
  auto gguf = ::paceline::testing::AddStringMetadata(
      ::paceline::testing::ReadFile(kStories260KPath),
      {{"tokenizer.chat_template", ::paceline::testing::ReadFile(qwen3)}});
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const std::string model =
      ::paceline::testing::WriteFile("stories260k_qwen3_chat.gguf", *gguf);
  std::vector<std::string> args = Args();
  args[1] = model;  // --model
  ASSERT_TRUE(daemon_.Start(args).ok()) << daemon_.stderr_text();
  stub_ = v1::Paceline::NewStub(daemon_.Channel());
  const v1::ChatSupport support = ChatSupport();
  EXPECT_EQ(support.template_source(), "model");
  EXPECT_EQ(support.reasoning_format(), "<think>");
  EXPECT_EQ(support.tool_call_format(), "hermes");

  v1::GenerateRequest chat = Chat();
  (*chat.mutable_chat()->mutable_template_kwargs())["enable_thinking"] =
      "false";
  v1::GenerateRequest text = chat;
  text.set_text(Reference(chat, qwen3, {{"enable_thinking", false}}));
  ASSERT_NE(text.text().find("<think>"), std::string::npos) << text.text();

  v1::CompleteResponse from_chat, from_text;
  auto a = MakeClientContext(kKey);
  ASSERT_TRUE(stub_->Complete(a.get(), chat, &from_chat).ok());
  auto b = MakeClientContext(kKey);
  ASSERT_TRUE(stub_->Complete(b.get(), text, &from_text).ok());
  EXPECT_EQ(from_chat.accepted().prompt_tokens(),
            from_text.accepted().prompt_tokens());
  EXPECT_FALSE(from_text.text().empty());
  EXPECT_EQ(from_chat.text(), from_text.text());
  EXPECT_EQ(from_chat.reasoning(), "");

  // Streamed: the deltas' content adds up to the same answer.
  auto c = MakeClientContext(kKey);
  auto stream = stub_->Generate(c.get(), chat);
  std::string streamed;
  v1::GenerateResponse event;
  v1::Finished finished;
  while (stream->Read(&event)) {
    if (event.has_delta()) streamed += event.delta().text();
    if (event.has_finished()) finished = event.finished();
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(streamed, from_text.text());
  EXPECT_EQ(finished.reason(), from_text.finished().reason());
  EXPECT_EQ(daemon_.Drain().value_or(-1), 0);
}

}  // namespace
}  // namespace paceline::server
