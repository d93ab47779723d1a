#!/usr/bin/env bash
# Speculative decoding, end to end on one machine: `paceline generate`
# (the serving loop over the CPU engine, one process per run) with
# --max-draft-tokens 0 and N, alternating, for a few prompts and models.
# Prints one line per run (model, prompt, drafts, generated tok/s,
# acceptance, engine steps) and, per (model, prompt, drafts), the median
# tok/s and its ratio to the median without drafts.
#
# usage: bench/speculation.sh [BUILD_DIR] [ROUNDS]
#   MODELS="a.gguf dummy:stories110m:f16" DRAFTS="2 4" MAX_TOKENS=300
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
rounds="${2:-3}"
paceline="$build/tools/paceline/paceline"
stories="../shared/models/stories260K.gguf"
models="${MODELS:-$stories dummy:stories110m:f16 dummy:stories110m:q8_0}"
drafts="${DRAFTS:-2 4 8}"
max_tokens="${MAX_TOKENS:-300}"

# A story start, and a copy edit: a paragraph, then an instruction and the
# paragraph's first words, so a model that copies has its source in view.
story="Once upon a time"
paragraph="Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. She said, \"I want to play with your ball, but I can't find it.\""
copy_edit="$paragraph
Fix the spelling in the text above and write it again:
Lily's mom said, \"Lily,"

run() {  # model prompt_name prompt drafts -> one result line
  local err
  err=$("$paceline" generate --model "$1" --prompt "$3" \
        --max-tokens "$max_tokens" --max-draft-tokens "$4" 2>&1 >/dev/null)
  local tps acc steps
  tps=$(sed -n 's/.*generated: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p' <<<"$err")
  acc=$(sed -n 's/.*accepted (\([0-9.]*\)%).*/\1/p' <<<"$err")
  steps=$(sed -n 's/.*; \([0-9]*\) engine steps.*/\1/p' <<<"$err")
  echo "$(basename "$1") $2 $4 $tps ${acc:--} ${steps:--}"
}

results=$(mktemp)
for ((r = 0; r < rounds; ++r)); do
  for model in $models; do
    for name in story copy_edit; do
      prompt=$([[ $name == story ]] && echo "$story" || echo "$copy_edit")
      for d in 0 $drafts; do run "$model" "$name" "$prompt" "$d"; done
    done
  done
done | tee "$results"

echo
echo "model prompt drafts median_tok/s vs_0 acceptance_% steps"
/usr/bin/python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    model, prompt, d, tps, acc, steps = line.split()
    runs[(model, prompt, int(d))].append((float(tps), acc, steps))
for (model, prompt, d), rs in sorted(runs.items()):
    med = statistics.median(t for t, _, _ in rs)
    base = statistics.median(t for t, _, _ in runs[(model, prompt, 0)])
    print(f"{model} {prompt} {d} {med:.0f} {med / base:.2f} {rs[0][1]} {rs[0][2]}")
PY
rm -f "$results"
