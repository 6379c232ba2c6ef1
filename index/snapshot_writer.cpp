// The snapshot writer: the whole index as a stream of byte chunks (grammar in
// index/README.md, "Snapshot format").
#include "index/snapshot_codec.hpp"
#include "index/snapshot_format.hpp"

namespace ic::index {

using namespace snapshot_format;

/// Buffers records and hands them to the sink in chunks of exactly `chunk` bytes; keeps
/// the running checksum of everything emitted.
class snapshot_access::chunk_writer {
 public:
  chunk_writer(const sink_fn& sink, std::size_t chunk)
      : sink_(sink), chunk_(std::max<std::size_t>(chunk, 1)) {
    buf_.resize(std::min<std::size_t>(chunk_, 1 << 20) + 4096);
    XXH3_64bits_reset(&hash_);
  }
  /// Returns room for `n` bytes at the write position.
  char* reserve(std::size_t n) {
    if (len_ + n > buf_.size()) buf_.resize(std::max(buf_.size() * 2, len_ + n));
    return &buf_[len_];
  }
  /// Commits `n` reserved bytes; emits full chunks. Returns false once the sink refused.
  bool commit(std::size_t n) {
    len_ += n;
    return len_ < chunk_ || emit_full();
  }
  /// Appends the checksum of every byte so far and emits the rest.
  bool finish() {
    XXH3_64bits_update(&hash_, buf_.data(), len_);
    const std::uint64_t sum = XXH3_64bits_digest(&hash_);
    put(reserve(8), sum);
    len_ += 8;
    hashed_ = len_;
    if (!emit_full()) return false;
    if (len_ > 0 && !sink_(std::string_view(buf_.data(), len_))) return false;
    len_ = 0;
    return true;
  }

 private:
  bool emit_full() {
    std::size_t off = 0;
    while (len_ - off >= chunk_) {
      if (off + chunk_ > hashed_) {
        XXH3_64bits_update(&hash_, buf_.data() + std::max(off, hashed_),
                           off + chunk_ - std::max(off, hashed_));
      }
      if (!sink_(std::string_view(buf_.data() + off, chunk_))) return false;
      off += chunk_;
    }
    if (off > 0) {
      std::memmove(buf_.data(), buf_.data() + off, len_ - off);
      len_ -= off;
    }
    hashed_ = hashed_ > off ? hashed_ - off : 0;
    return true;
  }

  const sink_fn& sink_;
  std::size_t chunk_;
  std::string buf_;
  std::size_t len_ = 0;
  /// Bytes at the front of `buf_` already in the checksum (only the trailer's).
  std::size_t hashed_ = 0;
  XXH3_state_t hash_;
};

bool snapshot_access::write_string(chunk_writer& w, std::string_view s) {
  char* p = w.reserve(4 + s.size());
  p = put(p, static_cast<std::uint32_t>(s.size()));
  std::memcpy(p, s.data(), s.size());
  return w.commit(4 + s.size());
}

bool snapshot_access::write_tenant(chunk_writer& w, const tenant_index& t) {
  // Header.
  char* p = w.reserve(tenant_fixed_bytes + t.name_.size());
  char* const start = p;
  p = put(p, tenant_tag);
  p = put(p, static_cast<std::uint32_t>(t.name_.size()));
  std::memcpy(p, t.name_.data(), t.name_.size());
  p += t.name_.size();
  std::size_t n_stats = 0;
  for (const auto& [m, rows] : t.stats_) n_stats += rows.size();
  p = put(p, static_cast<std::uint32_t>(t.names_.size()));
  p = put(p, static_cast<std::uint32_t>(t.parts_.size()));
  p = put(p, static_cast<std::uint32_t>(t.records_.size()));
  p = put(p, static_cast<std::uint32_t>(t.free_records_.size()));
  p = put(p, static_cast<std::uint32_t>(n_stats));
  p = put(p, static_cast<std::uint64_t>(t.entries_));
  if (!w.commit(static_cast<std::size_t>(p - start))) return false;
  // Names and parts, in id order.
  for (std::uint32_t i = 0; i < t.names_.size(); ++i) {
    if (!write_string(w, t.names_.name(i))) return false;
  }
  for (const auto& part : t.parts_) {
    p = w.reserve(12);
    p = put(p, part.model);
    p = put(p, part.scheme);
    put(p, part.adapter);
    if (!w.commit(12)) return false;
  }
  // The free-slot stack, bottom first.
  for (std::uint32_t f : t.free_records_) {
    put(w.reserve(4), f);
    if (!w.commit(4)) return false;
  }
  // Live keys in slab order.
  for (std::uint32_t kidx = 0; kidx < t.records_.size(); ++kidx) {
    const key_record& k = t.records_[kidx];
    if (tenant_index::is_free(k)) continue;
    const entry_span e = tenant_index::entries_of(k);
    const std::size_t n = e.n;
    const bool long_hash = (k.part & key_long_hash) != 0;
    const std::string_view lh = long_hash ? std::string_view(t.long_hashes_[k.hash]) : "";
    const std::size_t size = 8 + (long_hash ? 4 + lh.size() : 8) + entry_bytes * n;
    p = w.reserve(size);
    p = put(p, tenant_index::part_id(k) | (long_hash ? wire_long_hash : 0u));
    p = put(p, static_cast<std::uint32_t>(n));
    if (long_hash) {
      p = put(p, static_cast<std::uint32_t>(lh.size()));
      std::memcpy(p, lh.data(), lh.size());
      p += lh.size();
    } else {
      p = put(p, __builtin_bswap64(k.hash));  // the key bytes, as received
    }
    std::memcpy(p, e.ls, 8 * n);
    std::memcpy(p + 8 * n, e.rt, 4 * n);
    std::memcpy(p + 12 * n, e.tc, 4 * n);
    std::memcpy(p + 16 * n, e.ac, 4 * n);
    if (!w.commit(size)) return false;
  }
  // Stats rows by (model id, replica id): the bytes do not depend on hash-map order.
  std::vector<std::tuple<std::uint32_t, std::uint32_t, const tenant_index::stats_row*>> rows;
  rows.reserve(n_stats);
  for (const auto& [m, by_replica] : t.stats_) {
    for (const auto& [r, row] : by_replica) rows.emplace_back(m, r, &row);
  }
  std::sort(rows.begin(), rows.end());
  for (const auto& [m, r, row] : rows) {
    p = w.reserve(stats_bytes);
    p = put(p, m);
    p = put(p, r);
    p = put(p, row->cache_memory_bytes);
    p = put(p, row->hit_rate);
    p = put(p, row->pressure);
    p = put(p, row->t2_hit_tokens);
    p = put(p, row->t2_query_tokens);
    p = put(p, row->last_seen);
    put(p, row->stats_reported);
    if (!w.commit(stats_bytes)) return false;
  }
  return true;
}

bool snapshot_access::write(const std::vector<const tenant_index*>& tenants, const sink_fn& sink,
                            std::size_t chunk_bytes) {
  chunk_writer w(sink, chunk_bytes);
  char* p = w.reserve(8);
  p = put(p, snapshot_magic);
  put(p, snapshot_format_version);
  if (!w.commit(8)) return false;
  index_facts f;
  for (const tenant_index* t : tenants) {
    if (!write_tenant(w, *t)) return false;
    f += t->facts();
  }
  p = w.reserve(end_bytes - 8);
  p = put(p, end_tag);
  p = put(p, static_cast<std::uint32_t>(tenants.size()));
  p = put(p, f.total_entries);
  p = put(p, f.reserved_entries);
  put(p, f.total_keys);
  if (!w.commit(end_bytes - 8)) return false;
  return w.finish();
}

bool write_snapshot(const std::vector<const tenant_index*>& tenants,
                    const std::function<bool(std::string_view)>& sink, std::size_t chunk_bytes) {
  return snapshot_access::write(tenants, sink, chunk_bytes);
}

bool write_snapshot(const tenant_index& idx, const std::function<bool(std::string_view)>& sink,
                    std::size_t chunk_bytes) {
  return snapshot_access::write(std::vector<const tenant_index*>{&idx}, sink, chunk_bytes);
}

}  // namespace ic::index
