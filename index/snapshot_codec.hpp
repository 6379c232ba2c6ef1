// Snapshot codec: the complete state of one or more `tenant_index`es as a stream of byte
// chunks, and back.
//
// The server journals every input and recovers by replaying the journal; a snapshot lets it
// truncate the journal and restart from the snapshot plus the journal tail. The codec is
// independent of where the chunks go (the journal stores them as opaque payloads). The
// server writes one stream per tenant (state/snapshot_io.cpp); a v1 server snapshot holds
// one stream of every tenant, which the split loader puts into one index per tenant.
//
//   // Writing: chunks of about 1 MiB, streamed (never the whole snapshot in memory).
//   bool ok = write_snapshot(idx, [&](std::string_view chunk) {
//     return writer.add_chunk(chunk).ok();  // false aborts the snapshot
//   });
//
//   // Loading, into a freshly constructed index of the same tenant and `index_options`:
//   tenant_index restored(tenant, options);
//   snapshot_loader loader(restored);
//   for (each chunk, in order) if (!loader.feed(chunk, &error)) refuse(error);
//   if (!loader.finish(&error)) refuse(error);
//   // then re-apply the tenant's policy and quota (set_policy / set_quota)
//
// What a stream holds, per tenant (the reserved tenant included, and tenants whose keys are
// all gone): its interned names and (model, scheme, adapter) parts in id order, every key in
// slab order (free slots and the free-slot stack included, so later keys get the same slots
// and sweeps report in the same order) with its (key, replica) entries in their stored order
// (token_count, last_seen, tier code, LFU counter), every stats row; then the summed facts.
// The loaded index has the same `canonical_dump()` and answers and evolves exactly like the
// original under the same further inputs.
//
// Not in a snapshot: `index_options` (the loading process constructs the index from its
// flags), tenant policies and quotas (the runtime re-applies them from its policy store;
// doing so after loading only rebuilds the derived eviction orders), and derived state
// (hash table, counters, serving sets, eviction orders), which the loader rebuilds.
//
// The byte format is documented in index/README.md ("Snapshot format").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "index/tenant_index.hpp"

namespace ic::index {

/// Format version written by this build; loaders refuse any other.
inline constexpr std::uint32_t snapshot_format_version = 1;

/// Streams the complete state of `idx` to `sink` as chunks of exactly `chunk_bytes` each,
/// except the last, which may be shorter (`chunk_bytes` 0 is treated as 1). A chunk view is
/// valid only during the call. Returns false as soon as `sink` returns false (the snapshot
/// is then incomplete and must be discarded), true when every chunk was accepted.
/// `idx` must not change during the call.
bool write_snapshot(const tenant_index& idx, const std::function<bool(std::string_view)>& sink,
                    std::size_t chunk_bytes = 1 << 20);
/// Same, for several tenant indexes in that order (one v1-style stream of every tenant).
bool write_snapshot(const std::vector<const tenant_index*>& tenants,
                    const std::function<bool(std::string_view)>& sink,
                    std::size_t chunk_bytes = 1 << 20);

/// Rebuilds the state written by `write_snapshot` into an empty index, chunk by chunk.
///
/// Chunks may split the stream anywhere; the loader buffers at most one partial record.
/// Errors are values: a corrupt, truncated or unknown-version stream makes `feed`/`finish`
/// return false with a one-line description (including the byte offset). After an error
/// the target holds a partial state and must be discarded; further calls keep failing.
class snapshot_loader {
 public:
  /// Prepares to load into one tenant index, which must be empty (asserted) and outlive the
  /// loader: the stream must hold exactly that tenant (its policy and quota already set).
  explicit snapshot_loader(tenant_index& target);
  /// Prepares to load each tenant of the stream into an index of its own: `target_of(name)`
  /// is called at each tenant record and returns an empty index (not owned; it must outlive
  /// the loader; nullptr refuses the tenant) with the tenant's policy and quota already set.
  /// The end record is checked against the facts summed over those indexes; `finish` adds
  /// each one's facts to its `options.shared`. The server's v1 reader splits a combined
  /// (multi-tenant) stream this way as it loads.
  explicit snapshot_loader(std::function<tenant_index*(std::string_view tenant)> target_of);
  ~snapshot_loader();
  snapshot_loader(const snapshot_loader&) = delete;
  snapshot_loader& operator=(const snapshot_loader&) = delete;

  /// Consumes the next chunk. Returns false and sets `*error` (when non-null) if the bytes
  /// are not a valid snapshot of a supported version.
  bool feed(std::string_view chunk, std::string* error);

  /// Checks that the stream ended exactly at the end record (whose checksum and global facts
  /// matched). Returns false and sets `*error` when it is truncated or an earlier call failed.
  /// On success (first call only) adds the loaded facts to the target's `options.shared`
  /// when set; a failed or unfinished load adds nothing.
  bool finish(std::string* error);

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::index
