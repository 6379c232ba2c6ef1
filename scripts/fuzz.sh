#!/usr/bin/env bash
# Builds every libFuzzer target (fuzz/) with clang-16 in build-fuzz/ and runs each for
# SECONDS (default 30) on a fresh copy of its seed corpus (fuzz/corpus/<target>/), one after
# the other. Prints one line per target with total executions and executions per second.
# Exit 0 only when no target crashed, timed out, ran out of memory or leaked; the input
# that failed is kept under build-fuzz/fuzz-artifacts/.
#
#   scripts/fuzz.sh            # 30 s per target
#   scripts/fuzz.sh 10         # 10 s per target
#   FUZZ_TARGETS="fuzz_duration fuzz_policy_json" scripts/fuzz.sh 60
#   FUZZ_SEED=7 scripts/fuzz.sh 5         # libFuzzer -seed= (default 1, so CI runs repeat;
#   FUZZ_SEED=random scripts/fuzz.sh 5    #   random: libFuzzer picks one); printed per target
#   FUZZ_RUNS=10000000 scripts/fuzz.sh    # -runs= mode: N executions per target, no time
#                                         #   limit unless SECONDS is given as well
set -euo pipefail

runs="${FUZZ_RUNS:-}"
if [ -n "$runs" ] && ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: FUZZ_RUNS must be a positive whole number, got \"$runs\"" >&2
  exit 2
fi
seconds="${1:-$([ -n "$runs" ] && echo 0 || echo 30)}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || { [ "$seconds" -lt 1 ] && [ -z "$runs" ]; }; then
  echo "fuzz.sh: SECONDS must be a positive whole number, got \"$seconds\"" >&2
  exit 2
fi
seed="${FUZZ_SEED:-1}"
if [ "$seed" != random ] && ! [[ "$seed" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: FUZZ_SEED must be a whole number or \"random\", got \"$seed\"" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/fuzz_lib.sh"
build="$root/build-fuzz"
cc="${FUZZ_CC:-clang-16}"
cxx="${FUZZ_CXX:-clang++-16}"
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz.sh: $cxx not found (scripts/install_deps.sh installs clang-16)" >&2
  exit 2
fi

if [ ! -f "$build/build.ninja" ]; then
  CC="$cc" CXX="$cxx" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
    -DIC_BUILD_FUZZERS=ON -DIC_BUILD_TESTS=OFF -DIC_BUILD_BENCHMARKS=OFF >/dev/null
fi
if ! cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-2}" --target ic_fuzzers >"$build/fuzz-build.log" 2>&1; then
  echo "fuzz.sh: building the fuzz targets failed ($build/fuzz-build.log):" >&2
  grep -m5 -E "error|FAILED" "$build/fuzz-build.log" >&2 || tail -5 "$build/fuzz-build.log" >&2
  exit 1
fi

targets="${FUZZ_TARGETS:-$(cd "$root/fuzz/corpus" && ls -d fuzz_* | tr '\n' ' ')}"
work="$(mktemp -d /tmp/ic_fuzz.XXXXXX)"
trap 'rm -rf "$work"' EXIT
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

failed=0
for t in $targets; do
  bin="$build/fuzz/$t"
  if [ ! -x "$bin" ]; then
    echo "$t: FAILED (no binary $bin)"
    failed=1
    continue
  fi
  corpus="$work/$t"
  mkdir -p "$corpus"
  cp "$root/fuzz/corpus/$t/"* "$corpus/"
  log="$work/$t.log"
  rc=0
  t0=$(date +%s)
  "$bin" "$corpus" -max_total_time="$seconds" ${runs:+-runs="$runs"} \
    $([ "$seed" = random ] || echo "-seed=$seed") -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$t-" >"$log" 2>&1 || rc=$?
  took=$(( $(date +%s) - t0 ))
  execs="$(fuzz_execs "$log")"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  used_seed="$(sed -n 's/^INFO: Seed: *//p' "$log" | head -1)"
  if [ "$rc" -eq 0 ]; then
    echo "$t: ok execs=${execs:-?} execs/s=${rate:-?} seconds=$took seed=${used_seed:-?}"
  else
    what="$(fuzz_finding "$log")"
    artifact="$(fuzz_artifact "$log")"
    echo "$t: FAILED rc=$rc execs=${execs:-?} seconds=$took seed=${used_seed:-?} ${what:-see log} artifact=${artifact:-none}"
    cp "$log" "$artifacts/$t.log"
    failed=1
  fi
done
exit "$failed"
