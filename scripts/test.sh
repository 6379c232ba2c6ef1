#!/usr/bin/env bash
# Installs what is missing, builds everything once, and runs every test with ctest
# (unit tests in parallel; integration tests start the real server on free loopback ports).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/install_deps.sh"
start=$(date +%s)
"$root/scripts/build.sh"
built=$(date +%s)
echo "build: $((built - start)) s"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 300
echo "tests: $(( $(date +%s) - built )) s"
