#!/usr/bin/env bash
# Builds and runs tests under a sanitizer, in a build folder of its own:
#
#   tools/sanitize.sh asan|tsan [TARGET...]
#
# asan: AddressSanitizer + UndefinedBehaviorSanitizer (leaks included),
# build-asan/; tsan: ThreadSanitizer, build-tsan/. GCC, RelWithDebInfo
# with frame pointers, no CUDA. TARGETs are test executables to build and
# run; without them, the threaded parts: the
# KV pager, scheduler and serving loop, delivery (pacer, stream buffers)
# and the server's unit tests; each executable runs whole. Not yet part of
# .ci/run (issue 18: the CI budget).
#
# tsan caveat: Debian's Abseil is not built with ThreadSanitizer, so
# absl::Mutex's locking is invisible to it and it reports races on data that
# absl::Mutex guards (first seen: ServingLoop::inbox_, written and read under
# mu_ on both sides). A meaningful TSan run needs an instrumented Abseil.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-}"
case "$kind" in
  asan) flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;;
  tsan) flags="-fsanitize=thread" ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan [TARGET...]" >&2
    exit 2
    ;;
esac
shift
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(kv_pager_test kv_pager_property_test block_pool_test
           scheduler_test serving_loop_test admission_test cancellation_test
           fairness_test request_group_test step_sampler_test
           stream_buffer_test pacer_test request_builder_test)
fi
build_dir="build-$kind"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DPACELINE_CUDA=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
cd "$build_dir"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
status=0
for t in "${targets[@]}"; do
  exe="$(find . -type f -name "$t" -perm -u+x | head -1)"
  if [[ -z "$exe" ]]; then
    echo "sanitize.sh: no $t built" >&2
    status=1
    continue
  fi
  echo "sanitize.sh: $kind $t"
  if ! "$exe" --gtest_brief=1; then status=1; fi
done
exit "$status"
