#!/usr/bin/env bash
# The GPU check, one command on a bare CUDA machine (CMake, nvcc, a C++
# compiler, Python; no network, no gRPC/protobuf/prometheus): builds the
# engine-only CUDA targets, runs the `gpu`-labelled tests and the CUDA
# engine benchmark, and prints a table.
#
# Libraries (Abseil, GoogleTest, Google Benchmark): the system's when CMake
# finds them, else the Debian packages in third_party/debs/ that
# tools/fetch_gpu_debs.sh downloads (unpacked here into third_party/prefix/
# with Python, no dpkg needed). Test data: $PACELINE_SHARED_DIR, else
# third_party/shared/, else ../shared.
#
# Environment: BUILD_DIR (build-gpu), JOBS (nproc), BENCH_FILTER (all),
# BENCH_TIMEOUT (300 s), SKIP_BENCH=1, SKIP_SANITIZER=1, FORCE_DEBS=1 (use
# third_party/debs even when the system has the libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="${BUILD_DIR:-build-gpu}"
jobs="${JOBS:-$(nproc)}"
start=$SECONDS

say() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - start)); }
die() { echo "gpu_check: $*" >&2; exit 1; }

nvcc="$(command -v nvcc || true)"
[[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -n "$nvcc" ]] || die "nvcc not found (PATH or /usr/local/cuda/bin)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

# --- libraries -------------------------------------------------------------
cmake_args=()
system_has() {  # a CMake config file of package $1 under the usual prefixes
  compgen -G "/usr/lib/*/cmake/$1/*onfig.cmake" >/dev/null ||
    compgen -G "/usr/lib/cmake/$1/*onfig.cmake" >/dev/null ||
    compgen -G "/usr/local/lib/cmake/$1/*onfig.cmake" >/dev/null ||
    compgen -G "/usr/local/lib/*/cmake/$1/*onfig.cmake" >/dev/null
}
if [[ -z "${FORCE_DEBS:-}" ]] && system_has absl && system_has GTest &&
   system_has benchmark; then
  say "libraries: the system's"
elif compgen -G "third_party/debs/*.deb" >/dev/null; then
  say "libraries: unpacking third_party/debs into third_party/prefix"
  rm -rf third_party/prefix
  python3 - third_party/debs third_party/prefix <<'PY'
import io, lzma, os, sys, tarfile
debs, prefix = sys.argv[1], sys.argv[2]
def members(path):  # the ar archive of a .deb
    data = open(path, 'rb').read()
    assert data[:8] == b'!<arch>\n', path
    i = 8
    while i < len(data):
        name = data[i:i + 16].decode().strip().rstrip('/')
        size = int(data[i + 48:i + 58].decode().strip())
        yield name, data[i + 60:i + 60 + size]
        i += 60 + size + (size & 1)
for deb in sorted(os.listdir(debs)):
    if not deb.endswith('.deb'):
        continue
    for name, blob in members(os.path.join(debs, deb)):
        if name.startswith('data.tar'):
            if name.endswith('.zst'):
                sys.exit(f'{deb}: zstd data; unpack it with dpkg-deb -x')
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                try:
                    tar.extractall(prefix, filter='tar')
                except TypeError:  # Python without extraction filters
                    tar.extractall(prefix)
    print('unpacked', deb)
PY
  usr="$root/third_party/prefix/usr"
  cmake_dir() { dirname "$(compgen -G "$usr/lib/*/cmake/$1/$2" | head -1)"; }
  cmake_args+=(
    "-DCMAKE_PREFIX_PATH=$usr"
    "-Dabsl_DIR=$(cmake_dir absl abslConfig.cmake)"
    "-DGTest_DIR=$(cmake_dir GTest GTestConfig.cmake)"
    "-Dbenchmark_DIR=$(cmake_dir benchmark benchmarkConfig.cmake)"
  )
else
  die "Abseil / GoogleTest / Google Benchmark not found, and no
third_party/debs/*.deb. On a Debian 12 machine with apt, run
tools/fetch_gpu_debs.sh, then bring third_party/debs (and third_party/shared)
here with the working tree."
fi

# --- test data ---------------------------------------------------------------
shared="${PACELINE_SHARED_DIR:-}"
if [[ -z "$shared" ]]; then
  for d in third_party/shared shared ../shared; do
    if [[ -f "$d/models/stories260K.gguf" ]]; then shared="$(cd "$d" && pwd)"; break; fi
  done
fi
[[ -n "$shared" ]] || { echo "warning: no stories260K.gguf; its test will fail" >&2; shared="$root/../shared"; }

# --- build ---------------------------------------------------------------------
generator=(-G "Unix Makefiles")
command -v ninja >/dev/null && generator=(-G Ninja)
say "configure ($build)"
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DPACELINE_CUDA=ON -DPACELINE_ENGINE_ONLY=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DPACELINE_SHARED_DIR="$shared" \
  "${cmake_args[@]}" >"$build-configure.log" 2>&1 ||
  { tail -40 "$build-configure.log"; die "configure failed ($build-configure.log)"; }
say "build (-j$jobs)"
targets=(cuda_self_test cuda_kernels_test cuda_engine_test)
[[ -n "${SKIP_BENCH:-}" ]] || targets+=(cuda_engine_bench)
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# --- tests ---------------------------------------------------------------------
say "gpu tests"
test_status=0
(cd "$build" && ctest -L gpu --output-on-failure --timeout 300 -j 4 \
   --output-junit gpu_tests.xml) || test_status=$?

# Out-of-bounds and race checks of the kernels, where the toolkit has
# compute-sanitizer (the kernel tests are small enough to run under it).
sanitizer="$(command -v compute-sanitizer || true)"
[[ -z "$sanitizer" && -x "$(dirname "$nvcc")/compute-sanitizer" ]] &&
  sanitizer="$(dirname "$nvcc")/compute-sanitizer"
if [[ -n "$sanitizer" && -z "${SKIP_SANITIZER:-}" ]]; then
  say "compute-sanitizer memcheck: cuda_kernels_test"
  timeout 300 "$sanitizer" --tool memcheck --error-exitcode 9 \
    "$build/tests/engine/cuda/cuda_kernels_test" --gtest_brief=1 ||
    { echo "compute-sanitizer found errors" >&2; test_status=1; }
  # Shared-memory hazards of the block-cooperative sampling kernel.
  say "compute-sanitizer racecheck: sampling kernel"
  rc=0
  timeout 180 "$sanitizer" --tool racecheck --error-exitcode 9 \
    "$build/tests/engine/cuda/cuda_kernels_test" --gtest_brief=1 \
    --gtest_filter='SamplingKernelTest.*' || rc=$?
  if [[ $rc == 124 ]]; then
    echo "warning: racecheck did not finish in 180 s" >&2
  elif [[ $rc != 0 ]]; then
    echo "compute-sanitizer racecheck found hazards" >&2; test_status=1
  fi
fi

# --- benchmark -----------------------------------------------------------------
bench_json="$build/cuda_engine_bench.json"
if [[ -z "${SKIP_BENCH:-}" ]]; then
  say "benchmark"
  timeout "${BENCH_TIMEOUT:-300}" "$build/bench/cuda_engine_bench" \
    --benchmark_filter="${BENCH_FILTER:-.}" \
    --benchmark_out="$bench_json" --benchmark_out_format=json ||
    echo "warning: benchmark exited with $?" >&2
fi

say "summary"
python3 - "$build/gpu_tests.xml" "$bench_json" <<'PY'
import json, os, sys
import xml.etree.ElementTree as ET
junit, bench = sys.argv[1], sys.argv[2]
if os.path.exists(junit):
    counts = {'passed': 0, 'failed': 0, 'skipped': 0}
    failed = []
    for case in ET.parse(junit).getroot().iter('testcase'):
        if case.find('failure') is not None or case.find('error') is not None:
            counts['failed'] += 1; failed.append(case.get('name'))
        elif case.find('skipped') is not None or case.get('status') == 'notrun':
            counts['skipped'] += 1
        else:
            counts['passed'] += 1
    print('gpu tests: ' + ', '.join(f'{v} {k}' for k, v in counts.items()))
    for name in failed:
        print('  FAILED', name)
    if counts['skipped']:
        print('  (skipped tests: the GPU tests skip when no CUDA device is'
              ' visible; the CPU-side ones never skip)')
if os.path.exists(bench):
    rows = json.load(open(bench)).get('benchmarks', [])
    print(f"\n{'benchmark':56} {'ms/step':>9} {'tok/s':>11} {'roofline':>11} {'of roof':>8}")
    for r in rows:
        name = r['name'].replace('/min_time:0.500', '').replace('/real_time', '')
        if r.get('error_occurred'):
            print(f"{name:56} {r.get('error_message', 'error')}")
            continue
        tok, roof = r.get('tokens/s', 0), r.get('roofline_tok/s', 0)
        frac = f"{100 * tok / roof:7.1f}%" if roof else '       -'
        print(f"{name:56} {r['real_time']:9.2f} {tok:11.0f} {roof:11.0f} {frac}")
    if rows and 'HBM_GB/s' in rows[0]:
        print(f"HBM copy bandwidth: {rows[0]['HBM_GB/s']:.0f} GB/s")
PY
say "done"
exit "$test_status"
