#!/usr/bin/env bash
# Structured output end to end (issue 35): what a JSON Schema constraint
# costs a server under load. `paceline bench --api openai` sends the same
# load to Paceline's HTTP API and to llama.cpp's llama-server on the same
# GGUF, one server at a time: CONCURRENCY streams in flight at temperature
# 1, once unconstrained and once with llama.cpp's `json_schema` field
# (which both servers read on /v1/completions; llama-server turns it into
# its GBNF grammar), in rounds that alternate which server and which mode
# go first (so drift hits all four). Every constrained output is checked
# against the schema with python3-jsonschema. Prints, per server, the
# median aggregate output tok/s of each mode, the ratio constrained /
# unconstrained, how many constrained outputs validate, and their finish
# reasons. Paceline runs a third mode, the schema with fast-forward off
# (`"fast_forward": false`), so what fast-forward saves is measured in the
# same rounds.
#
# Both modes sample at temperature 1 from the whole distribution (top_k 0,
# top_p 1, min_p 0: llama-server's default top-k 40 and min-p 0.05 are
# off), with fixed seeds. Unconstrained requests set ignore_eos and run to
# PLAIN_MAX_TOKENS, about as long as a constrained output, so both modes
# hold sequences of similar length; constrained ones do not set it (the
# schema's end is the model's end of generation) and stop when the object
# is complete, so MAX_TOKENS must be large enough that the schema below
# always fits (its values are all bounded). Output tok/s counts the tokens
# each request did generate.
#
# A run whose JSON is already in OUT is skipped, so a cut-short
# comparison resumes where it stopped (delete OUT to measure anew).
#
# usage: bench/structured_e2e.sh LLAMA_SERVER MODEL.gguf
#   BUILD=build ROUNDS=2 CONCURRENCY=32 REQUESTS=96 WARMUP=8
#   PROMPT_TOKENS=32 MAX_TOKENS=256 PLAIN_MAX_TOKENS=64 THREADS=2
#   SERVERS="llama paceline" OUT=/tmp/structured_e2e
# MODEL: a 128k-vocabulary random-weight file from bench/make_bench_model.py
# with a tokenizer.json (its tokens that are not text are never sampled, so
# llama-server streams every output). Needs /usr/bin/python3 with
# python3-jsonschema.
set -euo pipefail
cd "$(dirname "$0")/.."
llama="$1"
model="$2"
build="${BUILD:-build}"
rounds="${ROUNDS:-2}"
concurrency="${CONCURRENCY:-32}"
requests="${REQUESTS:-96}"
max_tokens="${MAX_TOKENS:-256}"
plain_max_tokens="${PLAIN_MAX_TOKENS:-64}"
threads="${THREADS:-2}"
servers=(${SERVERS:-llama paceline})
out="${OUT:-/tmp/structured_e2e}"
mkdir -p "$out"
port=18232
{ date -u; lscpu | grep 'Model name'; uptime
  echo "pacelined: $build/server/pacelined, source $(git -C "$build" log -1 --format='%h %s' | cut -c1-72)"
  echo "llama-server: $llama, $("$llama" --version 2>&1 | grep -i version)"
} >>"$out/meta.txt" || true

# The schema: every value bounded, so every output is.
cat >"$out/schema.json" <<'JSON'
{
  "type": "object",
  "properties": {
    "kind": {"enum": ["cat", "dog", "bird", "fish"]},
    "count": {"type": "integer", "minimum": 0, "maximum": 999},
    "name": {"type": "string", "maxLength": 24},
    "done": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},
             "maxItems": 3}
  },
  "required": ["kind", "count", "name", "done", "tags"],
  "additionalProperties": false
}
JSON
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
sampling = {"top_k": 0, "top_p": 1, "min_p": 0}
schema = json.load(open(os.path.join(out, "schema.json")))
json.dump(sampling, open(os.path.join(out, "plain.body.json"), "w"))
json.dump(dict(sampling, json_schema=schema, ignore_eos=False),
          open(os.path.join(out, "schema.body.json"), "w"))
json.dump(dict(sampling, json_schema=schema, ignore_eos=False,
               fast_forward=False),
          open(os.path.join(out, "noff.body.json"), "w"))
PY

start() {  # server -> pid (waits for /health)
  if [[ $1 == llama ]]; then
    "$llama" -m "$model" --host 127.0.0.1 --port $port -t "$threads" \
      -np "$concurrency" -c $((concurrency * (${PROMPT_TOKENS:-32} + max_tokens + 32))) \
      --no-webui >"$out/server.$1.log" 2>&1 &
  else
    "$build/server/pacelined" --model "$model" --listen 127.0.0.1:0 \
      --http-listen 127.0.0.1:$port --tenant bench:benchkey --allow-root \
      --threads "$threads" >"$out/server.$1.log" 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 1 480); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.5
  done
  echo "$pid"
}

for ((r = 0; r < rounds; ++r)); do
  order=("${servers[@]}")
  modes=(plain schema noff)
  if ((r % 2 == 1)); then
    order=($(printf '%s\n' "${servers[@]}" | tac))
    modes=(noff schema plain)
  fi
  for server in "${order[@]}"; do
    todo=()
    for mode in "${modes[@]}"; do
      [[ $mode == noff && $server != paceline ]] && continue
      [[ -s "$out/$server.$mode.$r.json" ]] || todo+=("$mode")
    done
    ((${#todo[@]})) || continue  # done by an earlier, cut-short run
    pid=$(start "$server")
    for mode in "${todo[@]}"; do
      result="$out/$server.$mode.$r.json"
      echo "round $r: $server $mode ($(date -u +%H:%M:%S) UTC)" >&2
      tokens=$max_tokens
      [[ $mode == plain ]] && tokens=$plain_max_tokens
      "$build/tools/paceline/paceline" bench --api openai \
        --url "http://127.0.0.1:$port" --api-key benchkey \
        --concurrency "$concurrency" --requests "$requests" \
        --warmup "${WARMUP:-8}" --prompt-tokens "${PROMPT_TOKENS:-32}" \
        --max-tokens "$tokens" --temperature 1 --seed 1 \
        --vocab-size 128000 --timeout 600 --no-progress --json \
        --extra-body "$out/$mode.body.json" \
        --outputs "$out/$server.$mode.$r.outputs.jsonl" \
        >"$result" || { echo "bench failed: $server $mode $r" >&2; rm -f "$result"; }
    done
    # Not this shell's child (started in $(...)): wait until it is gone,
    # so the next server can bind the port.
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  done
done

/usr/bin/python3 - "$out" <<'PY'
import collections, glob, json, os, statistics, sys
import jsonschema

out = sys.argv[1]
schema = json.load(open(os.path.join(out, "schema.json")))
validator = jsonschema.Draft7Validator(schema)
tput = collections.defaultdict(list)        # (server, mode) -> tok/s per run
reqs = collections.defaultdict(list)        # (server, mode) -> req/s per run
outs = collections.defaultdict(collections.Counter)
tokens = collections.defaultdict(list)
first_bad = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    parts = os.path.basename(path).split(".")
    if len(parts) != 4:
        continue  # schema.json, *.body.json
    server, mode, r, _ = parts
    try:
        run = json.load(open(path))["runs"][0]["all"]
    except (ValueError, KeyError, IndexError):
        continue
    tput[(server, mode)].append(run["output_throughput"])
    reqs[(server, mode)].append(run["request_throughput"])
    lines = path[:-len(".json")] + ".outputs.jsonl"
    for line in open(lines, encoding="utf-8") if os.path.exists(lines) else []:
        o = json.loads(line)
        if o["salt"] == 1:
            continue  # the warm-up
        c = outs[(server, mode)]
        c["requests"] += 1
        c["finish " + (o["finish_reason"] or "none")] += 1
        if not o["ok"]:
            c["failed"] += 1
            continue
        tokens[(server, mode)].append(o["completion_tokens"])
        if mode == "plain":
            continue
        try:
            validator.validate(json.loads(o["text"]))
            c["valid"] += 1
        except (ValueError, jsonschema.ValidationError) as e:
            first_bad.setdefault(server, (o["text"], str(e).splitlines()[0]))

def med(xs):
    return statistics.median(xs) if xs else float("nan")

print("server | runs | unconstrained tok/s | constrained tok/s | ratio "
      "| constrained req/s | valid / outputs | tokens/output | finish reasons")
for server in sorted({k[0] for k in tput}):
    plain, con = tput[(server, "plain")], tput[(server, "schema")]
    c = outs[(server, "schema")]
    finish = ", ".join(f"{k[7:]} {v}" for k, v in sorted(c.items())
                       if k.startswith("finish "))
    print(f"{server} | {len(plain)}+{len(con)} | {med(plain):.0f} "
          f"[{min(plain, default=0):.0f}-{max(plain, default=0):.0f}] | "
          f"{med(con):.0f} [{min(con, default=0):.0f}-{max(con, default=0):.0f}] | "
          f"{med(con) / med(plain):.2f} | {med(reqs[(server, 'schema')]):.2f} | "
          f"{c['valid']} / {c['requests']} | "
          f"{med(tokens[(server, 'schema')]):.0f} | {finish}")
nf = tput[("paceline", "noff")]
if nf:
    con = tput[("paceline", "schema")]
    c = outs[("paceline", "noff")]
    print(f"paceline, fast-forward off | {len(nf)} | constrained "
          f"{med(nf):.0f} [{min(nf):.0f}-{max(nf):.0f}] tok/s, ratio to "
          f"unconstrained {med(nf) / med(tput[('paceline', 'plain')]):.2f}; "
          f"fast-forward on / off {med(con) / med(nf):.2f}; "
          f"{c['valid']} / {c['requests']} valid; "
          f"{med(tokens[('paceline', 'noff')]):.0f} tokens/output")
for server, (text, why) in first_bad.items():
    print(f"{server}: first invalid output {text[:200]!r}: {why}")
PY
