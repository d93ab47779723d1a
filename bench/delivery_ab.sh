#!/usr/bin/env bash
# Delivered TTFT and ITL of two pacelined builds, A/B on one machine: each
# round starts A's daemon, loads it with `paceline bench` (gRPC streams,
# unpaced, the client's own receive times), stops it, then does the same
# with B, alternating so that drift hits both. Prints each run's delivered
# TTFT and ITL p50/p99 and, per build, the median over the rounds and B/A.
# Issue 34 used it for output processing moving off the engine thread.
#
# usage: bench/delivery_ab.sh A_BUILD_DIR B_BUILD_DIR [ROUNDS]
#   MODEL=../shared/models/stories260K.gguf CONCURRENCY=64 REQUESTS=1024
#   MAX_TOKENS=128 PROMPT_TOKENS=32
set -euo pipefail
cd "$(dirname "$0")/.."
a="$1"
b="$2"
rounds="${3:-3}"
model="${MODEL:-../shared/models/stories260K.gguf}"
concurrency="${CONCURRENCY:-64}"
requests="${REQUESTS:-1024}"
max_tokens="${MAX_TOKENS:-128}"
prompt_tokens="${PROMPT_TOKENS:-32}"
client="$b/tools/paceline/paceline"  # one client for both
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # label build_dir -> one result line
  local log="$work/$1.log" port
  "$2/server/pacelined" --config bench/sse_streams.textproto \
    --model "$model" --allow-root --listen 127.0.0.1:0 \
    --http-listen "" --metrics-listen "" 2>"$log" &
  local pid=$!
  for _ in $(seq 600); do
    grep -q "pacelined: ready" "$log" && break
    sleep 0.1
  done
  port=$(sed -n 's/.*pacelined: listening on [^:]*:\([0-9]*\).*/\1/p' "$log" |
         head -1)
  "$client" bench --server "127.0.0.1:$port" --api-key sse-streams-key \
    --concurrency "$concurrency" --requests "$requests" --warmup 32 \
    --prompt-tokens "$prompt_tokens" --max-tokens "$max_tokens" \
    --json --no-progress >"$work/$1.json"
  kill -TERM "$pid"
  wait "$pid" || true
  /usr/bin/python3 - "$1" "$work/$1.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
run = json.load(open(path))["runs"][0]["all"]["delivered_ms"]
print(label, run["ttft"]["p50"], run["ttft"]["p99"],
      run["itl"]["p50"], run["itl"]["p99"])
PY
}

results="$work/results"
for ((r = 0; r < rounds; ++r)); do
  run A "$a"
  run B "$b"
done | tee "$results"

echo
echo "build ttft_p50_ms ttft_p99_ms itl_p50_ms itl_p99_ms (medians)"
/usr/bin/python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, *figures = line.split()
    runs[label].append([float(f) for f in figures])
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in runs.items()}
for k in sorted(med):
    print(k, " ".join(f"{x:.2f}" for x in med[k]))
print("B/A", " ".join(f"{b / a:.3f}" if a else "-"
                      for a, b in zip(med["A"], med["B"])))
PY
