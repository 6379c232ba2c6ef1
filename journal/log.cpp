#include "journal/log.hpp"
#include "journal/log_impl.inc"

namespace ic::journal {

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
  dbo.info_log = std::make_shared<stderr_info_log>();  // no LOG file on the journal's disk

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
