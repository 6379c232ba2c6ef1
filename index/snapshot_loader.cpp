// The snapshot loader: rebuilds an index (or, split, one index per tenant) from the chunks
// of write_snapshot, validating as it goes.
#include "index/snapshot_codec.hpp"
#include "index/snapshot_format.hpp"

namespace ic::index {

using namespace snapshot_format;

/// The loader's state machine: one stage per section of the grammar.
class snapshot_access::loader {
 public:
  /// One tenant index: the stream must hold exactly its tenant.
  explicit loader(tenant_index& target)
      : next_([&target, used = false](std::string_view name) mutable -> tenant_index* {
          if (used || name != target.name()) return nullptr;
          used = true;
          return &target;
        }) {
    assert(empty(target) && "snapshot_loader needs an empty index");
    start(empty(target));
  }
  /// Split, into tenant indexes.
  explicit loader(std::function<tenant_index*(std::string_view)> target_of)
      : next_(std::move(target_of)) {
    start(true);
  }

  bool feed(std::string_view chunk, std::string* error) {
    const char* p = chunk.data();
    std::size_t n = chunk.size();
    // Complete a record split across chunks, appending only what it needs.
    while (!pending_.empty() && stage_ != stage::failed) {
      const std::size_t take = std::min(need_ - pending_.size(), n);
      pending_.append(p, take);
      p += take;
      n -= take;
      if (pending_.size() < need_) return true;
      run_start_ = pending_.data();
      const std::size_t used = parse(pending_.data(), pending_.size());
      if (used == 0) continue;  // `need_` grew (a length field became readable)
      if (stage_ == stage::failed) break;
      assert(used == pending_.size());
      if (stage_ != stage::done) XXH3_64bits_update(&hash_, pending_.data(), used);
      offset_ += used;
      pending_.clear();
    }
    run_start_ = p;
    while (n > 0 && stage_ != stage::failed) {
      const std::size_t used = parse(p, n);
      if (stage_ == stage::failed) break;
      if (used == 0) {
        pending_.assign(p, n);
        p += n;
        n = 0;
        break;
      }
      p += used;
      n -= used;
      offset_ += used;
    }
    if (stage_ == stage::failed) {
      if (error != nullptr) *error = error_;
      return false;
    }
    if (stage_ != stage::done) {
      XXH3_64bits_update(&hash_, run_start_,
                         static_cast<std::size_t>(p - run_start_) - pending_.size());
    }
    return true;
  }

  bool finish(std::string* error) {
    if (stage_ == stage::done) {
      // The facts are final and checked: count them in the shared totals (once).
      if (!published_)
        for (tenant_index* t : targets_) t->publish_facts(index_facts{});
      published_ = true;
      return true;
    }
    if (stage_ != stage::failed) {
      error_ = "snapshot truncated at offset " + std::to_string(offset_ + pending_.size()) +
               " (inside " + stage_name() + ")";
      stage_ = stage::failed;
    }
    if (error != nullptr) *error = error_;
    return false;
  }

 private:
  static bool empty(const tenant_index& t) {
    return t.keys_ == 0 && t.records_.size() == 0 && t.stats_.empty() && t.names_.size() == 0;
  }
  void start(bool target_empty) {
    XXH3_64bits_reset(&hash_);
    if (!target_empty) {
      stage_ = stage::failed;
      error_ = "snapshot loader: the target index is not empty";
    }
  }

  enum class stage { header, record, names, parts, free_list, keys, stats, done, failed };

  std::string stage_name() const {
    switch (stage_) {
      case stage::header:
        return "the file header";
      case stage::record:
        return "a tenant or end record";
      case stage::names:
        return "the names of tenant '" + part_->name_ + "'";
      case stage::parts:
        return "the parts of tenant '" + part_->name_ + "'";
      case stage::free_list:
        return "the free slots of tenant '" + part_->name_ + "'";
      case stage::keys:
        return "the keys of tenant '" + part_->name_ + "'";
      case stage::stats:
        return "the stats rows of tenant '" + part_->name_ + "'";
      case stage::done:
      case stage::failed:
        break;
    }
    return "the end";
  }

  /// Records an error; returns 0 (what `parse` returns with it).
  std::size_t fail(const std::string& what) {
    error_ = "snapshot offset " + std::to_string(offset_) + ": " + what;
    stage_ = stage::failed;
    return 0;
  }
  /// Asks for `total` bytes of the current record; returns 0.
  std::size_t more(std::size_t total) {
    need_ = total;
    return 0;
  }

  /// Parses one record at `p` (n bytes available). Returns the bytes used, or 0 with either
  /// `need_` set to the bytes the record needs (> n) or the stage set to failed.
  std::size_t parse(const char* p, std::size_t n) {
    switch (stage_) {
      case stage::header:
        return parse_header(p, n);
      case stage::record:
        if (p[0] == tenant_tag) return parse_tenant(p, n);
        if (p[0] == end_tag) return parse_end(p, n);
        return fail("unknown record tag " + std::to_string(static_cast<unsigned char>(p[0])));
      case stage::names:
        return parse_name(p, n);
      case stage::parts:
        return parse_part(p, n);
      case stage::free_list:
        return parse_free(p, n);
      case stage::keys:
        return parse_key(p, n);
      case stage::stats:
        return parse_stats(p, n);
      case stage::done:
        return fail("unexpected bytes after the end record");
      case stage::failed:
        break;
    }
    return 0;
  }

  std::size_t parse_header(const char* p, std::size_t n) {
    if (n < 8) return more(8);
    if (get<std::uint32_t>(p) != snapshot_magic) return fail("not an index snapshot (bad magic)");
    const auto version = get<std::uint32_t>(p + 4);
    if (version != snapshot_format_version) {
      return fail("unsupported snapshot format version " + std::to_string(version) +
                  " (this build reads version " + std::to_string(snapshot_format_version) + ")");
    }
    stage_ = stage::record;
    return 8;
  }

  std::size_t parse_tenant(const char* p, std::size_t n) {
    if (n < 5) return more(5);
    const auto name_len = get<std::uint32_t>(p + 1);
    if (name_len > max_string_bytes) return fail("tenant name too long");
    const std::size_t total = tenant_fixed_bytes + name_len;
    if (n < total) return more(total);
    const std::string_view name(p + 5, name_len);
    const char* q = p + 5 + name_len;
    n_names_ = get<std::uint32_t>(q);
    n_parts_ = get<std::uint32_t>(q + 4);
    n_slab_ = get<std::uint32_t>(q + 8);
    n_free_ = get<std::uint32_t>(q + 12);
    n_stats_ = get<std::uint32_t>(q + 16);
    n_entries_ = get<std::uint64_t>(q + 20);
    if (!names_seen_.emplace(name).second)
      return fail("duplicate tenant '" + std::string(name) + "'");
    if (n_names_ > key_part_mask + 1 || n_parts_ > key_part_mask || n_free_ > n_slab_ ||
        n_slab_ > (1u << 26) - 2) {
      return fail("tenant '" + std::string(name) + "': counts out of range");
    }
    part_ = next_(name);
    if (part_ == nullptr || !empty(*part_))
      return fail("tenant '" + std::string(name) +
                  "': no index to load it into (none given, or it is not empty)");
    targets_.push_back(part_);
    ++tenants_;
    // Size the key table for the live keys up front (load factor <= 7/8, as it grows), but
    // for at most presize_keys_max of them: the counts are not checked against the bytes
    // yet, and a corrupt 40-byte header must not allocate 768 MiB per tenant (found by
    // fuzz_snapshot_load). insert_key grows the table once the keys outgrow it (one rehash
    // of at most ~115 k keys, then the declared size).
    const std::size_t live = n_slab_ - n_free_;
    const std::size_t presize = std::min(live, presize_keys_max);
    part_->table_.reset(key_table::slots_for(presize));
    part_->free_records_.reserve(std::min<std::size_t>(n_free_, presize_keys_max));
    declared_keys_ = live;
    keys_left_ = static_cast<std::uint32_t>(live);
    done_ = 0;
    stage_ = stage::names;
    skip_empty_sections();
    return total;
  }

  /// Moves past sections with nothing left to read; finishes the tenant after the last.
  void skip_empty_sections() {
    for (;;) {
      switch (stage_) {
        case stage::names:
          if (done_ < n_names_) return;
          stage_ = stage::parts;
          done_ = 0;
          start_parts();
          break;
        case stage::parts:
          if (done_ < n_parts_) return;
          part_keys_.assign(n_parts_, 0);  // sized once the parts were read, not claimed
          stage_ = stage::free_list;
          done_ = 0;
          break;
        case stage::free_list:
          if (done_ < n_free_) return;
          if (!start_keys()) return;
          stage_ = stage::keys;
          break;
        case stage::keys:
          if (keys_left_ > 0) return;
          if (!finish_keys()) return;
          stage_ = stage::stats;
          done_ = 0;
          break;
        case stage::stats:
          if (done_ < n_stats_) return;
          if (!finish_tenant()) return;
          stage_ = stage::record;
          return;
        default:
          return;
      }
    }
  }

  std::size_t parse_name(const char* p, std::size_t n) {
    if (n < 4) return more(4);
    const auto len = get<std::uint32_t>(p);
    if (len > max_string_bytes) return fail("name too long");
    if (n < 4 + std::size_t{len}) return more(4 + std::size_t{len});
    if (part_->names_.intern(std::string_view(p + 4, len)) != done_)
      return fail("duplicate name");
    ++done_;
    skip_empty_sections();
    return 4 + std::size_t{len};
  }

  void start_parts() {
    replica_stamp_.assign(n_names_, 0);  // duplicate-replica detection
    stamp_gen_ = 0;
  }

  std::size_t parse_part(const char* p, std::size_t n) {
    if (n < 12) return more(12);
    const auto m = get<std::uint32_t>(p);
    const auto s = get<std::uint32_t>(p + 4);
    const auto a = get<std::uint32_t>(p + 8);
    if (m >= n_names_ || s >= n_names_ || a >= n_names_) return fail("part names out of range");
    const name_pool& names = part_->names_;
    if (part_->part_of(names.name(m), names.name(s), names.name(a)) != done_) {
      return fail("duplicate part");
    }
    ++done_;
    skip_empty_sections();
    return 12;
  }

  std::size_t parse_free(const char* p, std::size_t n) {
    if (n < 4) return more(4);
    const auto f = get<std::uint32_t>(p);
    if (f >= n_slab_) return fail("free slot out of range");
    part_->free_records_.push_back(f);
    ++done_;
    skip_empty_sections();
    return 4;
  }

  bool start_keys() {
    free_sorted_ = part_->free_records_;
    std::sort(free_sorted_.begin(), free_sorted_.end());
    if (std::adjacent_find(free_sorted_.begin(), free_sorted_.end()) != free_sorted_.end()) {
      fail("duplicate free slot");
      return false;
    }
    free_pos_ = 0;
    // serving_by_scope is accumulated densely when small, else straight into the maps.
    const std::size_t scopes = part_->scopes_.size();
    dense_serving_ = scopes * n_names_ <= (std::size_t{1} << 22);
    serving_acc_.assign(dense_serving_ ? scopes * n_names_ : 0, 0);
    return true;
  }

  /// Appends free records up to the next live slot.
  void place_free_records() {
    while (free_pos_ < free_sorted_.size() && free_sorted_[free_pos_] == part_->records_.size()) {
      key_record rec{};
      rec.part = key_free;
      part_->records_.push_back(rec);
      ++free_pos_;
    }
  }

  std::size_t parse_key(const char* p, std::size_t n) {
    if (n < 8) return more(8);
    const auto word = get<std::uint32_t>(p);
    const auto m = get<std::uint32_t>(p + 4);
    const bool long_hash = (word & wire_long_hash) != 0;
    const std::uint32_t part = word & ~wire_long_hash;
    if (part >= n_parts_) return fail("key part out of range");
    if (m == 0 || m > n_names_) return fail("key entry count out of range");
    std::size_t head = 16;
    std::uint32_t hlen = 8;
    if (long_hash) {
      if (n < 12) return more(12);
      hlen = get<std::uint32_t>(p + 8);
      if (hlen == 8 || hlen > max_string_bytes) return fail("bad long hash length");
      head = 12 + std::size_t{hlen};
    }
    const std::size_t total = head + entry_bytes * m;
    if (n < total) return more(total);
    const std::string_view bytes(long_hash ? p + 12 : p + 8, hlen);
    const char* ls = p + head;
    const char* rt = ls + 8 * std::size_t{m};
    const char* tc = rt + 4 * std::size_t{m};
    const char* ac = tc + 4 * std::size_t{m};

    tenant_index& t = *part_;
    // Validate the entries: replica ids in range and distinct, known tier codes.
    if (++stamp_gen_ == 0) {
      std::fill(replica_stamp_.begin(), replica_stamp_.end(), 0);
      stamp_gen_ = 1;
    }
    const std::uint32_t scope = t.parts_[part].scope;
    for (std::uint32_t i = 0; i < m; ++i) {
      const auto v = get<std::uint32_t>(rt + 4 * std::size_t{i});
      const std::uint32_t r = v & 0xFFFFFFu;
      if (r >= n_names_) return fail("entry replica out of range");
      if (!valid_tier(static_cast<std::uint8_t>(v >> 24))) return fail("bad tier code");
      if (replica_stamp_[r] == stamp_gen_) return fail("duplicate replica in a key");
      replica_stamp_[r] = stamp_gen_;
    }
    for (std::uint32_t i = 0; i < m; ++i) {
      const std::uint32_t r = get<std::uint32_t>(rt + 4 * std::size_t{i}) & 0xFFFFFFu;
      if (dense_serving_) {
        ++serving_acc_[std::size_t{scope} * n_names_ + r];
      } else {
        ++t.scopes_[scope].serving[r];
      }
    }

    place_free_records();
    const auto kidx = static_cast<std::uint32_t>(t.records_.size());
    if (kidx >= n_slab_) return fail("more keys than slab slots");
    key_record rec{};
    rec.part = part;
    if (long_hash) {
      rec.part |= key_long_hash;
      rec.hash = t.long_hashes_.size();
      t.long_hashes_.emplace_back(bytes);
    } else {
      rec.hash = __builtin_bswap64(get<std::uint64_t>(bytes.data()));
    }
    if (m == 1) {
      rec.u.ls = get<micros>(ls);
      rec.rt = get<std::uint32_t>(rt);
      rec.tc = get<std::int32_t>(tc);
      rec.ac = get<std::uint32_t>(ac);
    } else {
      char* b = static_cast<char*>(std::malloc(std::size_t{m} * entry_bytes));
      if (b == nullptr) std::abort();
      std::memcpy(b, ls, std::size_t{m} * entry_bytes);  // same parallel layout, cap = m
      rec.part |= key_on_heap;
      rec.u.block = b;
      rec.rt = m;
      rec.tc = static_cast<std::int32_t>(m);
    }
    t.records_.push_back(rec);
    // The eviction orders, pushed in slot order as rebuild_cap_order/rebuild_quota_order
    // would (under the policy and quota the target already has), while the key is hot.
    if (t.cap_tracked()) {
      const entry_span e = tenant_index::entries_of(t.records_[kidx]);
      for (std::uint32_t i = 0; i < m; ++i) {
        t.push_cap_ref(kidx, t.effective_count(e[i]), e.ls[i]);
      }
    }
    if (t.quota_) t.push_quota_ref(kidx);

    // Queue the key-table insert; it happens `insert_lag` keys later, when the slot's cache
    // line (prefetched now) has arrived.
    const std::uint64_t h = t.key_hash(rec);
    t.table_.prefetch(h);
    if (queued_ == insert_lag) {
      if (!insert_key(queue_[queue_head_])) return fail("duplicate key");
      queue_[queue_head_] = {h, kidx};
      queue_head_ = (queue_head_ + 1) % insert_lag;
    } else {
      queue_[queued_++] = {h, kidx};
    }

    ++part_keys_[part];
    t.keys_ += 1;
    t.entries_ += m;
    --keys_left_;
    skip_empty_sections();
    return total;
  }

  /// Resizes the key table, in one rehash, to the size for the keys the header declared:
  /// the keys that already arrived outgrew the up-front sizing, so the declared count is
  /// now backed by at least that many bytes of input.
  void grow_key_table() {
    tenant_index& t = *part_;
    const std::size_t slots =
        std::max(t.table_.slot_count() * 2, key_table::slots_for(declared_keys_));
    t.table_.rehash(slots, [&t](std::uint32_t r) { return t.record_hash(r); });
  }

  /// Inserts a loaded key into the table; false if the key is already there.
  bool insert_key(const std::pair<std::uint64_t, std::uint32_t>& q) {
    tenant_index& t = *part_;
    if (t.table_.over_load(1)) grow_key_table();
    const auto [h, kidx] = q;
    const key_record& k = t.records_[kidx];
    std::size_t at = 0;
    const std::uint32_t dup = t.table_.find(
        h,
        [&](std::uint32_t r) {
          const key_record& other = t.records_[r];
          return tenant_index::part_id(other) == tenant_index::part_id(k) &&
                 ((other.part ^ k.part) & key_long_hash) == 0 &&
                 ((k.part & key_long_hash) ? t.long_hashes_[other.hash] == t.long_hashes_[k.hash]
                                           : other.hash == k.hash);
        },
        at);
    if (dup != key_table::npos) return false;
    t.table_.insert_at(at, h, kidx);
    return true;
  }

  bool finish_keys() {
    for (std::size_t j = 0; j < queued_; ++j) {
      if (!insert_key(queue_[(queue_head_ + j) % insert_lag])) {
        fail("duplicate key in tenant '" + part_->name_ + "'");
        return false;
      }
    }
    queued_ = 0;
    queue_head_ = 0;
    place_free_records();
    if (part_->records_.size() != n_slab_) {
      fail("free slots and keys do not fill the slab");
      return false;
    }
    tenant_index& t = *part_;
    for (std::uint32_t p = 0; p < n_parts_; ++p) {
      if (part_keys_[p] > 0) t.keys_by_model_[t.parts_[p].model] += part_keys_[p];
    }
    if (dense_serving_) {
      for (std::size_t s = 0; s < t.scopes_.size(); ++s) {
        for (std::uint32_t r = 0; r < n_names_; ++r) {
          const std::uint32_t c = serving_acc_[s * n_names_ + r];
          if (c > 0) t.scopes_[s].serving.emplace(r, c);
        }
      }
    }
    serving_acc_.clear();
    serving_acc_.shrink_to_fit();
    if (static_cast<std::uint64_t>(t.entries_) != n_entries_) {
      fail("tenant '" + t.name_ + "': entry count does not match its header");
      return false;
    }
    return true;
  }

  std::size_t parse_stats(const char* p, std::size_t n) {
    if (n < stats_bytes) return more(stats_bytes);
    const auto m = get<std::uint32_t>(p);
    const auto r = get<std::uint32_t>(p + 4);
    if (m >= n_names_ || r >= n_names_) return fail("stats row names out of range");
    tenant_index::stats_row row;
    row.cache_memory_bytes = get<std::int64_t>(p + 8);
    row.hit_rate = get<float>(p + 16);
    row.pressure = get<float>(p + 20);
    row.t2_hit_tokens = get<std::int64_t>(p + 24);
    row.t2_query_tokens = get<std::int64_t>(p + 32);
    row.last_seen = get<micros>(p + 40);
    row.stats_reported = get<micros>(p + 48);
    if (!part_->stats_[m].emplace(r, row).second) return fail("duplicate stats row");
    ++done_;
    skip_empty_sections();
    return stats_bytes;
  }

  bool finish_tenant() {
    replica_stamp_.clear();
    replica_stamp_.shrink_to_fit();
    part_ = nullptr;
    return true;
  }

  std::size_t parse_end(const char* p, std::size_t n) {
    if (n < end_bytes) return more(end_bytes);
    XXH3_64bits_update(&hash_, run_start_, static_cast<std::size_t>(p - run_start_));
    XXH3_64bits_update(&hash_, p, end_bytes - 8);
    if (XXH3_64bits_digest(&hash_) != get<std::uint64_t>(p + end_bytes - 8)) {
      return fail("checksum mismatch");
    }
    index_facts f;
    for (const tenant_index* t : targets_) {
      f += t->facts();
    }
    if (get<std::uint32_t>(p + 1) != tenants_ || get<std::int64_t>(p + 5) != f.total_entries ||
        get<std::int64_t>(p + 13) != f.reserved_entries ||
        get<std::int64_t>(p + 21) != f.total_keys) {
      return fail("global facts do not match the tenants");
    }
    stage_ = stage::done;
    return end_bytes;
  }

  /// Where each tenant of the stream loads (an empty tenant index, or nullptr: refused), and
  /// every tenant index loaded into, in stream order.
  std::function<tenant_index*(std::string_view)> next_;
  std::vector<tenant_index*> targets_;
  std::set<std::string, std::less<>> names_seen_;
  stage stage_ = stage::header;
  std::string error_;
  /// Bytes of one record split across chunks, and how many it needs in total.
  std::string pending_;
  std::size_t need_ = 0;
  /// Stream offset of the next record not yet parsed.
  std::uint64_t offset_ = 0;
  /// Checksum of the bytes parsed so far; `run_start_` is where unhashed input begins.
  XXH3_state_t hash_;
  const char* run_start_ = nullptr;
  std::uint32_t tenants_ = 0;
  /// Whether `finish` added the loaded facts to `options.shared`.
  bool published_ = false;

  // The tenant being loaded.
  tenant_index* part_ = nullptr;
  std::uint32_t n_names_ = 0, n_parts_ = 0, n_slab_ = 0, n_free_ = 0, n_stats_ = 0;
  std::uint64_t n_entries_ = 0;
  std::uint32_t done_ = 0;
  std::uint32_t keys_left_ = 0;
  std::size_t declared_keys_ = 0;  // live keys its header declared
  std::vector<std::uint32_t> free_sorted_;
  std::size_t free_pos_ = 0;
  std::vector<std::int64_t> part_keys_;
  bool dense_serving_ = true;
  std::vector<std::uint32_t> serving_acc_;
  std::uint32_t stamp_gen_ = 0;
  std::vector<std::uint32_t> replica_stamp_;
  /// Key-table inserts waiting for their prefetched slot: (hash, key index), a ring.
  static constexpr std::size_t insert_lag = 16;
  std::pair<std::uint64_t, std::uint32_t> queue_[insert_lag];
  std::size_t queued_ = 0;
  std::size_t queue_head_ = 0;
};

class snapshot_loader::impl : public snapshot_access::loader {
 public:
  using snapshot_access::loader::loader;
};

snapshot_loader::snapshot_loader(tenant_index& target) : impl_(std::make_unique<impl>(target)) {}

snapshot_loader::snapshot_loader(std::function<tenant_index*(std::string_view tenant)> target_of)
    : impl_(std::make_unique<impl>(std::move(target_of))) {}

snapshot_loader::~snapshot_loader() = default;

bool snapshot_loader::feed(std::string_view chunk, std::string* error) {
  return impl_->feed(chunk, error);
}

bool snapshot_loader::finish(std::string* error) { return impl_->finish(error); }

}  // namespace ic::index

