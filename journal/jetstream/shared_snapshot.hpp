// Shared snapshots and the snapshotter lease in NATS KV buckets (spec/scaleout.md §3.6–3.7);
// libnats 3.4.1 has no Object Store, so a snapshot is chunks plus a manifest written last.
//
// Layout (bucket `<prefix>snap`, R = `replicas`, History 1, no TTL):
//   key "snap.<covering_seq>.<i>"  chunk i (0-based) of the snapshot covering that sequence
//   key "snap.latest"              the manifest, written after every chunk with a CAS on the
//                                  previous manifest's revision (a stale writer loses)
//   manifest := "format=1 covering_seq=<u64> chunks=<u64> bytes=<u64> checksum=<16 hex>
//                writer=<replica id> stream_first_seq=<u64>"      ; one line, ASCII
//   checksum  = format::checksum("ICSS", the whole snapshot blob)
// Lease (bucket `<prefix>lease`, TTL = `lease_ttl`, History 1): key "lease.snapshotter"
// holds the holder's replica id; kvStore_Create acquires, kvStore_Update(rev) renews, the
// TTL frees it. The revision is a fencing token.
// Replica marks (bucket `<prefix>marks`, TTL = `mark_ttl`): key "replica.<id>" = the
// decimal stream sequence that replica applied; a dead replica's mark expires. The lease is an efficiency device: two
// holders are safe because the manifest CAS lets only one commit per revision (§3.7).
//
//   auto s = shared_snapshots::open(opts);             // jetstream::options (servers, ...)
//   auto m = (*s)->put(covering, blob, prev_revision); // nullopt: another writer won
//   auto got = (*s)->get();                            // manifest + verified blob
//   auto l = (*s)->acquire_lease();                    // nullopt: held by someone else
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "journal/jetstream/jetstream_log.hpp"
#include "journal/status.hpp"

namespace ic::journal::jetstream {

/// What `snap.latest` says.
struct snapshot_manifest {
  std::uint64_t covering_seq = 0;  ///< the state includes every stream sequence ≤ this
  std::uint64_t chunks = 0;
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
  std::string writer;                  ///< the replica id that wrote it
  std::uint64_t stream_first_seq = 0;  ///< the stream's first sequence when it was written
  std::uint64_t revision = 0;          ///< KV revision of the manifest (the CAS token)
};

/// A held lease: its holder and the revision that renews it.
struct lease {
  std::string holder;
  std::uint64_t revision = 0;
};

/// Bucket names and sizes; the defaults are spec §3.6–3.7's.
struct shared_snapshot_config {
  /// Bucket names are `<bucket_prefix>snap` and `<bucket_prefix>lease`. Default "ic_".
  std::string bucket_prefix = "ic_";
  /// Chunk size (≤ the server's max_payload). Default 256 KiB.
  std::size_t chunk_bytes = std::size_t{256} << 10;
  /// Lease TTL (the bucket's TTL; renew well within it, e.g. every ttl/3). Default 10 s.
  std::chrono::milliseconds lease_ttl{10000};
  /// Replica mark TTL (write marks well within it, e.g. every 5 s). Default 30 s.
  std::chrono::milliseconds mark_ttl{30000};
};

/// The shared snapshot store and lease of one replica. Thread-safe (libnats is).
class shared_snapshots {
 public:
  /// Connects (own connection) and binds or creates both buckets with `opts.replicas`.
  /// Errors: invalid_argument, unavailable.
  static result<std::unique_ptr<shared_snapshots>> open(const options& opts,
                                                        const shared_snapshot_config& cfg = {});
  ~shared_snapshots();
  shared_snapshots(const shared_snapshots&) = delete;
  shared_snapshots& operator=(const shared_snapshots&) = delete;

  /// Writes `blob` as the snapshot covering `covering_seq`: chunks first, then the
  /// manifest with a CAS on `expected_revision` (0 = no manifest may exist yet). After the
  /// commit, the previous manifest's chunks are purged. Returns nullopt when the CAS lost
  /// (another writer committed meanwhile; its chunks stay, ours are purged). Errors:
  /// unavailable.
  result<std::optional<snapshot_manifest>> put(std::uint64_t covering_seq, std::string_view blob,
                                               std::uint64_t expected_revision,
                                               std::uint64_t stream_first_seq = 0);
  /// Reads the manifest only. Errors: not_found (no shared snapshot yet), corruption
  /// (unparsable manifest), unavailable.
  result<snapshot_manifest> latest() const;
  /// Reads the manifest and every chunk and verifies size and checksum (re-reading the
  /// manifest when a newer commit purged the chunks mid-read). Errors: not_found,
  /// corruption (names the chunk or the mismatch), unavailable.
  result<std::pair<snapshot_manifest, std::string>> get() const;

  /// Takes the snapshotter lease for `opts.replica_id`. Returns nullopt while another
  /// holder's lease is live. Errors: unavailable.
  result<std::optional<lease>> acquire_lease();
  /// Renews `held`; nullopt when it was lost (expired and taken, or revision moved):
  /// step down at once. Errors: unavailable (also: step down).
  result<std::optional<lease>> renew_lease(const lease& held);

  /// Publishes this replica's applied stream sequence (its "mark"). Errors: unavailable.
  status put_mark(std::uint64_t applied);
  /// Every live mark as (replica id, applied mark). Errors: corruption (a mark that is not
  /// a number), unavailable.
  result<std::vector<std::pair<std::string, std::uint64_t>>> live_marks() const;
  /// The lowest live mark, nullopt when no replica has one. Errors: as live_marks().
  result<std::optional<std::uint64_t>> min_live_mark() const;
  /// The purge bound P of spec §3.6: min(manifest covering_seq, lowest live mark) − margin,
  /// or 0 when nothing may be purged (no manifest, or the bound is ≤ 0). The lease holder
  /// then calls writer::truncate_before(P + 1). Errors: as latest() and min_live_mark().
  result<std::uint64_t> purge_bound(std::uint64_t margin) const;

 private:
  struct impl;
  explicit shared_snapshots(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::journal::jetstream
