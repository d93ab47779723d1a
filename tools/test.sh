#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the
# whole test suite with ctest; then the suite again under ASan + UBSan, the
# threaded parts under TSan, and every fuzz target for 60 s
# (tools/sanitize.sh, tools/fuzz.sh), each in a build folder of its own.
# Extra arguments go to the first ctest.
#
# PACELINE_SANITIZE=0 skips the sanitizer and fuzz runs (a quick local
# check); PACELINE_ASAN=0 skips only the ASan suite (~20 min on 2 cores).
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
if [[ "${PACELINE_ASAN:-1}" == 1 ]]; then stage tools/sanitize.sh asan; fi
stage tools/sanitize.sh tsan
# Every target (seven) for 60 s, all at once (~1 min instead of ~4 on 2
# cores).
PACELINE_FUZZ_JOBS=7 stage tools/fuzz.sh 60
