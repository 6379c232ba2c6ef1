#!/usr/bin/env bash
# Runs the benchmark suite of docs/benchmarks.md against fresh local servers and writes one
# JSON file per run into $OUT (default /tmp/ic_bench). Every run is bounded (seconds to a few
# minutes). Usage: tools/bench/run_benchmarks.sh [BUILD_DIR]   (default: build)
#   SIZES="1000000 10000000"  index sizes to measure      DURATION=10s  per measured phase
#   CAP_ENTRIES=200000        --max-index-entries of the at-the-cap ingest run
set -euo pipefail
BUILD=${1:-build}
B=$BUILD/tools/inferencecache-bench
S=$BUILD/server/inferencecache-server
OUT=${OUT:-/tmp/ic_bench}
SIZES=${SIZES:-"1000000 10000000"}
DURATION=${DURATION:-10s}
mkdir -p "$OUT"

SERVER_PID=""
GRPC=""
start_server() {  # start_server NAME [CAP]: fresh data dir, index cap (default unbounded), journal on without fsync
  local dir="$OUT/data-$1"
  rm -rf "$dir" && mkdir -p "$dir"
  "$S" --insecure-disable-auth --data-dir="$dir" --grpc-bind-address=127.0.0.1:0 \
    --http-bind-address=127.0.0.1:0 --snapshot-bind-address=127.0.0.1:0 \
    --max-index-entries="${2:-0}" --journal-fsync=false 2>"$dir/server.log" &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    GRPC=$(grep -o '"grpc_addr":"[^"]*' "$dir/server.log" | cut -d'"' -f4 || true)
    [ -n "$GRPC" ] && break
    sleep 0.1
  done
  [ -n "$GRPC" ] || { echo "server did not start: $(tail -2 "$dir/server.log")" >&2; exit 1; }
}
stop_server() { kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""; }
trap '[ -n "$SERVER_PID" ] && kill -KILL "$SERVER_PID" 2>/dev/null || true' EXIT

echo "== machine: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $SIZES; do
  start_server "$n"
  "$B" --addr "$GRPC" --entries "$n" --server-pid "$SERVER_PID" --json "$OUT/fill_$n.json" fill
  for c in 1 16; do
    "$B" --addr "$GRPC" --entries "$n" --skip-fill -c "$c" -d "$DURATION" \
      --json "$OUT/lookup_${n}_c$c.json" lookup
  done
  "$B" --addr "$GRPC" --entries "$n" --skip-fill -c 16 -d "$DURATION" --ingest-rate 100000 \
    --json "$OUT/mixed_${n}_c16.json" mixed
  stop_server
  rm -rf "$OUT/data-$n"
done

start_server ingest
for p in 2 4; do
  "$B" --addr "$GRPC" -d "$DURATION" --producers "$p" --json "$OUT/ingest_p$p.json" ingest
done
stop_server
rm -rf "$OUT/data-ingest"

# Ingest at the global cap: every update is then applied alone and merged over the tenants.
start_server ingest-cap "${CAP_ENTRIES:-200000}"
"$B" --addr "$GRPC" -d "$DURATION" --producers 2 --json "$OUT/ingest_cap_p2.json" ingest
stop_server
rm -rf "$OUT/data-ingest-cap"

for n in $SIZES; do
  for sig in term kill; do
    "$B" --entries "$n" --json "$OUT/recovery_${n}_$sig.json" recovery --server-binary "$S" \
      --server-arg=--max-index-entries=0 --signal "$sig" --restart-timeout 300s
  done
done
echo "== done; results in $OUT"
