#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and runs
# Paceline on the default model (the shared test model when present).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
model="${1:-../shared/models/stories260K.gguf}"
bin="${BUILD_DIR:-build}/tools/paceline/paceline"
if [[ ! -f "$model" ]]; then
  echo "run: $model not found; showing the plan of the built-in stories110m shape" >&2
  exec "$bin" plan --model dummy:stories110m --context 2048 --sequences 8
fi
"$bin" inspect "$model"
echo
echo "Try: $bin tokenize --model $model \"Once upon a time\""
