#!/usr/bin/env bash
# Profiles the server during the saturated h2load phases of run_benchmarks.sh, Health/Check
# and LookupRoute side by side on one server, and prints the server CPU per call by bucket
# (tools/bench/h2load_profile_buckets.py; docs/benchmarks.md, issue #13).
# Usage: tools/bench/h2load_profile.sh [BUILD_DIR]   (default: build)
#   OUT=/tmp/ic_h2prof   ENTRIES=1000000   PHASE=12 (s of h2load per phase)   REC=8 (s recorded)
#   FREQ=999 (perf -F)   CALLGRAPH=dwarf,16384 (perf --call-graph)   C=4 M=8 (h2load -c/-m)
# Each RPC gets two phases: one without perf (its server CPU per call, from /proc) and one
# under `perf record -g` (the split of that CPU; perf's own cost is not in the per-call total).
set -euo pipefail
BUILD=${1:-build}
B=$BUILD/tools/inferencecache-bench
S=$BUILD/server/inferencecache-server
OUT=${OUT:-/tmp/ic_h2prof}
ENTRIES=${ENTRIES:-1000000}
PHASE=${PHASE:-12}
REC=${REC:-8}
FREQ=${FREQ:-999}
CALLGRAPH=${CALLGRAPH:-dwarf,16384}
C=${C:-4}
M=${M:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
dir="$OUT/data"
rm -rf "$dir" && mkdir -p "$dir"
"$S" --insecure-disable-auth --data-dir="$dir" --grpc-bind-address=127.0.0.1:0 \
  --http-bind-address=127.0.0.1:0 --snapshot-bind-address=127.0.0.1:0 \
  --max-index-entries=0 --journal-fsync=false 2>"$dir/server.log" &
PID=$!
trap 'kill -KILL "$PID" 2>/dev/null || true' EXIT
GRPC=""
for _ in $(seq 1 300); do
  GRPC=$(grep -o '"grpc_addr":"[^"]*' "$dir/server.log" | cut -d'"' -f4 || true)
  [ -n "$GRPC" ] && grep -q '"ready"' "$dir/server.log" && break
  sleep 0.1
done
grep -q '"ready"' "$dir/server.log" || { echo "server did not start" >&2; exit 1; }
"$B" --addr "$GRPC" --entries "$ENTRIES" --json "$OUT/fill.json" fill >/dev/null
"$B" --addr "$GRPC" --entries "$ENTRIES" --skip-fill frames --out-dir "$OUT/frames"

ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
calls() { grep -o '[0-9]* succeeded' "$1" | head -1 | cut -d' ' -f1; }
phase() {  # phase TAG PATH BODY PERF(0|1) -> prints "TAG calls/s cpu_us_per_call"
  local tag=$1 path=$2 body=$3 prof=$4 t0 t1 n
  h2load -t1 -c"$C" -m"$M" -D"$PHASE" -d "$body" -H 'content-type: application/grpc' \
    -H 'te: trailers' "http://$GRPC$path" >"$OUT/$tag.txt" 2>&1 &
  local h=$!
  t0=$(ticks)
  if [ "$prof" = 1 ]; then
    sleep 2
    perf record -q -F "$FREQ" -g --call-graph "$CALLGRAPH" -p "$PID" -o "$OUT/$tag.perf" -- sleep "$REC" \
      2>"$OUT/$tag.perf.log"
  fi
  wait "$h"
  t1=$(ticks)
  grep -q ' 0 failed, 0 errored' "$OUT/$tag.txt" || { grep requests: "$OUT/$tag.txt" >&2; exit 1; }
  n=$(calls "$OUT/$tag.txt")
  awk -v tag="$tag" -v n="$n" -v d="$PHASE" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%s %.0f %.1f\n", tag, n/d, t/hz*1e6/n}'
}
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/summary.txt"
H=/grpc.health.v1.Health/Check
L=/inferencecache.v1alpha1.InferenceCache/LookupRoute
{
  phase health "$H" "$OUT/frames/health_check.bin" 0
  phase lookup "$L" "$OUT/frames/lookup_route.bin" 0
  phase health_perf "$H" "$OUT/frames/health_check.bin" 1
  phase lookup_perf "$L" "$OUT/frames/lookup_route.bin" 1
} | tee -a "$OUT/summary.txt"
kill -TERM "$PID"; wait "$PID" || true
trap - EXIT
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
hc=$(awk '$1=="health"{print $3}' "$OUT/summary.txt")
lc=$(awk '$1=="lookup"{print $3}' "$OUT/summary.txt")
for p in health_perf lookup_perf; do
  perf script -i "$OUT/$p.perf" -F comm,tid,ip,sym,dso --no-inline 2>/dev/null >"$OUT/$p.script"
done
python3 "$HERE/h2load_profile_buckets.py" "$OUT/health_perf.script" "$hc" "$OUT/lookup_perf.script" "$lc" |
  tee "$OUT/buckets.txt"
