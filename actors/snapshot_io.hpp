// The server's snapshot: the index state the runtime writes into the journal so that the
// journal before it can be truncated and restarts replay only the tail.
//
// A snapshot is a sequence of chunks (journal::log stores them, with checksums):
//
//   snapshot     := header-chunk index-chunk*
//   header-chunk := magic "ICSNAP01" | u32le version (=1) | u64le policy-length | policy-json
//   index-chunk  := bytes of index::write_snapshot (index/README.md, "Snapshot format")
//
// The policy JSON is the canonical encoding of the policy set in force (policy/policy_json.hpp);
// loading re-applies it after the index data, so tenant TTLs, eviction modes and quotas come
// back as they were.
//
//   std::vector<std::string> chunks;
//   write_state_snapshot(state, [&](std::string_view c) { chunks.emplace_back(c); return true; });
//   state_loader loader(options);
//   for (auto& c : chunks) if (!loader.feed(c, &error)) ...;
//   std::shared_ptr<index_state> restored = loader.finish(&error);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "actors/index_state.hpp"
#include "index/snapshot_codec.hpp"

namespace ic::actors {

/// Streams `state` as snapshot chunks of about `chunk_bytes`; false if `sink` aborted.
bool write_state_snapshot(const index_state& state,
                          const std::function<bool(std::string_view)>& sink,
                          std::size_t chunk_bytes = 1 << 20);

/// Rebuilds an `index_state` from the chunks of `write_state_snapshot`, in order.
class state_loader {
 public:
  explicit state_loader(index_state_options options);

  /// Takes the next chunk; false with `error` set when it is not a valid snapshot.
  bool feed(std::string_view chunk, std::string* error);

  /// Returns the restored state, or nullptr with `error` set when the snapshot was incomplete.
  std::shared_ptr<index_state> finish(std::string* error);

 private:
  std::shared_ptr<index_state> state_;
  std::unique_ptr<index::snapshot_loader> loader_;
  std::string policy_json_;
  bool header_seen_ = false;
};

}  // namespace ic::actors
