#!/usr/bin/env bash
# Sanitizer pass (issue #16; scripts/test.sh runs it last unless SANITIZE=none): builds the tests
# in their own build directories and runs them
# under the sanitizers, with ccache and the compiler the Debian libraries were built with (g++ 12).
#
#   build-asan/  ASan + UBSan (-fno-omit-frame-pointer, halt on the first error, leaks on):
#                every test (ctest), the integration tests start the instrumented binaries.
#   build-tsan/  TSan: the tests labelled `tsan`, our own threaded components whose threads
#                meet through our own locks and atomics or pthread calls (index, state,
#                journal, topology, deadline timer, HTTP server, subscriber core and sender).
#                Not the actor, gateway and integration tests: their threads meet inside
#                Debian's uninstrumented CAF 0.17 and gRPC, which TSan cannot see (README.md,
#                "Sanitizers"; docs/benchmarks.md).
#
#   scripts/sanitize.sh            # both passes
#   scripts/sanitize.sh asan       # one of them: asan | tsan
#   SANITIZE_JOBS=2 (build and ctest parallelism, default nproc)
#   ASAN_TARGETS / TSAN_TARGETS: build only these (tests whose executable was not built are
#   listed by ctest as *_NOT_BUILT and fail: narrow with CTEST_ARGS="-R ..." as well)
#
# Every sanitizer report of every process (also the servers a test starts and does not check the
# exit code of) is written under <build>/sanitizer-logs/; the pass fails when ctest fails or when
# any report was written. Suppressions (uninstrumented Debian libraries only, one reason per
# entry): scripts/sanitizers/*.supp. Exit 0 only when every selected pass is clean.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
passes="${1:-asan tsan}"
[ "$passes" = all ] && passes="asan tsan"
jobs="${SANITIZE_JOBS:-$(nproc)}"
supp="$root/scripts/sanitizers"
cc="${SANITIZE_CC:-gcc-12}"
cxx="${SANITIZE_CXX:-g++-12}"
command -v "$cxx" >/dev/null || { echo "sanitize.sh: $cxx not found" >&2; exit 2; }

# configure <build dir> <sanitizer flags>: once per build directory.
configure() {
  local build="$1" flags="$2"
  [ -f "$build/build.ninja" ] && return 0
  CC="$cc" CXX="$cxx" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 $flags" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 $flags" \
    "-DCMAKE_EXE_LINKER_FLAGS=$flags -fuse-ld=gold" "-DCMAKE_SHARED_LINKER_FLAGS=$flags -fuse-ld=gold" \
    -DIC_BUILD_TESTS=ON -DIC_BUILD_BENCHMARKS=OFF -DIC_BUILD_FUZZERS=OFF >/dev/null
}

# build_targets <build dir> <targets...>: the build's ccache counters go to <build>/ccache.stats
# (stats_log), so the hit rate printed is this build's, not the shared cache's lifetime one.
build_targets() {
  local build="$1"
  shift
  rm -f "$build/ccache.stats"
  CCACHE_STATSLOG="$build/ccache.stats" cmake --build "$build" -j"$jobs" --target "$@" \
    >"$build/build.log" 2>&1 || { tail -n 40 "$build/build.log"; return 1; }
}

# ccache_summary <build dir>: "ccache N hits / M compiles" of the last build_targets.
ccache_summary() {
  [ -f "$1/ccache.stats" ] || { echo "ccache: nothing compiled"; return 0; }
  CCACHE_STATSLOG="$1/ccache.stats" ccache --show-log-stats |
    awk '/^ *Hits:/ {h=$2; t=$4} END {printf "ccache %s of %s compiles hit", h+0, t+0}'
}

# run_pass <name> <build dir> <ctest args...>: runs ctest, then fails on any written report.
run_pass() {
  local name="$1" build="$2"
  shift 2
  local logs="$build/sanitizer-logs" rc=0 t0
  rm -rf "$logs"
  mkdir -p "$logs"
  t0=$(date +%s)
  ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 600 "$@" ${CTEST_ARGS:-} \
    >"$build/ctest.log" 2>&1 || rc=$?
  grep -E "tests passed|tests failed|Total Test time" "$build/ctest.log" | sed "s/^/$name: /"
  # A pass that selected nothing checked nothing (the `tsan` label once matched no test).
  if grep -q "No tests were found" "$build/ctest.log"; then
    echo "$name: ctest selected no test"
    rc=1
  fi
  if compgen -G "$logs/*" >/dev/null; then
    echo "$name: sanitizer reports in $logs:"
    for f in "$logs"/*; do
      echo "--- $f"
      head -n 60 "$f"
    done
    rc=1
  fi
  [ "$rc" -ne 0 ] && grep -E "^[0-9/ ]*Test +#.*\*\*\*(Failed|Timeout|Exception|Not Run)" "$build/ctest.log" | head -20 || true
  echo "$name: ctest $(( $(date +%s) - t0 )) s, $([ "$rc" -eq 0 ] && echo clean || echo FAILED)"
  return "$rc"
}

# The executables labelled `tsan` (keep in step with the LABELS in the CMakeLists.txt files;
# a label without its executable here shows up as *_NOT_BUILT and fails the pass).
tsan_targets="ic_index_tests ic_state_tests ic_journal_tests ic_topology_tests
  ic_deadline_timer_tests ic_server_tests ic_kvevent_tests"

failed=0
for pass in $passes; do
  t0=$(date +%s)
  case "$pass" in
    asan)
      build="$root/build-asan"
      configure "$build" "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
      build_targets "$build" ${ASAN_TARGETS:-ic_tests}
      echo "asan: build $(( $(date +%s) - t0 )) s, $(ccache_summary "$build")"
      ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:log_path=$build/sanitizer-logs/asan" \
      LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0" \
      UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp:log_path=$build/sanitizer-logs/ubsan" \
        run_pass asan "$build" || failed=1
      ;;
    tsan)
      build="$root/build-tsan"
      configure "$build" "-fsanitize=thread"
      # Only what the `tsan` tests need: their executables and the binaries they start.
      build_targets "$build" ${TSAN_TARGETS:-$tsan_targets}
      echo "tsan: build $(( $(date +%s) - t0 )) s, $(ccache_summary "$build")"
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:print_suppressions=0:log_path=$build/sanitizer-logs/tsan" \
        run_pass tsan "$build" -L tsan || failed=1
      ;;
    *) echo "sanitize.sh: unknown pass \"$pass\" (asan | tsan | all)" >&2; exit 2 ;;
  esac
done
exit "$failed"
