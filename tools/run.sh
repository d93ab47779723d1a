#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and runs
# Paceline on the default model: the shared test model when present,
# otherwise the built-in dummy:stories15m shape (random weights).
#
#   tools/run.sh [MODEL] [PROMPT]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
bin="${BUILD_DIR:-build}/tools/paceline/paceline"
model="${1:-../shared/models/stories260K.gguf}"
prompt="${2:-Once upon a time}"
if [[ "$model" != dummy:* && ! -f "$model" ]]; then
  echo "run: $model not found; using the built-in dummy:stories15m (random weights)" >&2
  model="dummy:stories15m"
fi
if [[ "$model" != dummy:* ]]; then
  "$bin" inspect "$model"
  echo
fi
echo "\$ $bin generate --model $model --prompt \"$prompt\" --max-tokens 64"
"$bin" generate --model "$model" --prompt "$prompt" --max-tokens 64
echo
echo "Try: $bin generate --model $model --prompt \"$prompt\" --prompt \"The cat\" --temperature 0.8 --seed 1"
