#ifndef PACELINE_TESTS_TESTING_CHAT_TEMPLATE_REFERENCE_H_
#define PACELINE_TESTS_TESTING_CHAT_TEMPLATE_REFERENCE_H_

// The chat-template tests' oracle (one owner for every test that needs
// jinja2's rendering): Python's jinja2, set up as model publishers' tooling
// sets it up, through tests/testing/jinja2_reference.py, run once per test
// with a batch of requests (/usr/bin/python3 with Debian's python3-jinja2).
// It needs nothing from ../shared; kChatTemplateDir is where the real
// templates are, for the tests that render them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"

namespace paceline::testing {

inline const std::string kChatTemplateDir = SharedPath("chat_templates");

// The time the reference's strftime_now formats: 2026-01-15 12:00.
absl::Time ReferenceNow();

// Empty when the reference can run; otherwise why not (for GTEST_SKIP).
std::string ReferenceUnavailable();

// jinja2's answer to one request (a RunReference of one).
absl::StatusOr<nlohmann::ordered_json> RunReference(
    const nlohmann::ordered_json& request);

// One answer per request ({"template": ..., "context": {...}}), each
// {"ok": true, "text": ...} or {"ok": false, "error": ...} (the error
// "raise_exception: <message>" when the template raised).
absl::StatusOr<std::vector<nlohmann::ordered_json>> RunReference(
    const std::vector<nlohmann::ordered_json>& requests);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_CHAT_TEMPLATE_REFERENCE_H_
