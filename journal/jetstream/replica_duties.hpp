// The plain decisions behind a replica's shared-snapshot duties (spec/scaleout.md §3.6–3.8),
// kept apart from NATS so they are unit-tested without a server:
//
//   - the shared snapshot blob: the local snapshot's chunks, framed, plus the exact record
//     position they cover;
//   - which stream sequence a snapshot or a replica still needs (`needed_from`), so a
//     manifest's covering_seq and a replica mark mean "sequences ≤ this are not needed";
//   - the purge bound P = min(committed covering_seq, lowest live mark) − margin;
//   - where a starting replica loads its state from (local snapshot, shared one, the
//     stream's start, or nowhere: a gap nothing covers);
//   - the snapshotter lease as a small state machine (acquire / renew / step down).
//
//   auto blob = encode_snapshot_blob(position, chunks);
//   auto plan = plan_start(local_covering, stream_first, manifest_covering);
//   lease_keeper k(3s);  if (k.next(now) == lease_keeper::action::acquire) k.acquired(..., now);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "journal/jetstream/shared_snapshot.hpp"
#include "journal/status.hpp"

namespace ic::journal::jetstream {

// --- the blob -------------------------------------------------------------------------
// blob := "ICSB" | be32 version (=1) | be64 covering_position | chunk*
// chunk := be32 length | bytes              ; the local snapshot's chunks, in order
// `covering_position` is the record position (journal/record_log.hpp) the state includes.

/// Frames `chunks` (the local snapshot's, as journal::log stored them) as one blob.
std::string encode_snapshot_blob(std::uint64_t covering_position,
                                 const std::vector<std::string>& chunks);
/// Appends one chunk frame to a blob begun by encode_snapshot_blob(position, {}).
void append_blob_chunk(std::string* blob, std::string_view chunk);
/// Hands each chunk of `blob` to `on_chunk` in order and sets `*covering_position`.
/// Errors: corruption (bad magic, truncated frame), incompatible (newer version), or the
/// first error of `on_chunk`.
status decode_snapshot_blob(std::string_view blob, std::uint64_t* covering_position,
                            const std::function<status(std::string_view)>& on_chunk);

// --- positions ------------------------------------------------------------------------
/// The first stream sequence a replica at record position `position` must still read:
/// the envelope of the first record after `position` (read_after re-reads the envelope of
/// `position` unless `position` is its last possible record), at least 1.
std::uint64_t needed_from(std::uint64_t position);
/// Stream sequences ≤ this are not needed by state at `position` (needed_from − 1): a
/// manifest's covering_seq and a replica's mark.
std::uint64_t not_needed_through(std::uint64_t position);

/// P of spec §3.6: min(`committed_covering`, `lowest_mark`) − `margin`; 0 = purge nothing
/// (no manifest committed, or the bound is ≤ 0). The caller purges below P + 1.
std::uint64_t purge_bound_of(std::optional<std::uint64_t> committed_covering,
                             std::optional<std::uint64_t> lowest_mark, std::uint64_t margin);

// --- start-up -------------------------------------------------------------------------
enum class start_source {
  local,      ///< the newest local snapshot, then the stream after it
  shared,     ///< the shared snapshot (local missing or stale), then the stream after it
  stream,     ///< no snapshot anywhere and nothing purged: the whole stream
  uncovered,  ///< the stream lost what this replica needs and no shared snapshot covers it
};

struct start_plan {
  start_source source = start_source::stream;
  /// A local snapshot existed but the stream was purged past it (counts as a gap).
  bool gap = false;
};

/// Decides where a starting replica's state comes from. `local_covering`: the newest
/// complete local snapshot's record position (nullopt: none); `stream_first`: the stream's
/// first sequence (0 or 1 when never purged; last + 1 when purged empty): everything below
/// it is gone; `manifest_covering`: the committed shared snapshot's covering_seq (nullopt:
/// none). A local snapshot the stream still follows wins (no download).
start_plan plan_start(std::optional<std::uint64_t> local_covering, std::uint64_t stream_first,
                      std::optional<std::uint64_t> manifest_covering);

/// Before a journal reset (`--journal-reset`): the first replica of `marks` (id, mark;
/// live marks as shared_snapshots::live_marks) other than `self` that lost nothing — its
/// mark reaches `stream_first` − 2, so it applied envelope `stream_first` − 1 and follows
/// on (a replica halted at the gap needed a sequence < `stream_first` − 1, so its mark is
/// at most `stream_first` − 3). That replica still serves the whole index and uploads a
/// covering shared snapshot itself; a reset beside it would make the two diverge. nullopt
/// when none.
std::optional<std::pair<std::string, std::uint64_t>> replica_holding_the_state(
    const std::vector<std::pair<std::string, std::uint64_t>>& marks, const std::string& self,
    std::uint64_t stream_first);

// --- the lease ------------------------------------------------------------------------
/// The snapshotter lease of one replica (spec §3.7): acquire when free, renew every
/// `renew_every` while held, step down at the first renew that fails or is refused.
class lease_keeper {
 public:
  using clock = std::chrono::steady_clock;
  enum class action { none, acquire, renew };

  explicit lease_keeper(std::chrono::milliseconds renew_every) : every_(renew_every) {}

  /// What to do at `now`: acquire (not held; first call or `renew_every` after the last
  /// try), renew (held, `renew_every` after the last renew), or nothing yet.
  action next(clock::time_point now) const;
  /// The outcome of acquire: the lease, or nullopt (held by another replica).
  void acquired(const std::optional<lease>& got, clock::time_point now);
  /// The outcome of renew: the renewed lease, or nullopt (lost: step down).
  void renewed(const std::optional<lease>& got, clock::time_point now);
  /// acquire or renew failed (NATS unreachable): step down, try again later.
  void failed(clock::time_point now);

  bool holder() const { return held_.has_value(); }
  const std::optional<lease>& held() const { return held_; }

 private:
  std::chrono::milliseconds every_;
  std::optional<lease> held_;
  std::optional<clock::time_point> last_try_;
};

}  // namespace ic::journal::jetstream
