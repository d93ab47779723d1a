#!/usr/bin/env bash
# A benchmark program's smoke run for ctest (bench/CMakeLists.txt): the
# Google Benchmark binary runs the benchmarks matching FILTER briefly; it
# fails unless it exits 0, at least one benchmark ran, and none reported
# an error other than one matching ALLOWED_ERROR (e.g. "no CUDA device"
# on a machine without one). The figures are not checked: they belong in
# bench/RESULTS.md, not in tests.
#
# usage: bench/smoke.sh BINARY FILTER [ALLOWED_ERROR]
set -euo pipefail
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" --benchmark_filter="$2" --benchmark_min_time=0.01 \
  --benchmark_out="$out" --benchmark_out_format=json >/dev/null
/usr/bin/python3 - "$out" "${3:-}" <<'PY'
import json, re, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
if not runs:
    sys.exit("no benchmark matched the filter")
for r in runs:
    if r.get("error_occurred"):
        message = r.get("error_message", "")
        if not sys.argv[2] or not re.search(sys.argv[2], message):
            sys.exit(f"{r['name']}: {message}")
        print(f"{r['name']}: {message} (allowed here)")
    else:
        print(f"{r['name']}: {r['iterations']} iterations")
PY
