#!/usr/bin/env bash
# JetStream journal through the server, side by side in one run (docs/benchmarks.md
# "JetStream journal through the server"): a 3-node loopback NATS cluster (stream R3), one
# --journal=rocksdb server R and two --journal=jetstream replicas A and B.
#   1. LookupRoute on follower B vs on R: the same index filled into R and through A (B
#      follows), then `lookup --skip-fill` alternately on R, B, R, B.
#   2. Ingest as fast as possible through R, then through A (B following).
#   3. Apply lag: `inferencecache-bench lag` offers INGEST_RATE blocks/s through A and times
#      markers from A's Ack to the first PREFIX_MATCH on B (tools/bench/follower_lag.hpp).
# Usage: tools/bench/jetstream_server_bench.sh [build]   (env: ENTRIES, LOOKUP_S, INGEST_S,
# LAG_S, INGEST_RATE). Fixed loopback ports 14322-14324 (NATS clients), 16322-16324 (routes),
# 18322-18324 (NATS monitoring), 19191-19193, 18191-18193, 18291-18293 (servers); every
# process started here is stopped by its PID and the temp dir removed.
set -u
BUILD=$(cd "${1:-build}" && pwd)
B=$BUILD/server/inferencecache-server
BENCH=$BUILD/tools/inferencecache-bench
ENTRIES=${ENTRIES:-200000} LOOKUP_S=${LOOKUP_S:-5s} INGEST_S=${INGEST_S:-5s}
LAG_S=${LAG_S:-20s} INGEST_RATE=${INGEST_RATE:-100000}
T=$(mktemp -d /tmp/icjsbench.XXXX)
cd "$T"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
echo "== $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "max_payload: 8MB" > nats.conf  # a 16 k-block update is one ~1 MB record (default max 1 MB)
R=nats://127.0.0.1:16322,nats://127.0.0.1:16323,nats://127.0.0.1:16324
for i in 1 2 3; do
  nats-server -c nats.conf --name n$i -a 127.0.0.1 -p 1432$((i + 1)) -m 1832$((i + 1)) -js -sd "$T/nats/n$i" \
    --cluster_name ic --cluster nats://127.0.0.1:1632$((i + 1)) --routes $R > nats$i.log 2>&1 &
  PIDS+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 1 100); do curl -sf 127.0.0.1:1832$((i + 1))/healthz > /dev/null && break; sleep 0.1; done
done
common="--insecure-disable-auth --log-format=text --max-index-entries=0"
S=nats://127.0.0.1:14322,nats://127.0.0.1:14323,nats://127.0.0.1:14324
js="--journal=jetstream --nats-servers=$S --nats-replicas=3"
$B $common --data-dir="$T/r" --grpc-bind-address=127.0.0.1:19191 --http-bind-address=127.0.0.1:18191 --snapshot-bind-address=127.0.0.1:18291 > r.log 2>&1 &
PIDS+=($!)
$B $common $js --replica-id=a --data-dir="$T/a" --grpc-bind-address=127.0.0.1:19192 --http-bind-address=127.0.0.1:18192 --snapshot-bind-address=127.0.0.1:18292 > a.log 2>&1 &
PIDS+=($!)
$B $common $js --replica-id=b --data-dir="$T/b" --grpc-bind-address=127.0.0.1:19193 --http-bind-address=127.0.0.1:18193 --snapshot-bind-address=127.0.0.1:18293 > b.log 2>&1 &
PIDS+=($!)
for p in 18191 18192 18193; do
  for _ in $(seq 1 300); do [ "$(curl -s 127.0.0.1:$p/readyz)" = ok ] && break; sleep 0.1; done
done
pos() { curl -s 127.0.0.1:$1/metrics | awk -v k="kind=\"$2\"}" 'index($0, k) { print $2 }'; }
caught_up() {  # B applied everything in the stream (<= 60 s)
  for _ in $(seq 1 600); do
    a=$(pos 18193 applied); l=$(pos 18193 stream_last)
    [ -n "$a" ] && [ "$a" = "$l" ] && [ "$a" = "$(pos 18192 stream_last)" ] && return 0
    sleep 0.1
  done
  echo "B did not catch up"; return 1
}

echo "== 1. LookupRoute: follower B vs rocksdb R (index of ~$ENTRIES entries in both)"
$BENCH --addr 127.0.0.1:19191 --entries "$ENTRIES" fill 2>/dev/null | grep -E "^(fill|filled)"
$BENCH --addr 127.0.0.1:19192 --entries "$ENTRIES" fill 2>/dev/null | grep -E "^(fill|filled)"
caught_up && echo "B caught up at stream sequence $(pos 18193 applied)"
for round in 1 2; do
  for who in "rocksdb R:19191" "follower B:19193"; do
    echo "-- round $round, ${who%%:*}"
    $BENCH --addr 127.0.0.1:${who##*:} -d "$LOOKUP_S" --entries "$ENTRIES" --skip-fill lookup 2>/dev/null |
      grep -E "^(Health|LookupRoute)|PREFIX_MATCH answers"
  done
done

echo "== 2. ingest as fast as possible: rocksdb R, then replica A (B following)"
$BENCH --addr 127.0.0.1:19191 -d "$INGEST_S" --producers 2 --seed 11 ingest 2>/dev/null | tail -3
$BENCH --addr 127.0.0.1:19192 -d "$INGEST_S" --producers 2 --seed 11 ingest 2>/dev/null | tail -3
caught_up && echo "B caught up at stream sequence $(pos 18193 applied)"

echo "== 3. apply lag on B at $INGEST_RATE blocks/s offered through A"
$BENCH --addr 127.0.0.1:19192 -d "$LAG_S" --producers 2 --seed 12 --ingest-rate "$INGEST_RATE" \
  lag --follower 127.0.0.1:19193 2>/dev/null | tail -4
caught_up && echo "B caught up at stream sequence $(pos 18193 applied)"
echo "== $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
