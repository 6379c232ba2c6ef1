// Journal throughput: appends (fsync off/on × batch size × record size), group commit under
// concurrent appenders (against raw concurrent RocksDB writes, which get RocksDB's own write
// group), and snapshot write/read. Commands and figures: journal/README.md.
#include <benchmark/benchmark.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "journal/format.hpp"
#include "journal/log.hpp"
#include "journal/test_util.hpp"

namespace ic::journal {
namespace {

using testing::temp_dir;

std::unique_ptr<log> must_open(const std::string& dir, bool fsync) {
  options o;
  o.fsync = fsync;
  auto r = log::open(dir, o);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
    std::abort();
  }
  return std::move(*r);
}

/// args: fsync (0/1), records per batch, bytes per record.
void BM_append(benchmark::State& state) {
  const bool fsync = state.range(0) != 0;
  const auto batch = static_cast<std::size_t>(state.range(1));
  const std::string payload(static_cast<std::size_t>(state.range(2)), 'p');
  temp_dir t;
  auto l = must_open(t.path(), fsync);
  std::vector<record_in> recs(batch, record_in{1, payload});
  for (auto _ : state) {
    auto r = l->append(recs);
    if (!r.ok()) state.SkipWithError(r.status().to_string().c_str());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * payload.size()));
}
BENCHMARK(BM_append)
    ->ArgNames({"fsync", "batch", "bytes"})
    ->ArgsProduct({{0, 1}, {1, 16, 256}, {64, 1024}})
    ->MinTime(0.3)
    ->UseRealTime();

// Concurrent appenders share one log: the leader/follower batcher group-commits them.
std::unique_ptr<temp_dir> shared_dir;
std::unique_ptr<log> shared_log;

/// args: fsync (0/1); threads vary. One 64-byte record per append.
void BM_append_concurrent(benchmark::State& state) {
  if (state.thread_index() == 0) {
    shared_dir = std::make_unique<temp_dir>();
    shared_log = must_open(shared_dir->path(), state.range(0) != 0);
  }
  const std::string payload(64, 'c');
  for (auto _ : state) {
    auto r = shared_log->append(1, payload);
    if (!r.ok()) state.SkipWithError(r.status().to_string().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const auto st = shared_log->stats();
    state.counters["appends_per_group"] =
        st.groups == 0 ? 0.0 : static_cast<double>(st.appends) / static_cast<double>(st.groups);
    shared_log.reset();
    shared_dir.reset();
  }
}
BENCHMARK(BM_append_concurrent)
    ->ArgNames({"fsync"})
    ->Arg(0)
    ->Arg(1)
    ->ThreadRange(1, 16)
    ->MinTime(0.3)
    ->UseRealTime();

// The alternative: every thread calls DB::Write itself and RocksDB's write group combines
// them. Sequence numbers would then have to be assigned before the write, so a failed write
// would leave a hole; measured only to compare throughput.
rocksdb::DB* raw_db = nullptr;
std::atomic<std::uint64_t> raw_seq{0};

void BM_rocksdb_concurrent_writes(benchmark::State& state) {
  if (state.thread_index() == 0) {
    shared_dir = std::make_unique<temp_dir>();
    rocksdb::Options o;
    o.create_if_missing = true;
    if (!rocksdb::DB::Open(o, shared_dir->path(), &raw_db).ok()) std::abort();
  }
  rocksdb::WriteOptions wo;
  wo.sync = state.range(0) != 0;
  const std::string payload(64 + format::record_header_size, 'r');
  for (auto _ : state) {
    const std::uint64_t seq = raw_seq.fetch_add(1) + 1;
    auto s = raw_db->Put(wo, format::record_key(seq), payload);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    delete raw_db;
    raw_db = nullptr;
    shared_dir.reset();
  }
}
BENCHMARK(BM_rocksdb_concurrent_writes)
    ->ArgNames({"fsync"})
    ->Arg(0)
    ->Arg(1)
    ->ThreadRange(1, 16)
    ->MinTime(0.3)
    ->UseRealTime();

/// Writes a snapshot of `total` bytes in `chunk`-byte chunks and returns its id.
std::uint64_t write_snapshot(log& l, std::size_t total, std::size_t chunk) {
  auto w = l.begin_snapshot(l.last_sequence());
  std::string c(chunk, 's');
  for (std::size_t done = 0; done < total; done += chunk) {
    c[done % chunk] ^= 1;
    if (!w->add_chunk(c).ok()) std::abort();
  }
  auto info = w->finish();
  if (!info.ok()) std::abort();
  return info->id;
}

constexpr std::size_t snapshot_bytes = std::size_t{64} << 20;

/// args: chunk size in KiB. One iteration writes a 64 MiB snapshot (footer fsynced).
void BM_snapshot_write(benchmark::State& state) {
  const auto chunk = static_cast<std::size_t>(state.range(0)) << 10;
  temp_dir t;
  auto l = must_open(t.path(), false);
  for (auto _ : state) {
    const auto id = write_snapshot(*l, snapshot_bytes, chunk);
    state.PauseTiming();
    if (!l->delete_snapshot(id).ok()) std::abort();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * snapshot_bytes));
}
BENCHMARK(BM_snapshot_write)->ArgNames({"chunk_kib"})->Arg(64)->Arg(1024)->Iterations(3)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

/// args: chunk size in KiB. One iteration reads and verifies a 64 MiB snapshot.
void BM_snapshot_read(benchmark::State& state) {
  const auto chunk = static_cast<std::size_t>(state.range(0)) << 10;
  temp_dir t;
  auto l = must_open(t.path(), false);
  const auto id = write_snapshot(*l, snapshot_bytes, chunk);
  for (auto _ : state) {
    std::size_t bytes = 0;
    auto s = l->read_snapshot(id, [&](std::string_view c) {
      bytes += c.size();
      return status{};
    });
    if (!s.ok() || bytes != snapshot_bytes) state.SkipWithError("snapshot read failed");
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * snapshot_bytes));
}
BENCHMARK(BM_snapshot_read)->ArgNames({"chunk_kib"})->Arg(64)->Arg(1024)->Iterations(3)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ic::journal

BENCHMARK_MAIN();
