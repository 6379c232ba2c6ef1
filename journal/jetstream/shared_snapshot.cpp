#include "journal/jetstream/shared_snapshot.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "journal/format.hpp"
#include "journal/jetstream/nats_connection.hpp"
#include "journal/jetstream/replica_duties.hpp"

namespace ic::journal::jetstream {

namespace {

using detail::describe;

constexpr const char* manifest_key = "snap.latest";
constexpr const char* lease_key = "lease.snapshotter";
constexpr std::string_view checksum_prefix = "ICSS";

std::string chunk_key(std::uint64_t covering, std::uint64_t i) {
  return "snap." + std::to_string(covering) + "." + std::to_string(i);
}

// A status that means "could not reach JetStream" rather than "the server said no".
bool transient(natsStatus s) {
  return s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS || s == NATS_CONNECTION_CLOSED ||
         s == NATS_CONNECTION_DISCONNECTED || s == NATS_NOT_YET_CONNECTED || s == NATS_IO_ERROR;
}

std::string encode_manifest(const snapshot_manifest& m) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "format=1 covering_seq=%" PRIu64 " chunks=%" PRIu64 " bytes=%" PRIu64
                " checksum=%016" PRIx64 " writer=%s stream_first_seq=%" PRIu64,
                m.covering_seq, m.chunks, m.bytes, m.checksum, m.writer.c_str(),
                m.stream_first_seq);
  return buf;
}

status decode_manifest(std::string_view text, snapshot_manifest* m) {
  char writer[256] = {0};
  const std::string s(text);
  int format = 0;
  if (std::sscanf(s.c_str(),
                  "format=%d covering_seq=%" SCNu64 " chunks=%" SCNu64 " bytes=%" SCNu64
                  " checksum=%" SCNx64 " writer=%255s stream_first_seq=%" SCNu64,
                  &format, &m->covering_seq, &m->chunks, &m->bytes, &m->checksum, writer,
                  &m->stream_first_seq) != 7 ||
      format != 1) {
    return {errc::corruption, "shared snapshot manifest unreadable: '" + s + "'"};
  }
  m->writer = writer;
  return {};
}

result<kvStore*> bind_or_create(jsCtx* js, const std::string& bucket, int replicas,
                                std::int64_t ttl_ns, std::int32_t max_value) {
  kvStore* kv = nullptr;
  if (js_KeyValue(&kv, js, bucket.c_str()) == NATS_OK) return kv;
  kvConfig kc;
  kvConfig_Init(&kc);
  kc.Bucket = bucket.c_str();
  kc.History = 1;
  kc.TTL = ttl_ns;  // nanoseconds (spec §2.7 pitfall)
  kc.Replicas = replicas;
  kc.StorageType = js_FileStorage;
  kc.MaxValueSize = max_value;
  natsStatus s = js_CreateKeyValue(&kv, js, &kc);
  if (s != NATS_OK) return status{errc::unavailable, "KV bucket " + bucket + ": " + describe(s)};
  return kv;
}

}  // namespace

struct shared_snapshots::impl {
  options opts;
  shared_snapshot_config cfg;
  std::unique_ptr<detail::connection> conn;
  kvStore* snap = nullptr;
  kvStore* lease_kv = nullptr;
  kvStore* marks = nullptr;
  ~impl() {
    if (marks != nullptr) kvStore_Destroy(marks);
    if (snap != nullptr) kvStore_Destroy(snap);
    if (lease_kv != nullptr) kvStore_Destroy(lease_kv);
  }

  // Reads the manifest; not_found when absent.
  result<snapshot_manifest> read_manifest() const {
    kvEntry* e = nullptr;
    natsStatus s = kvStore_Get(&e, snap, manifest_key);
    if (s == NATS_NOT_FOUND) return status{errc::not_found, "no shared snapshot yet"};
    if (s != NATS_OK) return status{errc::unavailable, "read manifest: " + describe(s)};
    snapshot_manifest m;
    status d = decode_manifest(
        std::string_view(static_cast<const char*>(kvEntry_Value(e)),
                         static_cast<std::size_t>(kvEntry_ValueLen(e))),
        &m);
    m.revision = kvEntry_Revision(e);
    kvEntry_Destroy(e);
    if (!d.ok()) return d;
    return m;
  }

  void purge_chunks(std::uint64_t covering, std::uint64_t chunks) const {
    for (std::uint64_t i = 0; i < chunks; ++i) kvStore_Purge(snap, chunk_key(covering, i).c_str(), nullptr);
  }
};

shared_snapshots::shared_snapshots(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
shared_snapshots::~shared_snapshots() = default;

result<std::unique_ptr<shared_snapshots>> shared_snapshots::open(
    const options& opts, const shared_snapshot_config& cfg) {
  if (status s = validate_origin(opts.replica_id); !s.ok()) return s;
  if (cfg.chunk_bytes == 0 || cfg.lease_ttl < std::chrono::milliseconds(100) ||
      cfg.mark_ttl < std::chrono::milliseconds(100)) {
    return status{errc::invalid_argument,
                  "chunk_bytes must be > 0, lease_ttl and mark_ttl >= 100 ms"};
  }
  auto conn = detail::connection::open(opts.servers, opts.replica_id + "-snapshots",
                                       opts.creds_file, opts.open_timeout);
  if (!conn.ok()) return conn.status();
  auto p = std::make_unique<impl>();
  p->opts = opts;
  p->cfg = cfg;
  p->conn = std::move(*conn);
  auto snap = bind_or_create(p->conn->js(), cfg.bucket_prefix + "snap", opts.replicas, 0,
                             static_cast<std::int32_t>(cfg.chunk_bytes + 1024));
  if (!snap.ok()) return snap.status();
  p->snap = *snap;
  auto lk = bind_or_create(p->conn->js(), cfg.bucket_prefix + "lease", opts.replicas,
                           static_cast<std::int64_t>(cfg.lease_ttl.count()) * 1000000, 1024);
  if (!lk.ok()) return lk.status();
  p->lease_kv = *lk;
  auto mk = bind_or_create(p->conn->js(), cfg.bucket_prefix + "marks", opts.replicas,
                           static_cast<std::int64_t>(cfg.mark_ttl.count()) * 1000000, 64);
  if (!mk.ok()) return mk.status();
  p->marks = *mk;
  return std::unique_ptr<shared_snapshots>(new shared_snapshots(std::move(p)));
}

result<std::optional<snapshot_manifest>> shared_snapshots::put(std::uint64_t covering_seq,
                                                               std::string_view blob,
                                                               std::uint64_t expected_revision,
                                                               std::uint64_t stream_first_seq) {
  snapshot_manifest m;
  m.covering_seq = covering_seq;
  m.bytes = blob.size();
  m.checksum = format::checksum(checksum_prefix, blob);
  m.writer = impl_->opts.replica_id;
  m.stream_first_seq = stream_first_seq;
  const std::size_t cb = impl_->cfg.chunk_bytes;
  for (std::size_t at = 0; at < blob.size() || m.chunks == 0; at += cb) {
    const std::string_view part = blob.substr(at, std::min(cb, blob.size() - at));
    std::uint64_t rev = 0;
    natsStatus s = kvStore_Put(&rev, impl_->snap, chunk_key(covering_seq, m.chunks).c_str(),
                               part.data(), static_cast<int>(part.size()));
    if (s != NATS_OK) {
      return status{errc::unavailable, "write chunk " + std::to_string(m.chunks) + " of snapshot " +
                                           std::to_string(covering_seq) + ": " + describe(s)};
    }
    ++m.chunks;
    if (blob.empty()) break;
  }
  auto previous = impl_->read_manifest();
  const std::string text = encode_manifest(m);
  std::uint64_t rev = 0;
  natsStatus s = expected_revision == 0
                     ? kvStore_Create(&rev, impl_->snap, manifest_key, text.data(), static_cast<int>(text.size()))
                     : kvStore_Update(&rev, impl_->snap, manifest_key, text.data(),
                                      static_cast<int>(text.size()), expected_revision);
  if (s != NATS_OK) {
    if (transient(s)) return status{errc::unavailable, "commit manifest: " + describe(s)};
    // The CAS lost: someone else's manifest is current. Ours is garbage unless it is theirs.
    auto now = impl_->read_manifest();
    if (!now.ok() || now->covering_seq != covering_seq) impl_->purge_chunks(covering_seq, m.chunks);
    return std::optional<snapshot_manifest>();
  }
  m.revision = rev;
  if (previous.ok() && previous->covering_seq != covering_seq) {
    impl_->purge_chunks(previous->covering_seq, previous->chunks);
  }
  return std::optional<snapshot_manifest>(m);
}

result<snapshot_manifest> shared_snapshots::latest() const { return impl_->read_manifest(); }

result<std::pair<snapshot_manifest, std::string>> shared_snapshots::get() const {
  status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto m = impl_->read_manifest();
    if (!m.ok()) return m.status();
    std::string blob;
    blob.reserve(static_cast<std::size_t>(m->bytes));
    bool retry = false;
    for (std::uint64_t i = 0; i < m->chunks && !retry; ++i) {
      kvEntry* e = nullptr;
      natsStatus s = kvStore_Get(&e, impl_->snap, chunk_key(m->covering_seq, i).c_str());
      if (s == NATS_NOT_FOUND) {
        auto again = impl_->read_manifest();
        if (again.ok() && again->revision != m->revision) { retry = true; break; }  // replaced
        return status{errc::corruption, "shared snapshot " + std::to_string(m->covering_seq) +
                                            ": chunk " + std::to_string(i) + " of " +
                                            std::to_string(m->chunks) + " is missing"};
      }
      if (s != NATS_OK) return status{errc::unavailable, "read chunk: " + describe(s)};
      blob.append(static_cast<const char*>(kvEntry_Value(e)),
                  static_cast<std::size_t>(kvEntry_ValueLen(e)));
      kvEntry_Destroy(e);
    }
    if (retry) continue;
    if (blob.size() != m->bytes || format::checksum(checksum_prefix, blob) != m->checksum) {
      return status{errc::corruption,
                    "shared snapshot " + std::to_string(m->covering_seq) + ": " +
                        std::to_string(blob.size()) + " bytes read, manifest says " +
                        std::to_string(m->bytes) + ", or the checksum differs"};
    }
    return std::make_pair(*m, std::move(blob));
  }
  return status{errc::unavailable, "shared snapshot replaced three times while reading"};
}

result<std::optional<lease>> shared_snapshots::acquire_lease() {
  const std::string& me = impl_->opts.replica_id;
  std::uint64_t rev = 0;
  natsStatus s = kvStore_CreateString(&rev, impl_->lease_kv, lease_key, me.c_str());
  if (s == NATS_OK) return std::optional<lease>(lease{me, rev});
  if (transient(s)) return status{errc::unavailable, "acquire lease: " + describe(s)};
  return std::optional<lease>();  // someone holds it (the create CAS refused)
}

result<std::optional<lease>> shared_snapshots::renew_lease(const lease& held) {
  std::uint64_t rev = 0;
  natsStatus s = kvStore_UpdateString(&rev, impl_->lease_kv, lease_key, held.holder.c_str(),
                                      held.revision);
  if (s == NATS_OK) return std::optional<lease>(lease{held.holder, rev});
  if (transient(s)) return status{errc::unavailable, "renew lease: " + describe(s)};
  return std::optional<lease>();
}

status shared_snapshots::put_mark(std::uint64_t applied) {
  const std::string key = "replica." + impl_->opts.replica_id;
  std::uint64_t rev = 0;
  natsStatus s = kvStore_PutString(&rev, impl_->marks, key.c_str(), std::to_string(applied).c_str());
  if (s != NATS_OK) return {errc::unavailable, "put mark: " + describe(s)};
  return {};
}

result<std::vector<std::pair<std::string, std::uint64_t>>> shared_snapshots::live_marks() const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  kvKeysList keys{nullptr, 0};
  natsStatus s = kvStore_Keys(&keys, impl_->marks, nullptr);
  if (s == NATS_NOT_FOUND) return out;
  if (s != NATS_OK) return status{errc::unavailable, "list marks: " + describe(s)};
  status bad;
  for (int i = 0; i < keys.Count && bad.ok(); ++i) {
    kvEntry* e = nullptr;
    s = kvStore_Get(&e, impl_->marks, keys.Keys[i]);
    if (s == NATS_NOT_FOUND) continue;  // expired between the listing and the read
    if (s != NATS_OK) {
      bad = status{errc::unavailable, "read mark: " + describe(s)};
      break;
    }
    const std::string v(static_cast<const char*>(kvEntry_Value(e)),
                        static_cast<std::size_t>(kvEntry_ValueLen(e)));
    kvEntry_Destroy(e);
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || end == nullptr || *end != '\0') {
      bad = status{errc::corruption, std::string("mark ") + keys.Keys[i] + " = '" + v + "'"};
      break;
    }
    std::string id = keys.Keys[i];
    if (id.rfind("replica.", 0) == 0) id.erase(0, 8);
    out.emplace_back(std::move(id), n);
  }
  kvKeysList_Destroy(&keys);
  if (!bad.ok()) return bad;
  return out;
}

result<std::optional<std::uint64_t>> shared_snapshots::min_live_mark() const {
  auto marks = live_marks();
  if (!marks.ok()) return marks.status();
  std::optional<std::uint64_t> low;
  for (const auto& [id, n] : *marks) low = low ? std::min(*low, n) : n;
  return low;
}

result<std::uint64_t> shared_snapshots::purge_bound(std::uint64_t margin) const {
  auto m = impl_->read_manifest();
  if (!m.ok()) {
    if (m.status().code() == errc::not_found) return std::uint64_t{0};
    return m.status();
  }
  auto low = min_live_mark();
  if (!low.ok()) return low.status();
  return purge_bound_of(m->covering_seq, *low, margin);
}

}  // namespace ic::journal::jetstream
