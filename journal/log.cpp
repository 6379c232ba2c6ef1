#include "journal/log.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <system_error>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/write_batch.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "journal/format.hpp"

namespace ic::journal {

namespace fs = std::filesystem;

namespace {

/// Maps a RocksDB status to ours; `context` says what we were doing.
status from_rocks(const rocksdb::Status& s, const std::string& context) {
  if (s.ok()) return {};
  std::string msg = context + ": " + s.ToString();
  if (s.IsNoSpace() || s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain() ||
      s.IsAborted() || s.IsShutdownInProgress() || s.IsIncomplete() ||
      s.IsMemoryLimit() || s.subcode() == rocksdb::Status::kSpaceLimit) {
    return {errc::unavailable, std::move(msg)};
  }
  if (s.IsCorruption()) return {errc::corruption, std::move(msg)};
  if (s.IsInvalidArgument()) return {errc::invalid_argument, std::move(msg)};
  if (s.IsNotFound()) return {errc::not_found, std::move(msg)};
  if (s.IsNotSupported()) return {errc::incompatible, std::move(msg)};
  return {errc::internal, std::move(msg)};
}

rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }
std::string_view view(const rocksdb::Slice& s) { return {s.data(), s.size()}; }

/// Turns off RocksDB's own recovery from background errors (for NoSpace it polls free space
/// every 5 s through the SstFileManager, and meanwhile DB::Resume() answers Busy): the
/// journal resumes by itself on the next append(), so writing comes back at once when space
/// does, and deterministically in tests.
class manual_recovery : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "ic_journal_manual_recovery"; }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }
};

/// One caller of append() waiting in the group-commit queue.
struct writer {
  const record_in* records = nullptr;
  std::size_t count = 0;
  std::size_t bytes = 0;
  bool done = false;
  std::uint64_t first_seq = 0;
  status result;
  std::condition_variable cv;
};

}  // namespace

// ---------------------------------------------------------------------------------------

struct log::impl {
  std::string dir;
  options opts;
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> cf_descriptors;
  // Shared by every operation that uses `db`; exclusive to close or reopen it.
  mutable std::shared_mutex db_mu;
  bool closed = false;  // close() was called (under db_mu)
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // default, meta, records, snapshots
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  rocksdb::ColumnFamilyHandle* records = nullptr;
  rocksdb::ColumnFamilyHandle* snapshots = nullptr;
  rocksdb::WriteOptions append_wo;
  open_info info;

  std::atomic<std::uint64_t> last_seq{0};
  std::atomic<std::uint64_t> truncated{0};

  // Group commit: the writer at the front of `queue` is the leader; only a leader changes
  // next_seq, and only one leader runs at a time.
  std::mutex mu;
  std::deque<writer*> queue;
  std::vector<writer*> group;  // the leader's current group (leader-only)
  std::uint64_t next_seq = 1;
  // Set when a write returned `unavailable`; the next write resumes (or reopens) first.
  std::atomic<bool> write_failed{false};

  std::atomic<std::uint64_t> n_appends{0}, n_records{0}, n_groups{0}, n_failed{0};

  // Snapshot ids, deletion, truncation.
  std::mutex admin_mu;
  std::uint64_t next_snapshot_id = 1;  // under admin_mu
  std::set<std::uint64_t> writing;     // snapshots being written, under admin_mu

  ~impl() { close_db(); }

  void close_db() {
    if (db == nullptr) return;
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    handles.clear();
    db->Close();
    delete db;
    db = nullptr;
  }

  std::string where() const { return "journal " + dir; }

  /// Names the SST file holding `key` of `cf`, or the WAL when no SST covers it.
  std::string locate(const char* cf, std::string_view key) const {
    std::vector<rocksdb::LiveFileMetaData> files;
    db->GetLiveFilesMetaData(&files);
    for (const auto& f : files) {
      if (f.column_family_name != cf) continue;
      if (std::string_view(f.smallestkey) <= key && key <= std::string_view(f.largestkey)) {
        return f.db_path + f.name;
      }
    }
    return dir + "/*.log (WAL, not yet flushed to an SST)";
  }

  status record_corruption(std::uint64_t seq, std::string_view key, const std::string& why) const {
    return {errc::corruption, where() + ": record seq " + std::to_string(seq) + " (CF " +
                                  format::records_cf + ", key " + format::hex(key) + ", in " +
                                  locate(format::records_cf, key) + "): " + why};
  }

  /// Returns ok when `db` may be used (caller holds db_mu).
  status usable() const {
    if (closed) return {errc::invalid_argument, where() + " is closed"};
    if (db == nullptr) return {errc::unavailable, where() + ": reopening after a write error"};
    return {};
  }

  /// Opens RocksDB with the stored options (caller holds db_mu exclusively or owns impl).
  status open_db() {
    auto s = rocksdb::DB::Open(db_options, dir, cf_descriptors, &handles, &db);
    if (!s.ok()) {
      db = nullptr;
      handles.clear();
      return from_rocks(s, where() + ": opening RocksDB");
    }
    meta = handles[1];
    records = handles[2];
    snapshots = handles[3];
    return {};
  }

  /// Writes `wb` (caller holds db_mu shared and called ensure_writable()).
  status write(const rocksdb::WriteOptions& wo, rocksdb::WriteBatch* wb, const char* what) {
    auto s = from_rocks(db->Write(wo, wb), where() + ": " + what);
    if (s.code() == errc::unavailable) write_failed.store(true, std::memory_order_release);
    return s;
  }

  /// Runs `f` with db_mu held shared once `db` is usable.
  template <class F>
  status with_db(F&& f) const {
    std::shared_lock<std::shared_mutex> lk(db_mu);
    if (auto s = usable(); !s.ok()) return s;
    return f();
  }

  /// Like with_db(), after leaving a previous write error behind (ensure_writable()).
  template <class F>
  status with_writable_db(F&& f) {
    if (auto s = ensure_writable(); !s.ok()) return s;
    return with_db(std::forward<F>(f));
  }

  /// Leaves RocksDB's background-error mode after a failed write; a no-op otherwise.
  /// Probes first: a Resume() that cannot create its new WAL escalates the error to fatal
  /// (RocksDB 7.8 SwitchMemtable, reason kMemTable). Resume() flushes the memtables and
  /// starts a new WAL, so the failed WAL writer is never used again. Errors RocksDB will not
  /// resume from (a WAL I/O error is fatal in 7.8) are left by reopening the database.
  status ensure_writable() {
    if (!write_failed.load(std::memory_order_acquire)) return {};
    if (auto s = probe(); !s.ok()) return s;
    {
      std::shared_lock<std::shared_mutex> lk(db_mu);
      if (closed) return usable();
      if (db != nullptr) {
        auto rs = db->Resume();
        if (rs.ok()) {
          write_failed.store(false, std::memory_order_release);
          return {};
        }
        if (rs.IsBusy()) return from_rocks(rs, where() + ": resuming after a write error");
      }
    }
    std::unique_lock<std::shared_mutex> lk(db_mu);
    if (!write_failed.load(std::memory_order_acquire)) return {};
    if (closed) return usable();
    return reopen();
  }

  /// Closes and reopens RocksDB (db_mu held exclusively), then rolls back records beyond
  /// the last acknowledged sequence: a failed write whose bytes reached the WAL before the
  /// error was reported failed to its caller, so it must not reappear.
  status reopen() {
    close_db();
    if (auto s = open_db(); !s.ok()) return s;
    const std::uint64_t acked = last_seq.load(std::memory_order_acquire);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), records));
    it->SeekToLast();
    std::uint64_t on_disk = 0;
    if (it->Valid()) format::parse_record_key(view(it->key()), &on_disk);
    it.reset();
    if (on_disk > acked) {
      rocksdb::WriteBatch wb;
      wb.DeleteRange(records, format::record_key(acked + 1), format::record_key(on_disk + 1));
      rocksdb::WriteOptions wo;
      wo.sync = true;
      if (auto s = from_rocks(db->Write(wo, &wb), where() + ": rolling back failed appends");
          !s.ok()) {
        return s;
      }
    }
    write_failed.store(false, std::memory_order_release);
    return {};
  }

  /// Creates, writes (64 KiB), syncs and deletes a file next to the database.
  status probe() {
    rocksdb::Env* env = opts.env != nullptr ? opts.env : rocksdb::Env::Default();
    const std::string path = dir + "/RESUME_PROBE";
    std::unique_ptr<rocksdb::WritableFile> f;
    auto s = env->NewWritableFile(path, &f, rocksdb::EnvOptions());
    if (s.ok()) {
      const std::string block(64 << 10, '\0');
      s = f->Append(block);
      if (s.ok()) s = f->Sync();
      auto c = f->Close();
      if (s.ok()) s = c;
    }
    (void)env->DeleteFile(path);
    return from_rocks(s, where() + ": still cannot write (resume probe)");
  }

  // ---- group commit ----

  result<std::uint64_t> append(const record_in* recs, std::size_t n) {
    if (n == 0) return status{errc::invalid_argument, "append of an empty batch"};
    writer w;
    w.records = recs;
    w.count = n;
    for (std::size_t i = 0; i < n; ++i) w.bytes += recs[i].payload.size() + format::record_header_size + 8;

    std::unique_lock<std::mutex> lk(mu);
    queue.push_back(&w);
    while (!w.done && &w != queue.front()) w.cv.wait(lk);
    if (!w.done) lead(lk);
    if (!w.result.ok()) return w.result;
    return w.first_seq;
  }

  /// Writes the group that starts at the queue's front (the caller) as one WriteBatch.
  void lead(std::unique_lock<std::mutex>& lk) {
    group.clear();
    std::size_t bytes = 0;
    for (writer* w : queue) {
      if (!group.empty() && bytes + w->bytes > opts.max_group_bytes) break;
      bytes += w->bytes;
      group.push_back(w);
    }
    const std::uint64_t first = next_seq;
    lk.unlock();

    std::uint64_t seq = first;
    const status st = with_writable_db([&]() -> status {
      rocksdb::WriteBatch wb(bytes + 64);
      std::string key, header;
      for (writer* w : group) {
        w->first_seq = seq;
        for (std::size_t i = 0; i < w->count; ++i, ++seq) {
          const record_in& r = w->records[i];
          key = format::record_key(seq);
          header.clear();  // version, type, checksum; the payload is not copied
          header.push_back(static_cast<char>(format::value_version));
          format::put_be32(&header, r.type);
          format::put_be64(&header, format::record_checksum(seq, format::value_version, r.type,
                                                            r.payload));
          rocksdb::Slice value_parts[2] = {slice(header), slice(r.payload)};
          rocksdb::Slice key_part = slice(key);
          auto ws = wb.Put(records, rocksdb::SliceParts(&key_part, 1),
                           rocksdb::SliceParts(value_parts, 2));
          if (!ws.ok()) return from_rocks(ws, where() + ": building a write batch");
        }
      }
      return write(append_wo, &wb, "appending records");
    });

    lk.lock();
    if (st.ok()) {
      next_seq = seq;
      last_seq.store(seq - 1, std::memory_order_release);
      n_groups.fetch_add(1, std::memory_order_relaxed);
      n_appends.fetch_add(group.size(), std::memory_order_relaxed);
      n_records.fetch_add(seq - first, std::memory_order_relaxed);
    } else {
      n_failed.fetch_add(group.size(), std::memory_order_relaxed);
    }
    for (writer* w : group) {
      queue.pop_front();  // the group is the queue's prefix, in order
      w->result = st;
      w->done = true;
      if (w != group.front()) w->cv.notify_one();
    }
    if (!queue.empty()) queue.front()->cv.notify_one();
  }

  // ---- reading ----

  /// Reads records (caller holds db_mu shared).
  status read(std::uint64_t from, const std::function<bool(const record_view&)>& visit) const {
    if (from == 0) from = 1;
    const std::uint64_t t = truncated.load(std::memory_order_acquire);
    if (from <= t) {
      return {errc::out_of_range, where() + ": cannot read from seq " + std::to_string(from) +
                                      ": records 1.." + std::to_string(t) +
                                      " were truncated (covered by a snapshot)"};
    }
    rocksdb::ReadOptions ro;
    ro.verify_checksums = true;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, records));
    std::uint64_t expected = from;
    for (it->Seek(format::record_key(from)); it->Valid(); it->Next()) {
      const std::string_view key = view(it->key());
      std::uint64_t seq = 0;
      if (!format::parse_record_key(key, &seq)) {
        return {errc::corruption, where() + ": CF records holds a malformed key " +
                                      format::hex(key) + " (in " +
                                      locate(format::records_cf, key) + ")"};
      }
      if (seq != expected) {
        return record_corruption(seq, key, "sequence gap: expected seq " +
                                               std::to_string(expected) + " before it");
      }
      format::record_fields f;
      if (auto s = format::decode_record(seq, view(it->value()), &f); !s.ok()) {
        if (s.code() == errc::incompatible) {
          return {errc::incompatible, where() + ": record seq " + std::to_string(seq) + ": " +
                                          s.message()};
        }
        return record_corruption(seq, key, s.message());
      }
      ++expected;
      if (!visit(record_view{seq, f.type, f.payload})) return {};
    }
    return from_rocks(it->status(), where() + ": reading records");
  }

  // ---- snapshots ----

  /// Reads the header and footer of every snapshot (caller holds db_mu shared).
  result<std::vector<snapshot_info>> list_snapshots() const {
    std::vector<snapshot_info> out;
    rocksdb::ReadOptions ro;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, snapshots));
    it->SeekToFirst();
    while (it->Valid()) {
      format::snapshot_key k;
      if (!format::parse_snapshot_key(view(it->key()), &k)) {
        return status{errc::corruption, where() + ": CF snapshots holds a malformed key " +
                                            format::hex(view(it->key()))};
      }
      snapshot_info info;
      info.id = k.id;
      if (k.tag != format::snapshot_header_tag) {
        info.problem = "header missing";
      } else if (auto s = format::decode_snapshot_header(k.id, view(it->value()),
                                                         &info.covering_seq);
                 !s.ok()) {
        info.problem = s.message();
      }
      std::string value;
      auto gs = db->Get(ro, snapshots, format::snapshot_footer_key(k.id), &value);
      if (gs.ok()) {
        format::snapshot_footer f;
        if (auto s = format::decode_snapshot_footer(k.id, value, &f); !s.ok()) {
          if (info.problem.empty()) info.problem = s.message();
        } else if (info.problem.empty()) {
          info.complete = true;
          info.chunk_count = f.chunk_count;
          info.total_bytes = f.total_bytes;
        }
      } else if (!gs.IsNotFound()) {
        return from_rocks(gs, where() + ": reading snapshot " + std::to_string(k.id));
      }
      out.push_back(std::move(info));
      it->Seek(format::snapshot_prefix(k.id + 1));
    }
    if (auto s = from_rocks(it->status(), where() + ": listing snapshots"); !s.ok()) return s;
    return out;
  }

  status snapshot_corruption(std::uint64_t id, std::uint64_t chunk, std::uint64_t offset,
                             std::string_view key, const std::string& why) const {
    return {errc::corruption,
            where() + ": snapshot " + std::to_string(id) + " chunk " + std::to_string(chunk) +
                " at byte offset " + std::to_string(offset) + " (CF snapshots, key " +
                format::hex(key) + ", in " + locate(format::snapshots_cf, key) + "): " + why};
  }

  status read_snapshot(std::uint64_t id,
                       const std::function<status(std::string_view)>& on_chunk) const {
    const std::string name = where() + ": snapshot " + std::to_string(id);
    rocksdb::ReadOptions ro;
    ro.verify_checksums = true;
    ro.fill_cache = false;
    std::string value;
    const std::string hkey = format::snapshot_header_key(id);
    auto gs = db->Get(ro, snapshots, hkey, &value);
    if (gs.IsNotFound()) return {errc::not_found, name + " does not exist"};
    if (!gs.ok()) return from_rocks(gs, name);
    std::uint64_t covering = 0;
    if (auto s = format::decode_snapshot_header(id, value, &covering); !s.ok()) {
      return {s.code(), name + " header (key " + format::hex(hkey) + ", in " +
                            locate(format::snapshots_cf, hkey) + "): " + s.message()};
    }
    const std::string fkey = format::snapshot_footer_key(id);
    gs = db->Get(ro, snapshots, fkey, &value);
    if (gs.IsNotFound()) return {errc::invalid_argument, name + " is incomplete (no footer)"};
    if (!gs.ok()) return from_rocks(gs, name);
    format::snapshot_footer footer;
    if (auto s = format::decode_snapshot_footer(id, value, &footer); !s.ok()) {
      return {s.code(), name + " footer (key " + format::hex(fkey) + ", in " +
                            locate(format::snapshots_cf, fkey) + "): " + s.message()};
    }

    const std::string upper = fkey;
    rocksdb::Slice upper_slice(upper);  // must outlive the iterator
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, snapshots));
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> xxh(XXH3_createState(),
                                                                 &XXH3_freeState);
    XXH3_64bits_reset(xxh.get());
    std::uint64_t index = 0, offset = 0;
    for (it->Seek(format::snapshot_chunk_key(id, 0)); it->Valid(); it->Next()) {
      const std::string_view key = view(it->key());
      format::snapshot_key k;
      if (!format::parse_snapshot_key(key, &k) || k.id != id ||
          k.tag != format::snapshot_chunk_tag) {
        return snapshot_corruption(id, index, offset, key, "unexpected key among the chunks");
      }
      if (k.chunk != index) {
        return snapshot_corruption(id, index, offset, key,
                                   "chunk " + std::to_string(index) + " is missing (next is " +
                                       std::to_string(k.chunk) + ")");
      }
      std::string_view payload;
      if (auto s = format::decode_snapshot_chunk(id, index, view(it->value()), &payload);
          !s.ok()) {
        return snapshot_corruption(id, index, offset, key, s.message());
      }
      XXH3_64bits_update(xxh.get(), payload.data(), payload.size());
      if (auto s = on_chunk(payload); !s.ok()) return s;
      ++index;
      offset += payload.size();
    }
    if (auto s = from_rocks(it->status(), name + ": reading chunks"); !s.ok()) return s;
    if (index != footer.chunk_count || offset != footer.total_bytes) {
      return {errc::corruption, name + ": footer promises " + std::to_string(footer.chunk_count) +
                                    " chunks / " + std::to_string(footer.total_bytes) +
                                    " bytes, found " + std::to_string(index) + " / " +
                                    std::to_string(offset) + " (truncated at byte offset " +
                                    std::to_string(offset) + ")"};
    }
    const std::uint64_t digest = XXH3_64bits_digest(xxh.get());
    if (digest != footer.content_checksum) {
      return {errc::corruption, name + ": content checksum mismatch over all " +
                                    std::to_string(index) + " chunks"};
    }
    return {};
  }

  status delete_range(rocksdb::ColumnFamilyHandle* cf, const std::string& begin,
                      const std::string& end, const char* what) {
    rocksdb::WriteBatch wb;
    auto s = wb.DeleteRange(cf, begin, end);
    if (!s.ok()) return from_rocks(s, where() + ": " + what);
    if (auto st = write(append_wo, &wb, what); !st.ok()) return st;
    compact(cf, begin, end);
    return {};
  }

  void compact(rocksdb::ColumnFamilyHandle* cf, const std::string& begin,
               const std::string& end) {
    if (!opts.compact_after_delete) return;
    rocksdb::CompactRangeOptions co;
    co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
    rocksdb::Slice b(begin), e(end);
    // Best effort: a failed compaction leaves the space for RocksDB's own compactions.
    (void)db->CompactRange(co, cf, &b, &e);
  }
};

// ---------------------------------------------------------------------------------------
// open

namespace {

bool has_file(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

bool dir_is_empty(const fs::path& p) {
  std::error_code ec;
  return fs::is_empty(p, ec);
}

}  // namespace

result<std::unique_ptr<log>> log::open(const std::string& dir, const options& opts) {
  const std::string where = "journal " + dir;
  std::error_code ec;
  const bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec)) {
    return status{errc::incompatible, where + ": not a journal: the path is not a directory"};
  }
  const bool fresh = !exists || dir_is_empty(dir);
  if (fresh && !opts.create_if_missing) {
    return status{errc::not_found, where + ": no journal there (create_if_missing is off)"};
  }
  if (!fresh && !has_file(fs::path(dir) / "CURRENT")) {
    return status{errc::incompatible,
                  where + ": not a journal: the directory is not empty and holds no RocksDB "
                          "database (no CURRENT file)"};
  }

  if (!exists) {
    fs::create_directories(dir, ec);
    if (ec) return status{errc::unavailable, where + ": creating the directory: " + ec.message()};
  }

  rocksdb::DBOptions dbo;
  dbo.create_if_missing = true;
  dbo.create_missing_column_families = true;
  dbo.max_background_jobs = opts.background_jobs;
  dbo.bytes_per_sync = 1 << 20;
  dbo.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  dbo.paranoid_checks = true;
  // With three CFs a WAL file stays alive until every CF flushed past it; this bounds the
  // WAL by forcing flushes of rarely written CFs (meta).
  dbo.max_total_wal_size = 4 * static_cast<std::uint64_t>(opts.write_buffer_bytes);
  dbo.keep_log_file_num = 4;
  dbo.max_log_file_size = 8 << 20;
  if (opts.env != nullptr) dbo.env = opts.env;
  dbo.listeners.push_back(std::make_shared<manual_recovery>());

  if (!fresh) {
    std::vector<std::string> names;
    auto s = rocksdb::DB::ListColumnFamilies(dbo, dir, &names);
    if (!s.ok()) return from_rocks(s, where + ": listing column families");
    const std::set<std::string> ours = {rocksdb::kDefaultColumnFamilyName, format::meta_cf,
                                        format::records_cf, format::snapshots_cf};
    for (const auto& n : names) {
      if (ours.count(n) == 0) {
        return status{errc::incompatible, where + ": not a journal: RocksDB database with "
                                                  "unknown column family '" + n + "'"};
      }
    }
  }

  rocksdb::ColumnFamilyOptions cfo;
  cfo.write_buffer_size = opts.write_buffer_bytes;
  rocksdb::ColumnFamilyOptions meta_cfo;
  meta_cfo.write_buffer_size = 1 << 20;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, meta_cfo},
      {format::meta_cf, meta_cfo},
      {format::records_cf, cfo},
      {format::snapshots_cf, cfo},
  };

  auto p = std::make_unique<impl>();
  p->dir = dir;
  p->opts = opts;
  p->append_wo.sync = opts.fsync;
  p->append_wo.disableWAL = false;  // never: the WAL is the durability promise
  p->db_options = dbo;
  p->cf_descriptors = std::move(cfs);
  if (auto s = p->open_db(); !s.ok()) return s;

  rocksdb::ReadOptions ro;
  auto cf_empty = [&](rocksdb::ColumnFamilyHandle* cf) {
    std::unique_ptr<rocksdb::Iterator> it(p->db->NewIterator(ro, cf));
    it->SeekToFirst();
    return !it->Valid() && it->status().ok();
  };

  // Marker and format version.
  std::string value;
  auto gs = p->db->Get(ro, p->meta, std::string(format::magic_key), &value);
  if (gs.IsNotFound()) {
    if (!(cf_empty(p->meta) && cf_empty(p->records) && cf_empty(p->snapshots) &&
          cf_empty(p->handles[0]))) {
      return status{errc::incompatible,
                    where + ": not a journal: RocksDB database without the journal marker "
                            "(meta key 'magic')"};
    }
    rocksdb::WriteBatch wb;
    wb.Put(p->meta, std::string(format::magic_key), std::string(format::magic_value));
    std::string v;
    format::put_be32(&v, format::current_version);
    wb.Put(p->meta, std::string(format::version_key), v);
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (auto s = p->write(wo, &wb, "initialising a new journal"); !s.ok()) return s;
    p->info.created = true;
    value = std::string(format::magic_value);
  } else if (!gs.ok()) {
    return from_rocks(gs, where + ": reading the journal marker");
  }
  if (value != format::magic_value) {
    return status{errc::incompatible, where + ": not a journal: meta key 'magic' holds '" +
                                          value + "'"};
  }
  gs = p->db->Get(ro, p->meta, std::string(format::version_key), &value);
  if (!gs.ok() || value.size() != 4) {
    return status{errc::corruption, where + ": meta key 'format_version' is missing or not 4 "
                                            "bytes"};
  }
  p->info.format_version = format::get_be32(value.data());
  if (p->info.format_version == 0 || p->info.format_version > format::current_version) {
    return status{errc::incompatible,
                  where + ": format version " + std::to_string(p->info.format_version) +
                      " is newer than this build reads (up to " +
                      std::to_string(format::current_version) + "); upgrade the server"};
  }

  auto read_u64 = [&](std::string_view key, std::uint64_t* out) -> status {
    std::string v;
    auto s = p->db->Get(ro, p->meta, std::string(key), &v);
    if (s.IsNotFound()) return {};
    if (!s.ok()) return from_rocks(s, where + ": reading meta key " + std::string(key));
    if (v.size() != 8) {
      return {errc::corruption, where + ": meta key '" + std::string(key) + "' is not 8 bytes"};
    }
    *out = format::get_be64(v.data());
    return {};
  };
  std::uint64_t truncated = 0;
  if (auto s = read_u64(format::truncated_through_key, &truncated); !s.ok()) return s;
  if (auto s = read_u64(format::next_snapshot_id_key, &p->next_snapshot_id); !s.ok()) return s;
  if (p->next_snapshot_id == 0) p->next_snapshot_id = 1;
  p->truncated.store(truncated);

  // The last record: a bad one is a torn tail (dropped); a bad one before it is corruption.
  std::uint64_t last = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<rocksdb::Iterator> it(p->db->NewIterator(ro, p->records));
    it->SeekToLast();
    if (!it->Valid()) {
      if (auto s = from_rocks(it->status(), where + ": reading the last record"); !s.ok())
        return s;
      break;
    }
    const std::string key(view(it->key()));
    std::uint64_t seq = 0;
    if (!format::parse_record_key(key, &seq)) {
      return status{errc::corruption, where + ": CF records holds a malformed key " +
                                          format::hex(key)};
    }
    format::record_fields f;
    auto ds = format::decode_record(seq, view(it->value()), &f);
    if (ds.ok()) {
      last = seq;
      break;
    }
    if (ds.code() != errc::corruption) {
      return status{ds.code(), where + ": record seq " + std::to_string(seq) + ": " +
                                   ds.message()};
    }
    if (attempt == 1) {
      return p->record_corruption(seq, key, ds.message() + " (and the record after it was a "
                                                           "torn tail; refusing)");
    }
    p->info.dropped_torn_tail = seq;
    p->info.torn_tail_reason = ds.message();
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (auto s = from_rocks(p->db->Delete(wo, p->records, key),
                            where + ": dropping the torn tail record");
        !s.ok()) {
      return s;
    }
  }
  last = std::max(last, truncated);
  p->last_seq.store(last);
  p->next_seq = last + 1;
  p->info.last_sequence = last;
  p->info.truncated_through = truncated;

  // Snapshot ids are never reused, even when the meta counter lags behind a crash.
  {
    std::unique_ptr<rocksdb::Iterator> it(p->db->NewIterator(ro, p->snapshots));
    it->SeekToLast();
    format::snapshot_key k;
    if (it->Valid() && format::parse_snapshot_key(view(it->key()), &k)) {
      p->next_snapshot_id = std::max(p->next_snapshot_id, k.id + 1);
    }
  }

  std::unique_ptr<log> out(new log(std::move(p)));
  if (opts.verify_on_open) {
    if (auto s = out->verify(); !s.ok()) return s;
  }
  return out;
}

log::log(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

log::~log() { (void)close(); }

status log::close() {
  auto& p = *impl_;
  std::unique_lock<std::shared_mutex> lk(p.db_mu);
  if (p.closed) return {errc::invalid_argument, p.where() + " is closed"};
  status st;
  // Syncing a WAL writer that failed trips an assertion in Debian's librocksdb: after a
  // write error, close without the sync (the failed write was not acknowledged anyway).
  if (p.db != nullptr && !p.write_failed.load(std::memory_order_acquire)) {
    st = from_rocks(p.db->SyncWAL(), p.where() + ": syncing the WAL on close");
  }
  p.close_db();
  p.closed = true;
  return st;
}

const open_info& log::info() const { return impl_->info; }
const std::string& log::dir() const { return impl_->dir; }

result<std::uint64_t> log::append(const std::vector<record_in>& records) {
  return impl_->append(records.data(), records.size());
}

result<std::uint64_t> log::append(const record_in* records, std::size_t n) {
  return impl_->append(records, n);
}

result<std::uint64_t> log::append(std::uint32_t type, std::string_view payload) {
  const record_in r{type, payload};
  return impl_->append(&r, 1);
}

std::uint64_t log::last_sequence() const {
  return impl_->last_seq.load(std::memory_order_acquire);
}

std::uint64_t log::truncated_through() const {
  return impl_->truncated.load(std::memory_order_acquire);
}

status log::read(std::uint64_t from_seq,
                 const std::function<bool(const record_view&)>& visit) const {
  return impl_->with_db([&] { return impl_->read(from_seq, visit); });
}

result<std::vector<record>> log::read_range(std::uint64_t from_seq,
                                            std::size_t max_records) const {
  std::vector<record> out;
  if (max_records == 0) return out;
  auto s = read(from_seq, [&](const record_view& r) {
    out.push_back(record{r.seq, r.type, std::string(r.payload)});
    return out.size() < max_records;
  });
  if (!s.ok()) return s;
  return out;
}

status log::verify() const {
  return read(truncated_through() + 1, [](const record_view&) { return true; });
}

status log::sync() {
  return impl_->with_writable_db(
      [&] { return from_rocks(impl_->db->SyncWAL(), impl_->where() + ": syncing the WAL"); });
}

status log::resume() {
  return impl_->with_writable_db([] { return status{}; });
}

append_stats log::stats() const {
  append_stats s;
  s.appends = impl_->n_appends.load(std::memory_order_relaxed);
  s.records = impl_->n_records.load(std::memory_order_relaxed);
  s.groups = impl_->n_groups.load(std::memory_order_relaxed);
  s.failed = impl_->n_failed.load(std::memory_order_relaxed);
  return s;
}

std::uint64_t log::sst_bytes() const {
  std::uint64_t total = 0;
  (void)impl_->with_db([&] {
    for (auto* h : impl_->handles) {
      std::uint64_t v = 0;
      if (impl_->db->GetIntProperty(h, "rocksdb.live-sst-files-size", &v)) total += v;
    }
    return status{};
  });
  return total;
}

// ---------------------------------------------------------------------------------------
// snapshots

struct snapshot_writer::state {
  log::impl* owner = nullptr;
  std::uint64_t id = 0;
  std::uint64_t covering_seq = 0;
  std::uint64_t chunks = 0;
  std::uint64_t bytes = 0;
  bool spent = false;
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> xxh{XXH3_createState(),
                                                              &XXH3_freeState};
  std::string value;

  void forget() {
    std::lock_guard<std::mutex> lk(owner->admin_mu);
    owner->writing.erase(id);
  }
};

snapshot_writer::snapshot_writer(std::unique_ptr<state> s) : state_(std::move(s)) {}
snapshot_writer::snapshot_writer(snapshot_writer&&) noexcept = default;
snapshot_writer& snapshot_writer::operator=(snapshot_writer&& other) noexcept {
  if (this != &other) {
    if (state_ && !state_->spent) (void)abandon();
    state_ = std::move(other.state_);
  }
  return *this;
}

snapshot_writer::~snapshot_writer() {
  if (state_ && !state_->spent) (void)abandon();
}

std::uint64_t snapshot_writer::id() const { return state_ ? state_->id : 0; }
std::uint64_t snapshot_writer::covering_seq() const { return state_ ? state_->covering_seq : 0; }

status snapshot_writer::add_chunk(std::string_view payload) {
  if (!state_ || state_->spent) return {errc::invalid_argument, "snapshot writer is spent"};
  auto& st = *state_;
  st.value.clear();
  format::encode_snapshot_chunk(st.id, st.chunks, payload, &st.value);
  auto s = st.owner->with_writable_db([&] {
    rocksdb::WriteBatch wb;
    wb.Put(st.owner->snapshots, format::snapshot_chunk_key(st.id, st.chunks), st.value);
    return st.owner->write(rocksdb::WriteOptions(), &wb, "writing a snapshot chunk");
  });
  if (!s.ok()) return s;
  XXH3_64bits_update(st.xxh.get(), payload.data(), payload.size());
  ++st.chunks;
  st.bytes += payload.size();
  return {};
}

result<snapshot_info> snapshot_writer::finish() {
  if (!state_ || state_->spent) return status{errc::invalid_argument, "snapshot writer is spent"};
  auto& st = *state_;
  format::snapshot_footer f;
  f.chunk_count = st.chunks;
  f.total_bytes = st.bytes;
  f.content_checksum = XXH3_64bits_digest(st.xxh.get());
  auto s = st.owner->with_writable_db([&] {
    rocksdb::WriteBatch wb;
    wb.Put(st.owner->snapshots, format::snapshot_footer_key(st.id),
           format::encode_snapshot_footer(st.id, f));
    rocksdb::WriteOptions wo;
    wo.sync = true;  // the snapshot must be durable before the journal behind it is truncated
    return st.owner->write(wo, &wb, "finishing a snapshot");
  });
  if (!s.ok()) return s;
  st.spent = true;
  st.forget();
  snapshot_info info;
  info.id = st.id;
  info.covering_seq = st.covering_seq;
  info.complete = true;
  info.chunk_count = st.chunks;
  info.total_bytes = st.bytes;
  return info;
}

status snapshot_writer::abandon() {
  if (!state_ || state_->spent) return {errc::invalid_argument, "snapshot writer is spent"};
  auto& st = *state_;
  st.spent = true;
  st.forget();
  return st.owner->with_writable_db([&] {
    return st.owner->delete_range(st.owner->snapshots, format::snapshot_prefix(st.id),
                                  format::snapshot_prefix(st.id + 1), "abandoning a snapshot");
  });
}

result<snapshot_writer> log::begin_snapshot(std::uint64_t covering_seq) {
  auto& p = *impl_;
  if (covering_seq > last_sequence()) {
    return status{errc::invalid_argument,
                  p.where() + ": snapshot covering seq " + std::to_string(covering_seq) +
                      " is beyond the last sequence " + std::to_string(last_sequence())};
  }
  std::lock_guard<std::mutex> lk(p.admin_mu);
  const std::uint64_t id = p.next_snapshot_id;
  auto s = p.with_writable_db([&] {
    rocksdb::WriteBatch wb;
    wb.Put(p.snapshots, format::snapshot_header_key(id),
           format::encode_snapshot_header(id, covering_seq));
    wb.Put(p.meta, std::string(format::next_snapshot_id_key), format::be64(id + 1));
    return p.write(rocksdb::WriteOptions(), &wb, "starting a snapshot");
  });
  if (!s.ok()) return s;
  p.next_snapshot_id = id + 1;
  p.writing.insert(id);
  auto st = std::make_unique<snapshot_writer::state>();
  st->owner = &p;
  st->id = id;
  st->covering_seq = covering_seq;
  XXH3_64bits_reset(st->xxh.get());
  return snapshot_writer(std::move(st));
}

result<std::vector<snapshot_info>> log::list_snapshots() const {
  result<std::vector<snapshot_info>> out = std::vector<snapshot_info>{};
  auto s = impl_->with_db([&] {
    out = impl_->list_snapshots();
    return out.ok() ? status{} : out.status();
  });
  if (!s.ok()) return s;
  return out;
}

status log::read_snapshot(std::uint64_t id,
                          const std::function<status(std::string_view)>& on_chunk) const {
  return impl_->with_db([&] { return impl_->read_snapshot(id, on_chunk); });
}

status log::verify_snapshot(std::uint64_t id) const {
  return read_snapshot(id, [](std::string_view) { return status{}; });
}

namespace {

/// Orders complete snapshots newest first: higher covering seq, then higher id.
bool newer(const snapshot_info& a, const snapshot_info& b) {
  if (a.covering_seq != b.covering_seq) return a.covering_seq > b.covering_seq;
  return a.id > b.id;
}

}  // namespace

result<snapshot_info> log::read_newest_snapshot(
    const std::function<void(const snapshot_info&)>& on_begin,
    const std::function<status(std::string_view)>& on_chunk,
    std::vector<status>* skipped) const {
  auto listed = list_snapshots();
  if (!listed.ok()) return listed.status();
  std::vector<snapshot_info> candidates;
  for (auto& s : *listed) {
    if (s.complete) candidates.push_back(s);
  }
  std::sort(candidates.begin(), candidates.end(), newer);
  const std::uint64_t t = truncated_through();
  for (const auto& c : candidates) {
    if (c.covering_seq < t) {
      if (skipped) {
        skipped->push_back({errc::out_of_range,
                            impl_->where() + ": snapshot " + std::to_string(c.id) +
                                " covers seq " + std::to_string(c.covering_seq) +
                                ", older than the truncation at " + std::to_string(t)});
      }
      continue;
    }
    on_begin(c);
    auto s = read_snapshot(c.id, on_chunk);
    if (s.ok()) return c;
    if (s.code() != errc::corruption) return s;
    if (skipped) skipped->push_back(std::move(s));
  }
  return status{errc::not_found, impl_->where() + ": no usable complete snapshot"};
}

status log::delete_snapshot(std::uint64_t id) {
  auto& p = *impl_;
  std::lock_guard<std::mutex> lk(p.admin_mu);
  if (p.writing.count(id) != 0) {
    return {errc::invalid_argument, p.where() + ": snapshot " + std::to_string(id) +
                                        " is being written"};
  }
  return p.with_writable_db([&]() -> status {
    auto listed = p.list_snapshots();
    if (!listed.ok()) return listed.status();
    const snapshot_info* target = nullptr;
    bool other_covers = false;
    const std::uint64_t t = truncated_through();
    for (const auto& s : *listed) {
      if (s.id == id) {
        target = &s;
      } else if (s.complete && s.covering_seq >= t) {
        other_covers = true;
      }
    }
    if (target == nullptr) {
      return {errc::not_found, p.where() + ": snapshot " + std::to_string(id) + " does not exist"};
    }
    if (t > 0 && target->complete && target->covering_seq >= t && !other_covers) {
      return {errc::invalid_argument,
              p.where() + ": snapshot " + std::to_string(id) +
                  " is the last complete snapshot covering the truncation at seq " +
                  std::to_string(t) + "; deleting it would lose records"};
    }
    return p.delete_range(p.snapshots, format::snapshot_prefix(id),
                          format::snapshot_prefix(id + 1), "deleting a snapshot");
  });
}

result<std::size_t> log::prune_snapshots(std::size_t keep) {
  auto& p = *impl_;
  if (keep == 0) return status{errc::invalid_argument, "prune_snapshots: keep must be >= 1"};
  std::lock_guard<std::mutex> lk(p.admin_mu);
  std::size_t deleted = 0;
  auto st = p.with_writable_db([&]() -> status {
    auto listed = p.list_snapshots();
    if (!listed.ok()) return listed.status();
    std::vector<snapshot_info> complete;
    for (const auto& s : *listed) {
      if (s.complete) complete.push_back(s);
    }
    std::sort(complete.begin(), complete.end(), newer);
    std::set<std::uint64_t> kept;
    for (std::size_t i = 0; i < complete.size() && i < keep; ++i) kept.insert(complete[i].id);
    for (const auto& s : *listed) {
      if (kept.count(s.id) != 0 || p.writing.count(s.id) != 0) continue;
      rocksdb::WriteBatch wb;
      wb.DeleteRange(p.snapshots, format::snapshot_prefix(s.id),
                     format::snapshot_prefix(s.id + 1));
      if (auto ws = p.write(p.append_wo, &wb, "pruning snapshots"); !ws.ok()) return ws;
      ++deleted;
    }
    if (deleted > 0) {
      p.compact(p.snapshots, format::snapshot_prefix(listed->front().id),
                format::snapshot_prefix(listed->back().id + 1));
    }
    return {};
  });
  if (!st.ok()) return st;
  return deleted;
}

status log::truncate_through(std::uint64_t seq) {
  auto& p = *impl_;
  std::lock_guard<std::mutex> lk(p.admin_mu);
  if (seq <= truncated_through()) return {};
  if (seq > last_sequence()) {
    return {errc::invalid_argument, p.where() + ": cannot truncate through seq " +
                                        std::to_string(seq) + ", beyond the last sequence " +
                                        std::to_string(last_sequence())};
  }
  return p.with_writable_db([&]() -> status {
    auto listed = p.list_snapshots();
    if (!listed.ok()) return listed.status();
    const bool covered =
        std::any_of(listed->begin(), listed->end(), [&](const snapshot_info& s) {
          return s.complete && s.covering_seq >= seq;
        });
    if (!covered) {
      return {errc::invalid_argument, p.where() + ": cannot truncate through seq " +
                                          std::to_string(seq) +
                                          ": no complete snapshot covers it"};
    }
    rocksdb::WriteBatch wb;
    const std::string begin = format::record_key(0), end = format::record_key(seq + 1);
    wb.DeleteRange(p.records, begin, end);
    wb.Put(p.meta, std::string(format::truncated_through_key), format::be64(seq));
    if (auto s = p.write(p.append_wo, &wb, "truncating records"); !s.ok()) return s;
    p.truncated.store(seq, std::memory_order_release);
    p.compact(p.records, begin, end);
    return {};
  });
}

}  // namespace ic::journal
