// The snapshot half of ic::journal::log: snapshot_writer, begin/list/read/verify/delete/prune.
#include "journal/log.hpp"
#include "journal/log_impl.inc"

namespace ic::journal {

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
  if (!p.opts.external_positions && covering_seq > last_sequence()) {
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

}  // namespace ic::journal
