#!/usr/bin/env bash
# Configures and builds Paceline into ${BUILD_DIR:-build} (Release-like,
# warnings as errors). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPACELINE_WERROR=ON "$@"
fi
cmake --build "$build_dir" -j "$(nproc)"
