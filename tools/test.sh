#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the
# whole test suite with ctest; then the threaded parts under TSan and every
# fuzz target for 60 s (tools/sanitize.sh, tools/fuzz.sh), each in a build
# folder of its own. Extra arguments go to the first ctest.
#
# PACELINE_SANITIZE=0 skips the sanitizer and fuzz runs (a quick local
# check). PACELINE_ASAN=1 adds the whole suite under ASan + UBSan (~23 min
# on 2 cores): it joins CI once a full run of today's suite under it has
# been seen clean (the last one, before the drain, soak and scheduler
# tests of 2026-12-03, found one bug, fixed).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "$(nproc)" "$@")
if [[ "${PACELINE_SANITIZE:-1}" == 0 ]]; then
  echo "test.sh: PACELINE_SANITIZE=0: no sanitizer or fuzz runs"
  exit 0
fi
stage() {
  local start=$SECONDS
  "$@"
  echo "test.sh: '$*' took $((SECONDS - start)) s"
}
if [[ "${PACELINE_ASAN:-0}" == 1 ]]; then stage tools/sanitize.sh asan; fi
stage tools/sanitize.sh tsan
stage tools/fuzz.sh 60
