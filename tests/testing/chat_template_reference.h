#ifndef PACELINE_TESTS_TESTING_CHAT_TEMPLATE_REFERENCE_H_
#define PACELINE_TESTS_TESTING_CHAT_TEMPLATE_REFERENCE_H_

// The chat-template tests' oracle (one owner for every test that needs
// jinja2's rendering): Python's jinja2 through
// ${PACELINE_SHARED_DIR}/chat_templates/render_reference.py, run once per
// test with --batch (/usr/bin/python3 with Debian's python3-jinja2).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"

namespace paceline::testing {

inline const std::string kChatTemplateDir = SharedPath("chat_templates");

// The time render_reference.py's strftime_now formats: 2026-01-15 12:00.
absl::Time ReferenceNow();

// Empty when the reference can run; otherwise why not (for GTEST_SKIP).
std::string ReferenceUnavailable();

// jinja2's answer to one request (a RunReference of one).
absl::StatusOr<nlohmann::ordered_json> RunReference(
    const nlohmann::ordered_json& request);

// One answer per request ({"template": ..., "context": {...}}), each
// {"ok": true, "text": ...} or {"ok": false, "error": ...}.
absl::StatusOr<std::vector<nlohmann::ordered_json>> RunReference(
    const std::vector<nlohmann::ordered_json>& requests);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_CHAT_TEMPLATE_REFERENCE_H_
