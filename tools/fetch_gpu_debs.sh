#!/usr/bin/env bash
# Prepares third_party/ (gitignored) for tools/gpu_check.sh on a bare CUDA
# machine that has CMake, nvcc, a C++ compiler and Python but no network and
# none of the engine-only build's libraries:
#   third_party/debs/    the Debian 12 packages of Abseil, GoogleTest/Mock,
#                        Google Benchmark and nlohmann-json (apt-get download, ~5 MB);
#                        gpu_check.sh unpacks them into third_party/prefix/
#   third_party/shared/  the test model (stories260K.gguf) from shared/
# Run it here (Debian 12, apt sources reachable); then ship third_party/debs
# and third_party/shared with the working tree (the device tool's `carry`).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  libabsl-dev libabsl20220623          # headers + CMake config, shared libs
  libgtest-dev libgmock-dev            # static libs + CMake config (GTest
                                       # config names gmock's files too)
  libbenchmark-dev libbenchmark1debian # CMake config, shared lib
  nlohmann-json3-dev                   # header-only JSON (chat templates)
)
mkdir -p third_party/debs
rm -f third_party/debs/*.deb
(cd third_party/debs && apt-get download "${packages[@]}")

shared="${PACELINE_SHARED_DIR:-$(cd .. && pwd)/shared}"
if [[ -f "$shared/models/stories260K.gguf" ]]; then
  mkdir -p third_party/shared/models
  cp "$shared/models/stories260K.gguf" third_party/shared/models/
else
  echo "warning: no $shared/models/stories260K.gguf; the stories260K GPU" \
       "test will fail unless the GPU machine has it" >&2
fi
du -sh third_party/debs third_party/shared 2>/dev/null || true
