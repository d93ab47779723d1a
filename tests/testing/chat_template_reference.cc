#include "tests/testing/chat_template_reference.h"

#include <filesystem>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/files.h"
#include "tests/testing/run_command.h"

namespace paceline::testing {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kScript = SourcePath("tests/testing/jinja2_reference.py");

}  // namespace

absl::Time ReferenceNow() {
  return absl::FromCivil(absl::CivilSecond(2026, 1, 15, 12, 0, 0),
                         absl::UTCTimeZone());
}

std::string ReferenceUnavailable() {
  CommandResult r = RunCommand({kPython, "-c", "import jinja2"});
  if (r.exit_code != 0) {
    return absl::StrCat(
        kPython, " cannot import jinja2 (install python3-jinja2): ", r.err);
  }
  return "";
}

absl::StatusOr<std::vector<nlohmann::ordered_json>> RunReference(
    const std::vector<nlohmann::ordered_json>& requests) {
  std::string input;
  for (const auto& r : requests) {
    input += r.dump(-1, ' ', false,
                    nlohmann::ordered_json::error_handler_t::replace);
    input += "\n";
  }
  std::string path = WriteFile("reference_input.jsonl", input);
  CommandResult r = RunCommand({"/bin/sh", "-c",
                                absl::StrCat("exec ", kPython, " ", kScript,
                                             " < '", path, "'")});
  std::filesystem::remove(path);
  if (r.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("jinja2_reference.py failed: ", r.err));
  }
  std::vector<nlohmann::ordered_json> answers;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      return absl::InternalError(absl::StrCat("bad reference line: ", line));
    }
    answers.push_back(std::move(j));
  }
  if (answers.size() != requests.size()) {
    return absl::InternalError(absl::StrCat("reference answered ",
                                            answers.size(), " of ",
                                            requests.size(), ": ", r.err));
  }
  return answers;
}

absl::StatusOr<nlohmann::ordered_json> RunReference(
    const nlohmann::ordered_json& request) {
  absl::StatusOr<std::vector<nlohmann::ordered_json>> answers =
      RunReference(std::vector<nlohmann::ordered_json>{request});
  if (!answers.ok()) return answers.status();
  return std::move((*answers)[0]);
}

}  // namespace paceline::testing
