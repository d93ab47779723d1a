// `paceline`: the command-line tool. Dispatches to one subcommand.

#include <algorithm>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"

namespace paceline::tools {
namespace {

struct Command {
  absl::string_view name;
  absl::string_view summary;
  int (*run)(std::span<const std::string> args);
};

constexpr Command kCommands[] = {
    {"inspect", "show a model file's architecture, shape and tokenizer",
     RunInspect},
    {"tokenize", "print the token ids of a text", RunTokenize},
    {"plan", "plan weight and KV-cache memory for a model and load", RunPlan},
    {"generate", "generate a continuation of a prompt on the CPU", RunGenerate},
    {"complete", "ask a running pacelined for a continuation", RunComplete},
    {"chat", "chat with a running pacelined in the terminal", RunChat},
    {"health", "ask a running pacelined whether it serves", RunHealth},
    {"bench", "load a running pacelined and report latency and throughput",
     RunBench},
    {"hash-key", "print the SHA-256 digest of an API key, or make a key",
     RunHashKey},
    {"chat-template", "render a conversation with a chat template",
     RunChatTemplate},
    {"grammar", "compile a structured-output constraint and check texts",
     RunGrammar},
};

void PrintUsage(std::ostream& out) {
  out << "usage: paceline COMMAND [ARGS...]\n\ncommands:\n";
  for (const Command& c : kCommands) {
    constexpr size_t kWidth = 15;  // the longest name, and two spaces
    out << "  " << c.name
        << std::string(kWidth - std::min(c.name.size(), kWidth - 1), ' ')
        << c.summary << "\n";
  }
  out << "\nRun `paceline COMMAND --help` for a command's flags.\n";
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(std::cerr);
    return kExitUsage;
  }
  const absl::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintUsage(std::cout);
    return kExitOk;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (c.name == name) return c.run(args);
  }
  std::cerr << "paceline: unknown command '" << name << "'\n\n";
  PrintUsage(std::cerr);
  return kExitUsage;
}

}  // namespace
}  // namespace paceline::tools

int main(int argc, char** argv) { return paceline::tools::Main(argc, argv); }
