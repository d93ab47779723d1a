#ifndef PACELINE_TOOLS_PACELINE_COMMANDS_H_
#define PACELINE_TOOLS_PACELINE_COMMANDS_H_

// The subcommands of `paceline`. Each takes the words after its name and
// returns the process exit code (cli.h: 0 ok, 1 failure, 2 usage).

#include <span>
#include <string>

namespace paceline::tools {

int RunInspect(std::span<const std::string> args);
int RunTokenize(std::span<const std::string> args);
int RunPlan(std::span<const std::string> args);
int RunGenerate(std::span<const std::string> args);
int RunComplete(std::span<const std::string> args);
int RunHashKey(std::span<const std::string> args);
int RunHealth(std::span<const std::string> args);
int RunBench(std::span<const std::string> args);
int RunChat(std::span<const std::string> args);
int RunChatTemplate(std::span<const std::string> args);
int RunGrammar(std::span<const std::string> args);

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_COMMANDS_H_
