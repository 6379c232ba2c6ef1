// The server's snapshot: the tenants' indexes, the policy set and the /topology and
// /templates stores, written into the journal so that the journal before it can be
// truncated and restarts replay only the tail.
//
// A snapshot is a sequence of chunks (journal::log stores them, with checksums):
//
//   snapshot       := header-chunk store-chunk* tenant*
//   header-chunk   := magic "ICSNAP01" | u32le version (=4) | u64le policy-length | policy-json
//                     | i64le effective-time
//   store-chunk    := 'S' | u32le record kind (16 topology, 17 templates) | canonical JSON
//   tenant         := tenant-chunk data-chunk*
//   tenant-chunk   := 'T' | tenant name bytes
//   data-chunk     := 'D' | bytes of index::write_snapshot of that tenant's own index
//
// A store chunk carries exactly the payload its journal record would (proto/record_codec.hpp)
// and is loaded through the same rule (state::apply_store_record); a store holding the empty
// set has no chunk. The effective time is t_eff of the last record the snapshot covers
// (state/effective_clock.hpp): the replay after it continues from there. Version 3 is
// version 4 without it (loaded as 0), version 2 is version 3 without store chunks; both
// are still read.
// Version 1 (written before tenants had indexes of their own) is still read:
//   header-chunk (version 1) index-chunk*, index-chunk = bytes of one combined index, which
//   the loader splits into one index per tenant as it loads (index::snapshot_loader with a
//   per-tenant target).
//
// The policy JSON is the canonical encoding of the policy set in force; loading re-applies it,
// so tenant TTLs, eviction modes and quotas come back as they were.
//
//   write_state_snapshot(set, [&](std::string_view c) { chunks.emplace_back(c); return true; });
//   state_loader loader(options);
//   for (auto& c : chunks) if (!loader.feed(c, &error)) ...;
//   std::unique_ptr<tenant_set> restored = loader.finish(&error);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "state/tenant_state.hpp"
#include "index/snapshot_codec.hpp"

namespace ic::state {

/// The store sections of a snapshot (`store_sections`, state/pushed_stores.hpp).
using store_section_list = std::vector<std::pair<proto::record_kind, std::string>>;

/// Streams the policy set, the store sections, the effective time and `tenants` (in the
/// given order; name order keeps snapshots reproducible) as snapshot chunks of about
/// `chunk_bytes`; false if `sink` aborted. The tenants must not change during the call
/// (readers may run).
bool write_state_snapshot(const policy::policy_store& policies, const store_section_list& stores,
                          index::micros effective_time,
                          const std::vector<const tenant_state*>& tenants,
                          const std::function<bool(std::string_view)>& sink,
                          std::size_t chunk_bytes = 1 << 20);
/// Same, for every tenant of `set`. For tests (the snapshot writer passes a frozen view).
bool write_state_snapshot(const tenant_set& set, const std::function<bool(std::string_view)>& sink,
                          std::size_t chunk_bytes = 1 << 20);

/// Rebuilds a `tenant_set` from the chunks of `write_state_snapshot` (versions 2–4) or of
/// the version-1 writer, in order.
class state_loader {
 public:
  explicit state_loader(state_options options);
  ~state_loader();

  /// Takes the next chunk; false with `error` set when it is not a valid snapshot.
  bool feed(std::string_view chunk, std::string* error);

  /// Returns the restored tenants, or nullptr with `error` set when the snapshot was
  /// incomplete.
  std::unique_ptr<tenant_set> finish(std::string* error);

 private:
  bool finish_tenant(std::string* error);

  state_options options_;
  std::unique_ptr<tenant_set> set_;
  std::uint32_t version_ = 0;
  std::string policy_json_;
  // Version 2: the tenant being loaded.
  std::string tenant_;
  std::unique_ptr<index::tenant_index> index_;
  std::unique_ptr<index::snapshot_loader> loader_;
  /// Version 1: the tenants split out of the combined stream, in stream order.
  std::vector<std::pair<std::string, std::unique_ptr<index::tenant_index>>> v1_tenants_;
  bool failed_ = false;
};

}  // namespace ic::state
