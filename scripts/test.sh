#!/usr/bin/env bash
# Installs what is missing, builds everything once, runs every libFuzzer target for a short
# budget (scripts/fuzz.sh, clang-16 + ASan/UBSan in build-fuzz/; FUZZ_SECONDS, default 5 s per
# target; fixed seed FUZZ_SEED=1 unless set, FUZZ_SEED=random to explore), then every test with ctest (unit tests in parallel; integration tests start the real
# server on free loopback ports). SANITIZE="asan tsan" (or one of them) adds the sanitizer
# pass (scripts/sanitize.sh: every test under ASan+UBSan in build-asan/, the `tsan` label -
# our own threaded components, not the CAF/gRPC tests, README "Sanitizers" - under TSan in
# build-tsan/). It is off by default: on the shared 2-core box neither cold build finished
# in a session, and the TSan tests of ic_journal_tests alone took 629 s under ctest -j2 at
# load 8, so neither is shown to fit the 25-minute CI budget (docs/benchmarks.md, "Sanitizer
# pass, measured again" and the section before it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/install_deps.sh"
start=$(date +%s)
"$root/scripts/build.sh"
built=$(date +%s)
echo "build: $((built - start)) s"
"$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-5}"
fuzzed=$(date +%s)
echo "fuzz: $((fuzzed - built)) s"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 300
tested=$(date +%s)
echo "tests: $((tested - fuzzed)) s"
if [ "${SANITIZE:-none}" != none ]; then
  "$root/scripts/sanitize.sh" "$SANITIZE"
  echo "sanitizers: $(( $(date +%s) - tested )) s"
fi
