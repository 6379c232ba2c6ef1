#!/usr/bin/env bash
# Long fuzz campaigns (issue #16: each target once for >= 10 M executions) in legs that can be
# stopped and resumed, on one or more cores:
#
#   scripts/fuzz_long.sh TARGET TOTAL [WORKERS]   # run one leg of TARGET's campaign to TOTAL
#   scripts/fuzz_long.sh --status TARGET           # the ledger and the campaign's total
#   scripts/fuzz_long.sh --export TARGET FILE      # corpus + ledger into FILE (.tar.gz)
#   FUZZ_LONG_IMPORT=FILE scripts/fuzz_long.sh TARGET TOTAL [WORKERS]   # resume from FILE
#
# The target is built as scripts/fuzz.sh builds it (build-fuzz/). A campaign's state lives in
# ${FUZZ_LONG_DIR:-build-fuzz/long}/TARGET/: corpus/ (a copy of fuzz/corpus/TARGET at the first
# leg, then what the legs grew), artifacts/, logs/ and ledger.tsv (one line per worker and leg:
# commit, binary sha256, seed, executions, exit code). A leg starts WORKERS processes (default
# 1; one per core) on the shared corpus (libFuzzer rereads it every second), each with its own
# seed and its share of what the campaign still needs: TOTAL minus the executions of earlier
# legs of the same binary. Another binary (the code changed) starts the count again on the kept
# corpus. Ctrl-C or SIGTERM stops the leg: every worker prints its count into the ledger.
# Flags as fuzz.sh, but -timeout=600: a worker starved by other work on the box is not a hang.
#
# Exit 0: the campaign has TOTAL clean executions of this binary. 1: a worker found a crash,
# leak, UB, timeout or failed invariant (the input is in artifacts/, the log in logs/).
# 3: the leg stopped short, clean so far. 2: bad arguments.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/fuzz_lib.sh"
base="${FUZZ_LONG_DIR:-$root/build-fuzz/long}"
usage() { echo "usage: fuzz_long.sh TARGET TOTAL [WORKERS] | --status TARGET | --export TARGET FILE" >&2; exit 2; }

# A worker's ledger line counts when it ran to its share (exit 0) or was stopped (libFuzzer's
# interrupt exit, 72); any other exit code is a finding. Columns: leg, start, end, sha, commit,
# worker, seed, executions, exit code.
clean='($9 == 0 || $9 == 72)'
ledger_total() {  # executions of clean legs of binary $2 in ledger $1
  [ -f "$1" ] || { echo 0; return; }
  awk -F'\t' -v sha="$2" "\$4 == sha && $clean { n += \$8 } END { print n + 0 }" "$1"
}

case "${1:-}" in
  --status)
    [ $# -eq 2 ] || usage
    ledger="$base/$2/ledger.tsv"
    [ -f "$ledger" ] || { echo "fuzz_long.sh: no campaign for $2 under $base" >&2; exit 2; }
    cat "$ledger"
    awk -F'\t' "{ if ($clean) n[\$4] += \$8; else bad++ }"'
      END { for (s in n) printf "binary %s: %d clean executions\n", substr(s, 1, 12), n[s];
            if (bad) printf "%d worker(s) found something (see artifacts/)\n", bad }' "$ledger"
    exit 0 ;;
  --export)
    [ $# -eq 3 ] || usage
    [ -d "$base/$2/corpus" ] || { echo "fuzz_long.sh: no campaign for $2 under $base" >&2; exit 2; }
    tar -C "$base/$2" -czf "$3" corpus ledger.tsv
    echo "fuzz_long.sh: $2: $(ls "$base/$2/corpus" | wc -l) corpus files and the ledger in $3"
    exit 0 ;;
esac

[ $# -ge 2 ] && [ $# -le 3 ] || usage
target=$1; total=$2; workers=${3:-1}
[[ "$target" =~ ^fuzz_[a-z0-9_]+$ ]] && [ -d "$root/fuzz/corpus/$target" ] ||
  { echo "fuzz_long.sh: unknown target \"$target\" (no fuzz/corpus/$target)" >&2; exit 2; }
[[ "$total" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz_long.sh: TOTAL must be a positive whole number, got \"$total\"" >&2; exit 2; }
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz_long.sh: WORKERS must be a positive whole number, got \"$workers\"" >&2; exit 2; }

# Build exactly as fuzz.sh does (FUZZ_RUNS=1: the target only runs its seed corpus once).
FUZZ_TARGETS="$target" FUZZ_RUNS=1 "$root/scripts/fuzz.sh" >/dev/null ||
  { echo "fuzz_long.sh: building or starting $target failed (scripts/fuzz.sh)" >&2; exit 1; }
bin="$root/build-fuzz/fuzz/$target"

state="$base/$target"
mkdir -p "$state/artifacts" "$state/logs"
if [ ! -d "$state/corpus" ]; then
  if [ -n "${FUZZ_LONG_IMPORT:-}" ]; then
    tar -C "$state" -xzf "$FUZZ_LONG_IMPORT" corpus ledger.tsv
  else
    mkdir -p "$state/corpus"
    cp "$root/fuzz/corpus/$target/"* "$state/corpus/"
  fi
fi
ledger="$state/ledger.tsv"
touch "$ledger"
sha="$(sha256sum "$bin" | cut -d' ' -f1)"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
done_runs=$(ledger_total "$ledger" "$sha")
left=$((total - done_runs))
if [ "$left" -le 0 ]; then
  echo "$target: campaign done: $done_runs clean executions of this binary (${sha:0:12})"
  exit 0
fi
leg=$(( $(cut -f1 "$ledger" | sort -n | tail -1 | sed 's/^$/0/') + 1 ))
share=$(( (left + workers - 1) / workers ))
echo "$target: leg $leg, $workers worker(s) x $share executions; $done_runs of $total done before (binary ${sha:0:12}, $commit)"

start="$(date -u +%FT%TZ)"
pids=()
for ((w = 0; w < workers; w++)); do
  seed=$((leg * 100 + w))
  "$bin" "$state/corpus" -runs="$share" -seed="$seed" -timeout=600 -report_slow_units=600 \
    -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$state/artifacts/leg$leg-w$w-" >"$state/logs/leg$leg-w$w.log" 2>&1 &
  pids+=($!)
done
stop() { for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done; }
trap stop INT TERM

failed=0
for ((w = 0; w < workers; w++)); do
  # wait also returns when a trapped signal arrives: go on waiting while the worker runs.
  while kill -0 "${pids[$w]}" 2>/dev/null; do wait "${pids[$w]}" || true; done
  wait "${pids[$w]}" && rc=0 || rc=$?
  log="$state/logs/leg$leg-w$w.log"
  execs="$(fuzz_execs "$log")"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$leg" "$start" "$(date -u +%FT%TZ)" "$sha" \
    "$commit" "$w" "$((leg * 100 + w))" "${execs:-0}" "$rc" >>"$ledger"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 72 ]; then
    what="$(fuzz_finding "$log")"
    echo "$target: worker $w FAILED rc=$rc execs=${execs:-?} ${what:-see $log} artifact=$(fuzz_artifact "$log")"
    failed=1
  else
    echo "$target: worker $w ok execs=${execs:-?} rc=$rc"
  fi
done
trap - INT TERM

now=$(ledger_total "$ledger" "$sha")
echo "$target: campaign $now of $total clean executions of binary ${sha:0:12} after leg $leg"
[ "$failed" -eq 0 ] || exit 1
[ "$now" -ge "$total" ] || exit 3
