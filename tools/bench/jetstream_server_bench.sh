#!/usr/bin/env bash
# JetStream journal through the server, side by side in one run (docs/benchmarks.md
# "JetStream journal through the server"): a 3-node loopback NATS cluster (stream R3), one
# --journal=rocksdb server R and two --journal=jetstream replicas A and B.
#   1. LookupRoute on follower B vs on R: the same index filled into R and through A (B
#      follows), then ROUNDS rounds of `lookup --skip-fill` on both in ABBA order (R B, B R,
#      ...), with each process's CPU per round and the means of B vs R at the end; then
#      (LFU=1, the default) the same rounds again with the bench tenants' eviction LFU.
#   2. Ingest as fast as possible through R, then through A (B following).
#   3. Apply lag: `inferencecache-bench lag` offers INGEST_RATE blocks/s through A and times
#      markers from A's Ack to the first PREFIX_MATCH on B (tools/bench/follower_lag.hpp).
# Usage: tools/bench/jetstream_server_bench.sh [build]   (env: ENTRIES, LOOKUP_S, INGEST_S,
# LAG_S, INGEST_RATE, ROUNDS, LFU=0|1). Fixed loopback ports 14322-14324 (NATS clients), 16322-16324 (routes),
# 18322-18324 (NATS monitoring), 19191-19193, 18191-18193, 18291-18293 (servers); every
# process started here is stopped by its PID and the temp dir removed.
set -u
BUILD=$(cd "${1:-build}" && pwd)
B=$BUILD/server/inferencecache-server
BENCH=$BUILD/tools/inferencecache-bench
ENTRIES=${ENTRIES:-200000} LOOKUP_S=${LOOKUP_S:-5s} INGEST_S=${INGEST_S:-5s}
LAG_S=${LAG_S:-20s} INGEST_RATE=${INGEST_RATE:-100000} ROUNDS=${ROUNDS:-4}
T=$(mktemp -d /tmp/icjsbench.XXXX)
cd "$T"
PIDS=()
NAMES=(n1 n2 n3 R A B)  # in PIDS order
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  # A process that died during the run: say so, and keep every log for a look.
  for i in "${!PIDS[@]}"; do
    if [ -n "${DIED[$i]:-}" ]; then
      mkdir -p /tmp/icjsbench-logs && cp "$T"/*.log /tmp/icjsbench-logs/
      echo "the logs are in /tmp/icjsbench-logs"
      break
    fi
  done
  rm -rf "$T"
}
DIED=()
alive_check() {  # before each phase: every process still running?
  for i in "${!PIDS[@]}"; do
    if [ -z "${DIED[$i]:-}" ] && ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      DIED[$i]=1
      echo "!! ${NAMES[$i]} (pid ${PIDS[$i]}) is not running"
    fi
  done
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

alive_check
echo "== 1. LookupRoute: follower B vs rocksdb R (index of ~$ENTRIES entries in both)"
$BENCH --addr 127.0.0.1:19191 --entries "$ENTRIES" fill 2>/dev/null | grep -E "^(fill|filled)"
$BENCH --addr 127.0.0.1:19192 --entries "$ENTRIES" fill 2>/dev/null | grep -E "^(fill|filled)"
caught_up && echo "B caught up at stream sequence $(pos 18193 applied)"
# CPU (utime + stime, ms) each process used during one lookup round: the measured server's
# per call, and what the others (idle servers, NATS nodes) took from the same 2 cores.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
TICK_MS=$((1000 / $(getconf CLK_TCK)))
# ROUNDS rounds in ABBA order (R B, B R, R B, ...), so a drift of the box over the run
# weighs on both servers alike; the summary compares the means.
lookup_rounds() {  # $1: what the rounds are of (printed)
  SUMMARY=()
  for round in $(seq 1 "$ROUNDS"); do
    order=("rocksdb R:19191:3" "follower B:19193:5")
    [ $((round % 2)) = 0 ] && order=("follower B:19193:5" "rocksdb R:19191:3")
    for who in "${order[@]}"; do
      echo "-- $1 round $round, ${who%%:*}"
      IFS=: read -r _ port idx <<< "$who"
      before=(); for p in "${PIDS[@]}"; do before+=("$(ticks "$p")"); done
      out=$($BENCH --addr 127.0.0.1:$port -d "$LOOKUP_S" --entries "$ENTRIES" --skip-fill lookup 2>/dev/null)
      cpu=""; i=0
      for p in "${PIDS[@]}"; do
        used=$(( ($(ticks "$p") - before[i]) * TICK_MS )); cpu+=" ${NAMES[i]}=${used}ms"
        [ "$i" = "$idx" ] && mine=$used
        i=$((i + 1))
      done
      echo "$out" | grep -E "^(Health|LookupRoute)|PREFIX_MATCH answers"
      # both phases of the round (Health/Check, then LookupRoute): their "ok" columns
      calls=$(echo "$out" | awk '/^Health\/Check/ { n += $3 } /^LookupRoute +[0-9]/ { n += $2 } END { print n + 0 }')
      us=$(( mine * 1000 / (calls > 0 ? calls : 1) ))
      echo "cpu during the round:$cpu (measured server: $us us per call over $calls Health + LookupRoute calls)"
      # server p50 p99 calls/s cpu-us-per-call
      SUMMARY+=("$(echo "$out" | awk -v w="${who%%:*}" -v us="$us" '/^LookupRoute +[0-9]/ { print w, $5, $7, $4, us }')")
    done
  done
  printf '%s\n' "${SUMMARY[@]}" | awk -v what="$1" '
    { n[$2]++; p50[$2] += $3; p99[$2] += $4; rate[$2] += $5; cpu[$2] += $6 }
    END {
      for (s in n) printf "%s: mean over %d rounds, %s: LookupRoute p50 %.1f us, p99 %.1f us, %.0f calls/s, %.1f us server CPU per call\n", what, n[s], s, p50[s] / n[s], p99[s] / n[s], rate[s] / n[s], cpu[s] / n[s]
      if (n["R"] && n["B"])
        printf "%s: follower B vs rocksdb R: p50 %+.1f %%, p99 %+.1f %%, calls/s %+.1f %%\n", what, 100 * (p50["B"] / n["B"]) / (p50["R"] / n["R"]) - 100, 100 * (p99["B"] / n["B"]) / (p99["R"] / n["R"]) - 100, 100 * (rate["B"] / n["B"]) / (rate["R"] / n["R"]) - 100
    }'
}
alive_check
lookup_rounds LRU
alive_check
# The same with the 4 bench tenants' eviction LFU: every matched entry earns a credit, which B
# (JetStream) collects into the journaled credit batch and R credits in place.
LFU_POLICY='{"version":7,"policies":['
for t in 0 1 2 3; do LFU_POLICY+="$([ $t = 0 ] || echo ,){\"namespace\":\"bench-tenant-$t\",\"eviction\":\"lfu\"}"; done
LFU_POLICY+='],"tenants":[]}'
if [ "${LFU:-1}" = 1 ]; then
  for p in 18291 18292; do
    curl -s -o /dev/null -w "policy push to :$p: HTTP %{http_code}\n" -X POST --data "$LFU_POLICY" 127.0.0.1:$p/policy
  done
  for _ in $(seq 1 100); do
    [ "$(curl -s 127.0.0.1:18293/policy)" = "$(curl -s 127.0.0.1:18292/policy)" ] && break; sleep 0.1
  done
  curl -s 127.0.0.1:18293/policy | grep -q lfu && echo "B serves the LFU policy" || echo "B has no LFU policy"
  lookup_rounds LFU
  alive_check
fi

echo "== 2. ingest as fast as possible: rocksdb R, then replica A (B following)"
$BENCH --addr 127.0.0.1:19191 -d "$INGEST_S" --producers 2 --seed 11 ingest 2>/dev/null | tail -3
$BENCH --addr 127.0.0.1:19192 -d "$INGEST_S" --producers 2 --seed 11 ingest 2>/dev/null | tail -3
caught_up && echo "B caught up at stream sequence $(pos 18193 applied)"

echo "== 3. apply lag on B at $INGEST_RATE blocks/s offered through A"
$BENCH --addr 127.0.0.1:19192 -d "$LAG_S" --producers 2 --seed 12 --ingest-rate "$INGEST_RATE" \
  lag --follower 127.0.0.1:19193 2>/dev/null | tail -4
caught_up && echo "B caught up at stream sequence $(pos 18193 applied)"
alive_check
echo "== $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
