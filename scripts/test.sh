#!/usr/bin/env bash
# Installs what is missing, builds everything once, runs every libFuzzer target for a short
# budget (scripts/fuzz.sh, clang-16 + ASan/UBSan in build-fuzz/; FUZZ_SECONDS, default 5 s per
# target; fixed seed FUZZ_SEED=1 unless set, FUZZ_SEED=random to explore), then every test with
# ctest (unit tests in parallel; integration tests start the real server on free loopback
# ports), then the sanitizer pass (scripts/sanitize.sh): every test under ASan+UBSan in
# build-asan/, and the `tsan` label (our own threaded components, not the CAF/gRPC tests,
# README "Sanitizers") under TSan in build-tsan/. SANITIZE=none skips it, SANITIZE=asan or
# SANITIZE=tsan runs one pass.
# Cost on the 2-core box (docs/benchmarks.md, "Sanitizer pass in CI (session 7)"): with
# ccache warm (a clone at any path: no object embeds one) ASan ~5.3 min, TSan ~2.7 min on top of the ~6 min of the rest; with ccache cold
# the ASan build alone takes ~23 min and TSan's ~10 min, which does not fit 25 minutes.
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
sanitize=${SANITIZE:-asan tsan}
if [ "$sanitize" != none ]; then
  "$root/scripts/sanitize.sh" "$sanitize"
  echo "sanitizers: $(( $(date +%s) - tested )) s"
fi
