#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and starts
# pacelined on the default model (the shared test model when present,
# otherwise the built-in dummy:stories15m shape with random weights) with
# the sample config deploy/config/pacelined.textproto (tenants alice and
# bob; the test model, which has no chat template, gets Qwen 2.5's from
# ../shared/chat_templates so chat works too). Once it is ready it streams one paced story through
# `paceline complete`, prints how to query it, and keeps serving until
# Ctrl-C (which drains and stops it).
#
#   tools/run.sh [MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
build="${BUILD_DIR:-build}"
daemon="$build/server/pacelined"
cli="$build/tools/paceline/paceline"
config="deploy/config/pacelined.textproto"
model="${1:-../shared/models/stories260K.gguf}"
if [[ "$model" != dummy:* && ! -f "$model" ]]; then
  echo "run: $model not found; using the built-in dummy:stories15m (random weights)" >&2
  model="dummy:stories15m"
fi
extra=()
# The test model has no chat template of its own: lend it a real one so that
# chat requests work too (a model with its own template keeps it).
chat_template="../shared/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja"
if [[ -z "${1:-}" && -f "$chat_template" && -f "$model" ]]; then
  extra+=(--chat-template-file "$chat_template")
fi
if [[ $(id -u) -eq 0 ]]; then
  echo "run: running as root, so passing --allow-root (pacelined refuses root otherwise)" >&2
  extra+=(--allow-root)
fi

log="$(mktemp -t pacelined.XXXXXX.log)"
echo "\$ $daemon --config $config --model $model ${extra[*]}"
"$daemon" --config "$config" --model "$model" "${extra[@]}" 2> >(tee "$log" >&2) &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; rm -f "$log"' EXIT
trap 'exit 0' INT TERM
for _ in $(seq 1 600); do
  grep -q "pacelined: ready" "$log" && break
  kill -0 $pid 2>/dev/null || { echo "run: pacelined did not start" >&2; exit 1; }
  sleep 0.1
done
addr="$(sed -n 's/^pacelined: listening on \([^ ]*\).*/\1/p' "$log" | head -1)"
http="$(sed -n 's/^pacelined: http on \([^ ]*\).*/\1/p' "$log" | head -1)"

example=("$cli" complete --server "$addr" --api-key alice-key-change-me
         --prompt "Once upon a time" --max-tokens 64 --pace 20 --stream)
echo
echo "\$ $(printf '%q ' "${example[@]}")"
"${example[@]}" || true
cat <<MSG

pacelined is serving gRPC on $addr and HTTP on $http (tenants alice and bob; keys in $config).
Query it from another terminal:
  $cli complete --server $addr --api-key bob-key-change-me --prompt "The cat" --max-tokens 40 --stream
  /usr/bin/python3 tools/python/paceline_client.py --server $addr --api-key alice-key-change-me --prompt "Once upon a time" --pace 10 --stream
  $cli chat --server $addr --api-key alice-key-change-me --pace 20   (needs a chat template: the model's, or --chat-template-file)
The OpenAI-compatible HTTP API is on $http (model id: curl -s http://$http/v1/models -H "Authorization: Bearer alice-key-change-me"):
  curl -sSN http://$http/v1/completions -H "Authorization: Bearer alice-key-change-me" -H "Content-Type: application/json" -d '{"prompt": "Once upon a time", "max_tokens": 40, "stream": true, "pace_tokens_per_s": 10}'
Press Ctrl-C to drain and stop it.
MSG
wait $pid
