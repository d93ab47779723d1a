#!/usr/bin/env bash
# Decode and prefill of the same GGUF files on Paceline's CPU engine and
# llama.cpp's llama-bench, 2 threads each, one at a time, in rounds that
# alternate which goes first (drift hits both). llama-bench: pp512 and
# tg128, one repetition a round (its defaults otherwise: F16 KV cache,
# its warm-up). Paceline: engine_bench's BM_ModelPrefill (512 tokens, one
# step) and BM_ModelDecode (one sequence, positions 0..127), the engine's
# defaults (F16 KV cache). Prints per model min / median / max of each
# engine's tokens/s over the rounds and of the ratio Paceline / llama.cpp
# taken round by round.
#
# usage: bench/shapes_vs_llama_bench.sh LLAMA_BENCH MODEL.gguf [MODEL.gguf...]
#   BUILD=build ROUNDS=3 OUT=/tmp/shapes_vs_llama_bench
#   LLAMA_ARGS='--poll 0'  (more llama-bench flags, e.g. threads that sleep
#                           instead of spinning when the cores are shared)
# Files from bench/make_bench_model_next.py.
set -euo pipefail
cd "$(dirname "$0")/.."
llama="$1"; shift
build="${BUILD:-build}"
rounds="${ROUNDS:-3}"
out="${OUT:-/tmp/shapes_vs_llama_bench}"
read -r -a llama_args <<<"${LLAMA_ARGS:-}"
mkdir -p "$out"

run() {  # engine model round
  local name; name="$(basename "$2" .gguf)"
  if [[ $1 == llama ]]; then
    "$llama" -m "$2" -t 2 -p 512 -n 128 -r 1 -o json "${llama_args[@]}" \
      >"$out/$name.llama.$3.json" 2>"$out/$name.llama.$3.log"
  else
    PACELINE_BENCH_MODEL="$2" "$build/bench/engine_bench" \
      --benchmark_filter='BM_Model' --benchmark_format=json \
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

/usr/bin/python3 - "$out" "$rounds" "$@" <<'EOF'
import json, os, statistics, sys
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def spread(xs):
    return f"{min(xs):.1f} / {statistics.median(xs):.1f} / {max(xs):.1f}"
def ratio(xs):
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"
for model in models:
    name = os.path.basename(model)[:-5]
    rows = {"pp512": ([], []), "tg128": ([], [])}
    for r in range(1, rounds + 1):
        for t in json.load(open(f"{out}/{name}.llama.{r}.json")):
            key = "pp512" if t["n_prompt"] else "tg128"
            rows[key][1].append(t["avg_ts"])
        for b in json.load(open(f"{out}/{name}.paceline.{r}.json"))["benchmarks"]:
            key = "pp512" if "Prefill" in b["name"] else "tg128"
            rows[key][0].append(b["tokens/s"])
    print(f"{name} ({rounds} rounds; min / median / max)")
    for key, (pl, ll) in rows.items():
        print(f"  {key}: Paceline {spread(pl)}  llama.cpp {spread(ll)}  "
              f"ratio {ratio([p / l for p, l in zip(pl, ll)])}")
EOF
