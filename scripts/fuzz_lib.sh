# Sourced by scripts/fuzz.sh and scripts/fuzz_long.sh: what a libFuzzer log says.

# fuzz_execs LOG: the executions the run reported (-print_final_stats=1), empty if none.
fuzz_execs() { sed -n 's/^stat::number_of_executed_units: *//p' "$1" | tail -1; }

# fuzz_finding LOG: the first line that names what a failed run found (crash, leak, UB,
# out-of-memory, timeout or a failed invariant of fuzz/fuzz_support.hpp), empty if none.
fuzz_finding() {
  grep -m1 -oE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)[^\n]*|runtime error:.*|fuzz invariant failed:.*' "$1" || true
}

# fuzz_artifact LOG: the file libFuzzer wrote the failing input to, empty if none.
fuzz_artifact() { sed -n 's/.*Test unit written to //p' "$1" | tail -1; }
