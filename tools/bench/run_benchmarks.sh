#!/usr/bin/env bash
# Runs the benchmark suite of docs/benchmarks.md against fresh local servers and writes one
# JSON file per run into $OUT (default /tmp/ic_bench). Every run is bounded (seconds to a few
# minutes). Usage: tools/bench/run_benchmarks.sh [BUILD_DIR]   (default: build)
#   SIZES="1000000 10000000"  index sizes to measure      DURATION=10s  per measured phase
#   CAP_ENTRIES=200000        --max-index-entries of the at-the-cap ingest run
#   H2LOAD_SIZES="$SIZES"     index sizes of the h2load phases ("" skips them)
#   H2LOAD_DURATION=10        seconds per h2load phase (after a 1 s warm-up)
#   ONLY=h2load               run only the h2load phases (quick iterations)
#   ONLY=pd                   run only the pd phase: LookupPDRoute beside LookupRoute (issue #14)
#   PD_SIZES="$SIZES"  PD_ROUNDS=2   index sizes and rounds of the pd phase ("" skips it)
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
ADMIN=""
start_server() {  # start_server NAME [CAP]: fresh data dir, index cap (default unbounded), journal on without fsync
  local dir="$OUT/data-$1"
  rm -rf "$dir" && mkdir -p "$dir"
  "$S" --insecure-disable-auth --data-dir="$dir" --grpc-bind-address=127.0.0.1:0 \
    --http-bind-address=127.0.0.1:0 --snapshot-bind-address=127.0.0.1:0 \
    --max-index-entries="${2:-0}" --journal-fsync=false 2>"$dir/server.log" &
  SERVER_PID=$!
  for _ in $(seq 1 300); do  # the address is logged before recovery ends: wait for "ready" too
    GRPC=$(grep -o '"grpc_addr":"[^"]*' "$dir/server.log" | cut -d'"' -f4 || true)
    [ -n "$GRPC" ] && grep -q '"ready"' "$dir/server.log" && break
    sleep 0.1
  done
  grep -q '"ready"' "$dir/server.log" || { echo "server did not start: $(tail -2 "$dir/server.log")" >&2; exit 1; }
  ADMIN=$(grep -o '"snapshot_addr":"[^"]*' "$dir/server.log" | cut -d'"' -f4)
}
stop_server() { kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""; }
trap '[ -n "$SERVER_PID" ] && kill -KILL "$SERVER_PID" 2>/dev/null || true' EXIT

# --- h2load: an independent HTTP/2 client (nghttp2-client) on the same server -------------
# Health/Check, LookupRoute, Health/Check again, at light load (-c1 -m1: one call in flight)
# and saturated (-c4 -m8: 4 connections x 8 streams), over an index prefilled with N entries of
# 64-block chains. Bodies are gRPC frames written by `inferencecache-bench frames` (one whole
# chain the index holds, checked to answer PREFIX_MATCH). Percentiles are nearest-rank over
# h2load's per-request log; ratios are against the mean of the two Health/Check phases.
H2LOAD_SIZES=${H2LOAD_SIZES-$SIZES}
H2LOAD_DURATION=${H2LOAD_DURATION:-10}
server_cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }  # utime + stime
h2load_phase() {  # h2load_phase TAG RPC_PATH BODY CLIENTS STREAMS -> "calls/s p50_us p99_us server_cpu_us_per_call"
  local tag=$1 path=$2 body=$3 c=$4 m=$5 t0 t1
  t0=$(server_cpu_ticks)
  h2load -t1 -c"$c" -m"$m" -D"$H2LOAD_DURATION" -d "$body" \
    -H 'content-type: application/grpc' -H 'te: trailers' --log-file="$OUT/$tag.log" \
    "http://$GRPC$path" >"$OUT/$tag.txt" 2>&1 || { cat "$OUT/$tag.txt" >&2; exit 1; }
  t1=$(server_cpu_ticks)
  grep -q ' 0 failed, 0 errored' "$OUT/$tag.txt" || { grep requests: "$OUT/$tag.txt" >&2; exit 1; }
  cut -f3 "$OUT/$tag.log" | sort -n | awk -v d="$H2LOAD_DURATION" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
    '{v[NR]=$1} END {i50=int(NR*0.5); if (i50<NR*0.5) i50++; i99=int(NR*0.99); if (i99<NR*0.99) i99++;
      printf "%.0f %s %s %.1f\n", NR/d, v[i50], v[i99], ticks/hz*1e6/NR}'
}
h2load_suite() {  # h2load_suite N: prefill N entries, then the six phases side by side
  local n=$1 frames="$OUT/frames-$1" load c m h1 l h2
  start_server "h2load-$n"
  "$B" --addr "$GRPC" --entries "$n" --json "$OUT/h2load_fill_$n.json" fill >/dev/null
  "$B" --addr "$GRPC" --entries "$n" --skip-fill frames --out-dir "$frames"
  for load in light:1:1 saturated:4:8; do
    IFS=: read -r load c m <<<"$load"
    h1=$(h2load_phase "h2load_${n}_${load}_health1" /grpc.health.v1.Health/Check "$frames/health_check.bin" "$c" "$m")
    l=$(h2load_phase "h2load_${n}_${load}_lookup" /inferencecache.v1alpha1.InferenceCache/LookupRoute "$frames/lookup_route.bin" "$c" "$m")
    h2=$(h2load_phase "h2load_${n}_${load}_health2" /grpc.health.v1.Health/Check "$frames/health_check.bin" "$c" "$m")
    echo "$h1 $l $h2" | awk -v n="$n" -v load="$load" -v c="$c" -v m="$m" '{
      printf "h2load %s entries, %s (-c%s -m%s), calls/s p50 p99 (us) server-CPU-us/call:", n, load, c, m;
      printf " Health/Check %d %d %d %.1f | LookupRoute %d %d %d %.1f | Health/Check %d %d %d %.1f\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12;
      printf "  ratio LookupRoute / Health/Check (mean of both): calls/s %.2f, p50 %.2fx, p99 %.2fx, server CPU %.2fx\n", 2*$5/($1+$9), 2*$6/($2+$10), 2*$7/($3+$11), 2*$8/($4+$12)}' |
      tee -a "$OUT/h2load_summary.txt"
  done
  stop_server
  cp "$OUT/data-h2load-$n/server.log" "$OUT/h2load_${n}_server.log"  # sweeps, snapshots during the phases
  rm -rf "$OUT/data-h2load-$n"
}

# --- pd: LookupPDRoute beside LookupRoute on one index (issue #14) -------------------------
# Chains on 64 replicas (the prefill side), a topology of 64 prefill + 64 decode replicas per
# tenant pushed to /topology by the bench; PD_ROUNDS pairs of phases, at concurrency 1 and 16,
# with the server's CPU time per call of each RPC (from /proc/PID/stat around every phase).
PD_SIZES=${PD_SIZES-$SIZES}
pd_phase() {
  local n c
  for n in $PD_SIZES; do
    start_server "pd-$n"
    "$B" --addr "$GRPC" --replicas 64 --entries "$n" --server-pid "$SERVER_PID" \
      --json "$OUT/pd_fill_$n.json" fill
    for c in 1 16; do
      echo "== pd $n entries, c$c, load: $(cut -d' ' -f1-3 /proc/loadavg)"
      "$B" --addr "$GRPC" --replicas 64 --entries "$n" --skip-fill -c "$c" -d "$DURATION" \
        --server-pid "$SERVER_PID" --json "$OUT/pd_${n}_c$c.json" \
        pd --admin-addr "$ADMIN" --rounds "${PD_ROUNDS:-2}"
    done
    stop_server
    rm -rf "$OUT/data-pd-$n"
  done
}

echo "== machine: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "${ONLY:-}" = pd ] && { pd_phase; echo "== done; results in $OUT"; exit 0; }
if [ -n "$H2LOAD_SIZES" ]; then
  command -v h2load >/dev/null || { echo "h2load missing: scripts/install_deps.sh installs nghttp2-client" >&2; exit 1; }
  for n in $H2LOAD_SIZES; do h2load_suite "$n"; done
fi
[ "${ONLY:-}" = h2load ] && { echo "== done; results in $OUT"; exit 0; }
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
pd_phase
echo "== done; results in $OUT"
