#!/usr/bin/env bash
# One client, one load, two servers: `paceline bench --api openai` against
# Paceline's HTTP API and llama.cpp's llama-server on the same GGUF files,
# one server at a time, in rounds that alternate which goes first (so
# drift hits both). Prints, per model and concurrency, each server's
# median aggregate output tok/s and delivered TTFT p50 / p99 over the
# rounds, and the ratio Paceline / llama.cpp.
#
# A run whose JSON is already in OUT is skipped, so a cut-short
# comparison resumes where it stopped.
#
# usage: bench/side_by_side.sh LLAMA_SERVER MODEL.gguf [MODEL.gguf...]
#   BUILD=build ROUNDS=2 LEVELS=1,4,16,32 REQUESTS=64 PROMPT_TOKENS=32
#   MAX_TOKENS=128 OUT=/tmp/side_by_side
# Files from bench/make_bench_model.py (greedy output is always text,
# which llama-server insists on) and llama-quantize.
set -euo pipefail
cd "$(dirname "$0")/.."
llama="$1"; shift
build="${BUILD:-build}"
rounds="${ROUNDS:-2}"
levels="${LEVELS:-1,4,16,32}"
requests="${REQUESTS:-64}"
out="${OUT:-/tmp/side_by_side}"
mkdir -p "$out"
port=18231
max_slots=$(tr , '\n' <<<"$levels" | sort -n | tail -1)
prompt_tokens="${PROMPT_TOKENS:-32}"
max_tokens="${MAX_TOKENS:-128}"
# llama-server splits -c evenly over its slots: give each slot the load's
# prompt and output, and room for the chat template's tokens.
slot_ctx=$((prompt_tokens + max_tokens + 96))

start() {  # server model -> pid (waits for /health)
  if [[ $1 == llama ]]; then
    "$llama" -m "$2" --host 127.0.0.1 --port $port -t 2 -np "$max_slots" \
      -c $((max_slots * slot_ctx)) --no-webui >"$out/server.log" 2>&1 &
  else
    "$build/server/pacelined" --model "$2" --listen 127.0.0.1:0 \
      --http-listen 127.0.0.1:$port --tenant bench:benchkey --allow-root \
      --threads 2 >"$out/server.log" 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 1 240); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.5
  done
  echo "$pid"
}

for model in "$@"; do
  name=$(basename "$model" .gguf)
  for ((r = 0; r < rounds; ++r)); do
    order=(llama paceline)
    ((r % 2 == 1)) && order=(paceline llama)
    for server in "${order[@]}"; do
      result="$out/$name.$server.$r.json"
      [[ -s "$result" ]] && continue  # done by an earlier, cut-short run
      pid=$(start "$server" "$model")
      "$build/tools/paceline/paceline" bench --api openai \
        --url "http://127.0.0.1:$port" --api-key benchkey \
        --concurrency "$levels" --requests "$requests" --warmup 4 \
        --prompt-tokens "$prompt_tokens" \
        --max-tokens "$max_tokens" --temperature 0 --seed 1 \
        --vocab-size 32000 --timeout 300 --no-progress --json \
        >"$result" || { echo "bench failed: $name $server $r"; rm -f "$result"; }
      # Not this shell's child (started in $(...)): wait until it is gone,
      # so the next server can bind the port.
      kill -TERM "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    done
  done
done

/usr/bin/python3 - "$out" <<'PY'
import collections, glob, json, os, statistics, sys
cells = collections.defaultdict(list)
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    name, server, _, _ = os.path.basename(path).rsplit(".", 3)
    try:
        runs = json.load(open(path))["runs"]
    except (ValueError, KeyError):
        continue
    for run in runs:
        a = run["all"]
        cells[(name, run["concurrency"], server)].append(
            (a["output_throughput"], a["delivered_ms"]["ttft"]["p50"],
             a["delivered_ms"]["ttft"]["p99"], a["failed"]))
print("model streams | llama tok/s ttft_p50 ttft_p99 | paceline tok/s "
      "ttft_p50 ttft_p99 | ratio (runs, failed)")
for name, level in sorted({(k[0], k[1]) for k in cells}):
    row = [f"{name} {level:g}"]
    med = {}
    for server in ("llama", "paceline"):
        rs = cells.get((name, level, server), [])
        if not rs:
            row.append("| -"); continue
        med[server] = [statistics.median(x[i] for x in rs) for i in range(3)]
        row.append("| %.0f %.1f %.1f" % tuple(med[server]))
    ratio = med["paceline"][0] / med["llama"][0] if len(med) == 2 else float("nan")
    fails = sum(x[3] for s in ("llama", "paceline") for x in cells.get((name, level, s), []))
    runs = len(cells.get((name, level, "paceline"), []))
    row.append(f"| {ratio:.2f} ({runs}, {fails:g})")
    print(" ".join(row))
PY
