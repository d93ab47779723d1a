#!/usr/bin/env bash
# Issue 38's long-context table: decode tokens/s of a dense and a hybrid
# file at 0 / 1k / 4k / 16k positions of context, on Paceline's CPU engine
# (engine_bench's BM_ModelDecodeDepth: 32 decode steps after a prefilled
# depth) and llama.cpp's llama-bench (-d DEPTH -n 32 -p 0), 2 threads each,
# one at a time, rounds alternating which engine goes first. Prints per
# file and depth the median tokens/s of each engine, Paceline / llama.cpp,
# each engine's speed at the depth over its own at depth 0 (what context
# costs), and Paceline's KV + state MB per sequence.
#
# usage: bench/hybrid_context.sh LLAMA_BENCH DENSE.gguf HYBRID.gguf
#   BUILD=build ROUNDS=3 OUT=/tmp/hybrid_context DEPTHS="0 1024 4096 16384"
# Files: bench/make_bench_model_next.py llama|qwen35 (stories110m's widths,
# dense and with Qwen3.5's layer pattern, Q8_0).
set -euo pipefail
cd "$(dirname "$0")/.."
llama="$1"; shift
build="${BUILD:-build}"
rounds="${ROUNDS:-3}"
out="${OUT:-/tmp/hybrid_context}"
read -r -a depths <<<"${DEPTHS:-0 1024 4096 16384}"
mkdir -p "$out"
filter="BM_ModelDecodeDepth/depth:($(IFS='|'; echo "${depths[*]}"))/"

run() {  # engine model round
  local name; name="$(basename "$2" .gguf)"
  if [[ $1 == llama ]]; then
    "$llama" -m "$2" -t 2 -p 0 -n 32 -d "$(IFS=,; echo "${depths[*]}")" \
      -r 1 -o json >"$out/$name.llama.$3.json" 2>"$out/$name.llama.$3.log"
  else
    PACELINE_BENCH_MODEL="$2" "$build/bench/engine_bench" \
      --benchmark_filter="$filter" --benchmark_format=json \
      >"$out/$name.paceline.$3.json" 2>"$out/$name.paceline.$3.log"
  fi
}

for r in $(seq 1 "$rounds"); do
  for model in "$@"; do
    if (( r % 2 )); then order="llama paceline"; else order="paceline llama"; fi
    for engine in $order; do
      echo "$(date -u +%H:%M:%S) round $r $engine $(basename "$model")" >&2
      run "$engine" "$model" "$r"
    done
  done
done

/usr/bin/python3 - "$out" "$rounds" "$@" <<'PY'
import json, os, statistics, sys
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = statistics.median
for model in models:
    name = os.path.basename(model)[:-5]
    pl, ll, mb = {}, {}, {}
    for r in range(1, rounds + 1):
        for t in json.load(open(f"{out}/{name}.llama.{r}.json")):
            ll.setdefault(t["n_depth"], []).append(t["avg_ts"])
        for b in json.load(open(f"{out}/{name}.paceline.{r}.json"))["benchmarks"]:
            d = int(b["name"].split("depth:")[1].split("/")[0])
            pl.setdefault(d, []).append(b["tokens/s"])
            mb[d] = b["kv_state_MB"]
    print(f"{name} ({rounds} rounds, medians)")
    print("  depth | Paceline tok/s | llama.cpp tok/s | ratio | Paceline vs depth 0 | llama.cpp vs depth 0 | KV+state MB")
    for d in sorted(pl):
        p, l = med(pl[d]), med(ll.get(d, [float("nan")]))
        print(f"  {d:5d} | {p:14.1f} | {l:15.1f} | {p / l:5.2f} | "
              f"{p / med(pl[0]):19.2f} | {l / med(ll[0]):20.2f} | {mb[d]:11.1f}")
PY
