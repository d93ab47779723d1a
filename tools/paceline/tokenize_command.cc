// `paceline tokenize --model MODEL [--no-bos] TEXT`: token ids of a text.

#include <iostream>
#include <span>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"

namespace paceline::tools {
namespace {

constexpr char kUsage[] =
    "usage: paceline tokenize --model MODEL.gguf [--no-bos] TEXT\n"
    "\n"
    "Prints the token ids of TEXT, space-separated, on one line. The\n"
    "tokenizer is the model's own (GGUF tokenizer.ggml.* metadata); special\n"
    "tokens written in TEXT are not parsed.\n"
    "\n"
    "  --model FILE   the GGUF model whose tokenizer to use\n"
    "  --no-bos       do not add the BOS token (added by default when the\n"
    "                 model's metadata asks for it)\n";

constexpr FlagDef kFlags[] = {{"model", true}, {"no-bos", false}};

}  // namespace

int RunTokenize(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("tokenize", kUsage, parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  const std::optional<std::string> model = parsed->Get("model");
  if (!model.has_value())
    return UsageError("tokenize", kUsage, "--model is required");
  if (parsed->positional().size() != 1) {
    return UsageError("tokenize", kUsage,
                      "expected exactly one TEXT argument (quote it)");
  }
  auto file = engine::GgufFile::Open(*model);
  if (!file.ok()) return Failure("tokenize", file.status());
  auto tokenizer = engine::Tokenizer::FromGguf(**file);
  if (!tokenizer.ok()) return Failure("tokenize", tokenizer.status());
  const bool add_bos = !parsed->Has("no-bos") && (*tokenizer)->add_bos();
  std::cout << absl::StrJoin(
                   (*tokenizer)->Encode(parsed->positional()[0], add_bos), " ")
            << "\n";
  return kExitOk;
}

}  // namespace paceline::tools
