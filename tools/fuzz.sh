#!/usr/bin/env bash
# Builds the GGUF fuzzer with clang (libFuzzer + ASan + UBSan) in
# ${BUILD_DIR:-build-fuzz} and runs it for SECONDS (default 300).
#
#   tools/fuzz.sh [SECONDS] [extra libFuzzer flags...]
#
# The working corpus is fuzz/corpus/ (ignored by git), started from the
# tracked seeds in fuzz/seeds/ and fuzz/regressions/. Crashing inputs land in
# fuzz/crash-* (also ignored): minimize one, add it to fuzz/regressions/,
# fix the bug, and ctest's gguf_fuzz_replay keeps it fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-300}"
shift || true
build_dir="${BUILD_DIR:-build-fuzz}"

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (apt-get install -y clang libclang-rt-14-dev)" >&2
  exit 1
fi
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

# The sanitizers and coverage instrumentation apply to every object (the
# engine library included); -fsanitize=fuzzer links libFuzzer's main into
# the fuzzer alone (fuzz/CMakeLists.txt).
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
cmake -S . -B "$build_dir" "${generator[@]}" \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$sanitize -fno-omit-frame-pointer" \
  -DPACELINE_ENGINE_ONLY=ON \
  -DPACELINE_CUDA=OFF \
  -DPACELINE_FUZZ=ON >/dev/null
cmake --build "$build_dir" --target gguf_fuzzer

# The working corpus starts from the seeds and past findings (not the
# regressions folder's README).
mkdir -p fuzz/corpus
for f in fuzz/seeds/* fuzz/regressions/*; do
  if [[ -f "$f" && "$f" != *.md ]]; then cp -n "$f" fuzz/corpus/; fi
done

# Inputs stay a few KB, so any single allocation over 128 MB is a finding
# (the reader must not allocate what a file merely claims), as is an input
# taking over 10 s.
# Artifacts are named fuzz/crash-{crash,oom,timeout,leak}-<sha1>, which
# .gitignore's /fuzz/crash-* keeps out of commits.
"$build_dir/fuzz/gguf_fuzzer" \
  -max_total_time="$seconds" \
  -malloc_limit_mb=128 \
  -timeout=10 \
  -dict=fuzz/gguf.dict \
  -artifact_prefix=fuzz/crash- \
  -print_final_stats=1 \
  "$@" fuzz/corpus
