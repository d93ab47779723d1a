#ifndef PACELINE_TOOLS_PACELINE_CONSTRAINT_FLAGS_H_
#define PACELINE_TOOLS_PACELINE_CONSTRAINT_FLAGS_H_

// The structured-output flags of `paceline generate`, `complete` and
// `grammar`: --json-schema FILE, --grammar FILE (GBNF), --regex PATTERN,
// --choice A,B,C and --flexible-whitespace, read into the grammar engine's
// Constraint (engine/sampling/grammar/constraint.h) and written as the
// wire's SamplingOptions.constraint.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/args.h"
#include "engine/sampling/grammar/constraint.h"
#include "paceline/v1/paceline.pb.h"

namespace paceline::tools {

// The flags, for a command's FlagDef table (each command lists them).
inline constexpr FlagDef kJsonSchemaFlag = {"json-schema", true};
inline constexpr FlagDef kGrammarFlag = {"grammar", true};
inline constexpr FlagDef kRegexFlag = {"regex", true};
inline constexpr FlagDef kChoiceFlag = {"choice", true};
inline constexpr FlagDef kFlexibleWhitespaceFlag = {"flexible-whitespace",
                                                    false};

// Their help lines, for a command's usage text.
inline constexpr char kConstraintFlagsHelp[] =
    "  --json-schema FILE the output is JSON valid under the JSON Schema in\n"
    "                     FILE (a keyword that cannot be enforced is refused\n"
    "                     by name; `paceline grammar` says which)\n"
    "  --grammar FILE     the output matches the GBNF grammar in FILE (its\n"
    "                     rule `root`; llama.cpp's format)\n"
    "  --regex PATTERN    the whole output matches the ECMAScript PATTERN\n"
    "  --choice A,B,C     the output is one of the values, exactly. Values\n"
    "                     are split at commas; write \\, for a comma inside a\n"
    "                     value and \\\\ for a backslash. The flag may be\n"
    "                     repeated (the values are joined); none may be\n"
    "                     empty\n"
    "  --flexible-whitespace\n"
    "                     with --json-schema: any JSON whitespace between\n"
    "                     tokens (up to 16 bytes a gap); default none but one\n"
    "                     optional space after ',' and ':'\n";

// The flag that gives `kind`: "--json-schema", "--grammar", "--regex",
// "--choice" (json_object has none: "--json-object").
const char* ConstraintFlagName(engine::grammar::Constraint::Kind kind);

// The constraint the flags ask for; nullopt when none of them is given.
// Reads the --json-schema and --grammar files. InvalidArgument, naming the
// flags, for two kinds at once, --flexible-whitespace without
// --json-schema, a file that cannot be read, or a --choice list that does
// not split (an empty value, a stray backslash). The language itself is
// not checked here (the compiler's business).
absl::StatusOr<std::optional<engine::grammar::Constraint>> ReadConstraintFlags(
    const ParsedArgs& args);

// "a\,b,c" -> {"a,b", "c"} (see kConstraintFlagsHelp).
absl::StatusOr<std::vector<std::string>> SplitChoices(absl::string_view list);

// `c` as SamplingOptions.constraint, as the server reads it back.
v1::Constraint ConstraintToProto(const engine::grammar::Constraint& c);

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_CONSTRAINT_FLAGS_H_
