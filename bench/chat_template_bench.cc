// Chat prompt rendering (issue 15): one request's template render, and the
// render plus injection-safe tokenization, on real templates from
// ../shared/chat_templates with a synthetic conversation of N turns (a
// system message, then user/assistant pairs of ~60 words each). Reports
// renders/s and rendered bytes/s. The template is parsed once, as at model
// load; stories260K's vocabulary stands in for the tokenizer.

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "engine/gguf/gguf_file.h"
#include "chat/prompt.h"
#include "chat/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace paceline::chat {
namespace {

using Json = nlohmann::ordered_json;

std::string ReadShared(const std::string& name) {
  std::ifstream in(std::string(PACELINE_SHARED_DIR) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json Conversation(int turns) {
  const std::string words =
      "The quick brown fox jumps over the lazy dog while the river runs "
      "past the old mill and children play in the park near the school. ";
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", "You are helpful."}});
  for (int i = 0; i < turns; ++i) {
    messages.push_back(
        {{"role", "user"},
         {"content", absl::StrCat("Question ", i, ": ", words, words)}});
    messages.push_back(
        {{"role", "assistant"},
         {"content", absl::StrCat("Answer ", i, ": ", words, words)}});
  }
  messages.push_back({{"role", "user"}, {"content", "And now?"}});
  return {{"messages", messages},
          {"add_generation_prompt", true},
          {"bos_token", "<s>"},
          {"eos_token", "</s>"}};
}

void BM_Render(benchmark::State& state, const char* file) {
  auto tmpl =
      ChatTemplate::Parse(ReadShared(absl::StrCat("chat_templates/", file)));
  if (!tmpl.ok()) {
    state.SkipWithError(std::string(tmpl.status().message()).c_str());
    return;
  }
  const Json context = Conversation(static_cast<int>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    auto text = tmpl->Render(context, {});
    if (!text.ok()) {
      state.SkipWithError(std::string(text.status().message()).c_str());
      return;
    }
    bytes += text->size();
    benchmark::DoNotOptimize(*text);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetItemsProcessed(state.iterations());
}

void BM_RenderAndTokenize(benchmark::State& state, const char* file) {
  auto gguf = engine::GgufFile::Open(std::string(PACELINE_SHARED_DIR) +
                             "/models/stories260K.gguf");
  auto tmpl =
      ChatTemplate::Parse(ReadShared(absl::StrCat("chat_templates/", file)));
  if (!gguf.ok() || !tmpl.ok()) {
    state.SkipWithError("needs stories260K.gguf and the shared templates");
    return;
  }
  auto tokenizer = engine::Tokenizer::FromGguf(**gguf);
  if (!tokenizer.ok()) {
    state.SkipWithError(std::string(tokenizer.status().message()).c_str());
    return;
  }
  const ChatPromptEncoder encoder(tokenizer->get());
  const Json context = Conversation(static_cast<int>(state.range(0)));
  size_t tokens = 0;
  for (auto _ : state) {
    auto prompt = encoder.Render(*tmpl, context, {});
    if (!prompt.ok()) {
      state.SkipWithError(std::string(prompt.status().message()).c_str());
      return;
    }
    tokens += prompt->tokens.size();
    benchmark::DoNotOptimize(prompt->tokens);
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsRate);
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_Render, qwen3, "Qwen-Qwen3-0.6B.jinja")->Arg(1)->Arg(20);
BENCHMARK_CAPTURE(BM_Render, llama31, "meta-llama-Llama-3.1-8B-Instruct.jinja")
    ->Arg(1)
    ->Arg(20);
BENCHMARK_CAPTURE(BM_RenderAndTokenize, qwen3, "Qwen-Qwen3-0.6B.jinja")
    ->Arg(1)
    ->Arg(20);

}  // namespace
}  // namespace paceline::chat

BENCHMARK_MAIN();
