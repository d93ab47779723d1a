#!/usr/bin/env bash
# Prefix caching shown: N requests that share one long system prompt
# against N requests of the same length with nothing in common, each run
# against a fresh pacelined (an empty cache), with the same closed-loop
# load. Prints, both ways, the bench's TTFT p50 / p99 and the prompt
# tokens the server actually prefilled (its metrics: prompt tokens less
# paceline_prefix_cache_hit_tokens_total).
#
# The dummy models' byte-level tokenizer makes one token per ASCII
# character (and a BOS), so prompt lengths are exact.
#
# usage: bench/prefix_cache.sh [BUILD_DIR]
#   MODEL=dummy:stories110m:q8_0 REQUESTS=200 SYSTEM_TOKENS=960
#   QUESTION_TOKENS=32 MAX_TOKENS=16 CONCURRENCY=8
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
model="${MODEL:-dummy:stories110m:q8_0}"
requests="${REQUESTS:-200}"
system_tokens="${SYSTEM_TOKENS:-960}"
question_tokens="${QUESTION_TOKENS:-32}"
max_tokens="${MAX_TOKENS:-16}"
concurrency="${CONCURRENCY:-8}"
work=$(mktemp -d)
trap 'kill "$daemon" 2>/dev/null || true; rm -rf "$work"' EXIT

/usr/bin/python3 - "$work" "$requests" "$system_tokens" "$question_tokens" \
    "$max_tokens" <<'PY'
import json, random, string, sys
work, n, sys_len, q_len, max_tokens = sys.argv[1], *map(int, sys.argv[2:])
rng = random.Random(1)
def text(k):
    return "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(k))
system = text(sys_len)
with open(f"{work}/shared.jsonl", "w") as shared, \
     open(f"{work}/distinct.jsonl", "w") as distinct:
    for i in range(n):
        question = f"{i:06d} " + text(q_len - 7)
        shared.write(json.dumps({"prompt": system + question,
                                 "max_tokens": max_tokens}) + "\n")
        # Distinct from the first token on: no block in common.
        distinct.write(json.dumps({"prompt": f"{i:06d} " + text(sys_len - 7)
                                   + question, "max_tokens": max_tokens}) + "\n")
PY

metric() {  # NAME -> its value on the running daemon's /metrics
  curl -s "http://127.0.0.1:$metrics_port/metrics" |
    awk -v n="$1" '$1 ~ "^"n"({|$)" {s += $2} END {print s + 0}'
}

for kind in shared distinct; do
  metrics_port=$((19460 + RANDOM % 200))
  "$build/server/pacelined" --model "$model" --listen 127.0.0.1:50073 \
    --http-listen "" --metrics-listen "127.0.0.1:$metrics_port" \
    --tenant a:benchkey --allow-root >"$work/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 120); do grep -q ready "$work/daemon.log" && break; sleep 0.5; done
  "$build/tools/paceline/paceline" bench --server 127.0.0.1:50073 \
    --api-key benchkey --concurrency "$concurrency" --requests "$requests" \
    --prompts "$work/$kind.jsonl" --temperature 0 --no-progress --json \
    >"$work/$kind.json"
  prompt=$(metric paceline_prompt_tokens_total)
  hit=$(metric paceline_prefix_cache_hit_tokens_total)
  kill -TERM "$daemon"; wait "$daemon" || true
  /usr/bin/python3 - "$work/$kind.json" "$kind" "$prompt" "$hit" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
run = d["runs"][0]["all"]
ttft = run["computed_ms"]["ttft"]
prompt, hit = float(sys.argv[3]), float(sys.argv[4])
print(f"{sys.argv[2]:8s} requests {run['ok']}/{run['requests']}  "
      f"TTFT p50 {ttft['p50']:.1f} ms  p99 {ttft['p99']:.1f} ms  "
      f"prompt tokens {prompt:.0f}, from the cache {hit:.0f}, "
      f"prefilled {prompt - hit:.0f}  "
      f"wall {d['runs'][0]['duration_s']:.1f} s")
PY
done
