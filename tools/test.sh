#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the
# whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
