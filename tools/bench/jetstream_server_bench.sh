#!/usr/bin/env bash
# Ingest through one server, side by side in one run: --journal=rocksdb vs --journal=jetstream
# (one local nats-server -js, --nats-replicas=1; replica A takes the ingest, replica B follows
# and its journal gauges are sampled every ~50 ms). Usage: tools/bench/jetstream_server_bench.sh [build]
# Every process is started here on fixed loopback ports (19191-19193, 18191-18293, 14322) and
# stopped by PID; the temp dir is removed. docs/benchmarks.md "JetStream journal through the server".
set -u
BUILD=$(cd "${1:-build}" && pwd)
B=$BUILD/server/inferencecache-server
BENCH=$BUILD/tools/inferencecache-bench
T=$(mktemp -d /tmp/wt15bench.XXXX)
cd $T
nats-server -js -a 127.0.0.1 -p 14322 -sd $T/nats > nats.log 2>&1 & NATS=$!
sleep 0.5
common="--insecure-disable-auth --log-format=text --max-index-entries=0"
$B $common --data-dir=$T/r --grpc-bind-address=127.0.0.1:19191 --http-bind-address=127.0.0.1:18191 --snapshot-bind-address=127.0.0.1:18291 > r.log 2>&1 & R=$!
js="--journal=jetstream --nats-servers=nats://127.0.0.1:14322 --nats-replicas=1"
$B $common $js --replica-id=a --data-dir=$T/a --grpc-bind-address=127.0.0.1:19192 --http-bind-address=127.0.0.1:18192 --snapshot-bind-address=127.0.0.1:18292 > a.log 2>&1 & A=$!
$B $common $js --replica-id=b --data-dir=$T/b --grpc-bind-address=127.0.0.1:19193 --http-bind-address=127.0.0.1:18193 --snapshot-bind-address=127.0.0.1:18293 > b.log 2>&1 & BB=$!
sleep 3
echo "== rocksdb"; $BENCH --addr 127.0.0.1:19191 -d 5s --producers 2 ingest 2>/dev/null | tail -8
echo "== jetstream (ingest on A; B follows)"
( for i in $(seq 1 120); do curl -s 127.0.0.1:18193/metrics | grep -E '^inferencecache_journal_(apply_lag_seconds|position)' | tr '\n' ' '; echo; sleep 0.05; done > lag.txt ) &
LAGP=$!
$BENCH --addr 127.0.0.1:19192 -d 5s --producers 2 ingest 2>/dev/null | tail -8
wait $LAGP
echo "== B apply lag samples (every ~50 ms during the A run): max, nonzero count"
grep -c . lag.txt; grep -o "apply_lag_seconds [0-9.e-]*" lag.txt | awk "{ if (\$2>m) m=\$2; if (\$2>0) n++; c++ } END { print \"max\", m, \"nonzero\", n, \"of\", c }"; head -c 600 lag.txt
sleep 1
echo "== positions A / B after the run"
curl -s 127.0.0.1:18192/metrics | grep '^inferencecache_journal_position'
curl -s 127.0.0.1:18193/metrics | grep '^inferencecache_journal_position'
kill $R $A $BB; sleep 2; kill $NATS; wait 2>/dev/null
rm -rf $T
