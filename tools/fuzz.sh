#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (libFuzzer + ASan + UBSan) in
# ${BUILD_DIR:-build-fuzz} and runs them.
#
#   tools/fuzz.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
#
# TARGET is gguf (the GGUF reader, fuzz/gguf_fuzzer.cc), chat_template
# (the chat template parser and evaluator, fuzz/chat_template_fuzzer.cc),
# tokenizer (encode and decode over every ../shared/vocab vocabulary,
# fuzz/tokenizer_fuzzer.cc), request (OpenAI bodies and GenerateRequest
# bytes built into scheduler requests, fuzz/request_fuzzer.cc), http (raw
# bytes to the HTTP server, fuzz/http_fuzzer.cc), http_framing (a raw
# request's framing checks against Beast's parser,
# fuzz/http_framing_fuzzer.cc) or grammar (a JSON Schema, regex, GBNF
# grammar or choice list compiled and walked by a token mask checked
# against the matcher, fuzz/grammar_fuzzer.cc);
# without it every target runs for SECONDS (default 300), as many at once as
# there are cores (PACELINE_FUZZ_JOBS to change).
# `tools/fuzz.sh SECONDS` (a number first) is that too.
#
# Each target's working corpus is fuzz/corpus/TARGET/ (ignored by git),
# started from its tracked seeds and past findings: fuzz/seeds/ and
# fuzz/regressions/ (their files, not subfolders) for gguf;
# fuzz/seeds/chat_template/, fuzz/regressions/chat_template/ and the real
# templates in ${PACELINE_SHARED_DIR:-../shared}/chat_templates/ for
# chat_template; fuzz/seeds/TARGET/ and fuzz/regressions/TARGET/ for the
# others. Crashing inputs land in fuzz/crash-TARGET-* (also ignored):
# minimize one, add it to the target's regressions folder, fix the bug,
# and ctest's TARGET_fuzz_replay keeps it fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(gguf chat_template tokenizer request http http_framing grammar)
if [[ $# -gt 0 && ! "$1" =~ ^[0-9]+$ && "$1" != -* ]]; then
  case "$1" in
    gguf | gguf_fuzzer) targets=(gguf) ;;
    chat_template | chat_template_fuzzer) targets=(chat_template) ;;
    tokenizer | tokenizer_fuzzer) targets=(tokenizer) ;;
    request | request_fuzzer) targets=(request) ;;
    http | http_fuzzer) targets=(http) ;;
    http_framing | http_framing_fuzzer) targets=(http_framing) ;;
    grammar | grammar_fuzzer) targets=(grammar) ;;
    *)
      echo "fuzz.sh: unknown target '$1' (gguf, chat_template, tokenizer, request, http, http_framing or grammar)" >&2
      exit 2
      ;;
  esac
  shift
fi
seconds=300
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
build_dir="${BUILD_DIR:-build-fuzz}"
shared_dir="${PACELINE_SHARED_DIR:-../shared}"

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (apt-get install -y clang libclang-rt-14-dev)" >&2
  exit 1
fi
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

# The sanitizers and coverage instrumentation apply to every object (the
# engine libraries included); -fsanitize=fuzzer links libFuzzer's main into
# the fuzzers alone (fuzz/CMakeLists.txt).
# -O1 with line tables only, as OSS-Fuzz builds: about 10% less
# compile time than -O2 -g (four of its largest files: 57 -> 52 s), and
# stack traces still name file and line (NDEBUG as the RelWithDebInfo
# build had it).
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
cmake -S . -B "$build_dir" "${generator[@]}" \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only -DNDEBUG $sanitize -fno-omit-frame-pointer" \
  -DPACELINE_CUDA=OFF \
  -DPACELINE_BENCH=OFF \
  -DPACELINE_FUZZ=ON >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]/%/_fuzzer}"

# Copies the plain files (not *.md notes) of the given folders into $1.
seed() {
  local corpus="$1"
  shift
  mkdir -p "$corpus"
  local dir f
  for dir in "$@"; do
    for f in "$dir"/*; do
      if [[ -f "$f" && "$f" != *.md ]]; then cp -n "$f" "$corpus/"; fi
    done
  done
}

# Runs one target. Inputs stay small, so any single allocation over 128 MB
# is a finding (the GGUF reader must not allocate what a file merely
# claims; a template renders within its limits), as is an input taking
# over 10 s. Artifacts are named fuzz/crash-TARGET-{crash,oom,timeout,
# leak}-<sha1>, which .gitignore's /fuzz/crash-* keeps out of commits.
run() {
  local target="$1"
  shift
  local corpus="fuzz/corpus/$target"
  local flags=()
  case "$target" in
    gguf)
      # The corpus of runs before the per-target folders was fuzz/corpus/.
      mkdir -p "$corpus"
      find fuzz/corpus -maxdepth 1 -type f -exec mv -n {} "$corpus/" \;
      seed "$corpus" fuzz/seeds fuzz/regressions
      flags=(-dict=fuzz/gguf.dict)
      ;;
    chat_template)
      seed "$corpus" fuzz/seeds/chat_template fuzz/regressions/chat_template
      local f
      for f in "$shared_dir"/chat_templates/*.jinja; do
        if [[ -f "$f" ]]; then cp -n "$f" "$corpus/"; fi
      done
      flags=(-dict=fuzz/chat_template.dict -max_len=16384)
      ;;
    tokenizer | request | http_framing)
      seed "$corpus" "fuzz/seeds/$target" "fuzz/regressions/$target"
      flags=(-max_len=4096)
      ;;
    http)
      seed "$corpus" fuzz/seeds/http fuzz/regressions/http
      flags=(-max_len=8192)
      ;;
    grammar)
      seed "$corpus" fuzz/seeds/grammar fuzz/regressions/grammar
      flags=(-dict=fuzz/grammar.dict -max_len=4096)
      ;;
  esac
  echo "fuzz.sh: $target for $seconds s"
  "$build_dir/fuzz/${target}_fuzzer" \
    -max_total_time="$seconds" \
    -malloc_limit_mb=128 \
    -timeout=10 \
    "${flags[@]}" \
    -artifact_prefix="fuzz/crash-$target-" \
    -print_final_stats=1 \
    "$@" "$corpus"
}

if ((${#targets[@]} == 1)); then
  run "${targets[0]}" "$@"
  exit
fi
# Several targets: as many at once as there are cores (or
# PACELINE_FUZZ_JOBS; tools/test.sh should run all seven at once, so CI's
# minute each costs one minute), each logging to $build_dir/fuzz-TARGET.log;
# the final stats of each are printed, and the log's end for one that failed.
jobs_max="${PACELINE_FUZZ_JOBS:-$(nproc)}"
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_max)); do sleep 1; done
  log="$build_dir/fuzz-$target.log"
  rm -f "$log.rc"
  (if run "$target" "$@" >"$log" 2>&1; then echo 0; else echo 1; fi >"$log.rc") &
done
wait
status=0
for target in "${targets[@]}"; do
  log="$build_dir/fuzz-$target.log"
  if [[ "$(cat "$log.rc" 2>/dev/null)" == 0 ]]; then
    echo "fuzz.sh: $target: $(grep -m1 '^Done' "$log")"
  else
    echo "fuzz.sh: $target FAILED; the end of $log:"
    tail -n 60 "$log"
    status=1
  fi
done
exit "$status"
