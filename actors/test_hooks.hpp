// Test-only hooks, linked in two variants: `test_hooks_off.cpp` (every production binary:
// the hooks do nothing) and `test_hooks_on.cpp` (the `inferencecache-server-testhooks`
// binary that integration tests start, so that a TIMEOUT can be made deterministic).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace ic::actors {

/// Returns the journal's RocksDB environment (nullptr = the default; always in production).
/// The test variant, when IC_TEST_JOURNAL_FAULT_FILE names a path, returns a fault-injecting
/// environment whose writes fail (no space) while that file exists, so tests can make the
/// journal unavailable in the real binary.
rocksdb::Env* test_journal_env();

/// Returns how long a tenant actor stalls before each lookup decision (0 in production;
/// the test variant reads IC_TEST_LOOKUP_DELAY_MS once).
std::chrono::milliseconds test_lookup_delay();

/// Returns how long the stream follower (replicated journal) waits before handing each
/// batch over (0 in production; the test variant reads IC_TEST_FOLLOW_DELAY_MS once), so a
/// test can make a replica apply the stream late (a lost policy compare-and-set).
std::chrono::milliseconds test_follow_delay();

/// Returns the wall clock (Unix µs) for runtime_options::clock: empty in production (the
/// system clock); the test variant, when IC_TEST_CLOCK_OFFSET_MS is set (read once, may be
/// negative), returns the system clock shifted by that much, so a test can run one replica
/// with a skewed clock (spec/scaleout.md §3.10 check 7).
std::function<std::int64_t()> test_clock();

}  // namespace ic::actors
