#!/usr/bin/env bash
# Installs the Debian 12 packages Paceline's build and tests need.
# Idempotent: runs `apt-get update` and `apt-get install` only when a
# package is missing. Needs root (or sudo) only in that case.
set -euo pipefail

packages=(
  cmake g++ ninja-build pkg-config git python3
  ccache lld  # every build folder compiles through ccache, links with lld (CMakeLists.txt)
  libabsl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev
  python3-grpcio python3-protobuf
  prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev  # JSON: chat template data, tool calls, the OpenAI API
  libboost-dev  # Boost.Beast / Asio (header-only): the HTTP server, the bench client
  curl  # the OpenAI API curl test
  python3-jinja2  # test oracle for chat templates (render_reference.py)
  openssl
  clang libclang-rt-14-dev  # libFuzzer and its sanitizers (tools/fuzz.sh)
  prometheus python3-yaml python3-jsonschema gnuplot-nox  # Prometheus + promtool, deploy checks, bench plots
)

# Node.js and npm for the OpenAI Node SDK test (tests/openai): Debian's own
# packages, unless node and npm are there already (NodeSource's nodejs
# ships npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
