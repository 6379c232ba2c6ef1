// The actors' protocol: every message the runtime's actors exchange, and their typed
// interfaces (sender, handler, reply). Included only by actors/runtime.cpp: callers use the
// CAF-free facade in actors/runtime.hpp.
//
//   journal actor  <- runtime::append            append(append_msg)
//   journal actor  -> index actor                apply(committed_batch)
//   gateway thread -> index actor                credit() (drains the credit buffer), subscribe(subscriber)
//   HTTP thread    -> index actor (request)      snapnow() / probe(request)
//
// Reads (lookups, GetCacheState, /snapshot, /metrics) do not go through actors: they take
// the shared side of the index lock (actors/rw_lock.hpp) on the caller's thread.
//   index actor    -> snapshot writer (request)  snapwrite(snapshot_job) -> snapshot_report
//
// Messages are local only (never serialised), so types are allowed with
// CAF_ALLOW_UNSAFE_MESSAGE_TYPE instead of inspect().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/chunk_pipe.hpp"
#include "actors/messages.hpp"
#include "actors/probe.hpp"
#include "actors/record_codec.hpp"
#include "actors/runtime.hpp"
#include "index/cache_index.hpp"
#include "index/types.hpp"

namespace ic::actors {

// Atoms are at most 10 characters (CAF 0.17).
using append_atom = caf::atom_constant<caf::atom("append")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using credit_atom = caf::atom_constant<caf::atom("credit")>;
using sub_atom = caf::atom_constant<caf::atom("subscribe")>;
using snapnow_atom = caf::atom_constant<caf::atom("snapnow")>;
using snapwrite_atom = caf::atom_constant<caf::atom("snapwrite")>;
using probe_atom = caf::atom_constant<caf::atom("probe")>;

/// One input to journal (journal actor <- runtime::append).
struct append_msg {
  record_kind kind = record_kind::update;
  std::string payload;
  std::shared_ptr<append_sink> sink;
  std::size_t slot = 0;
};

/// One journaled record on its way to the index (journal actor -> index actor).
struct committed {
  std::uint64_t seq = 0;
  std::uint32_t kind = 0;
  std::string bytes;
  std::shared_ptr<append_sink> sink;
  std::size_t slot = 0;
};

/// One group commit's records, in journal order.
struct committed_batch {
  std::vector<committed> items;
};

/// LFU credit of delivered lookups.
using credit_list = std::vector<index::scored_replica>;

/// Credits collected from the lookup threads. A lookup appends its hits; the first one into
/// an empty buffer sends one `credit()` to the index actor, which drains everything gathered
/// by then under a single write lock (instead of one message and one lock per lookup).
struct credit_buffer {
  std::mutex mu;
  credit_list hits;
  bool scheduled = false;
};

/// A snapshot being streamed to the snapshot writer: the index actor pushes its chunks into
/// `pipe` while the writer stores them.
struct snapshot_job {
  std::uint64_t covering_seq = 0;
  std::shared_ptr<chunk_pipe> pipe;
};
using subscriber_ptr = std::shared_ptr<event_subscriber>;

}  // namespace ic::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::append_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::committed_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::subscriber_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::snapshot_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::snapshot_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::probe_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::probe_outcome)

namespace ic::actors {

/// The index actor: sole owner of `index_state` once the runtime started.
///   apply(batch)            <- journal actor; applies, tells subscribers and sinks
///   credit()                gives the buffered LFU credit of delivered lookups (which read the index
///                           directly, under the shared side of the index lock)
///   subscribe(subscriber)   registers an observer
///   snapnow()               takes a snapshot now -> snapshot_report once it is written
///   probe(request)          -> probe_outcome (the /probe self-test, not journaled)
using index_actor = caf::typed_actor<
    caf::reacts_to<apply_atom, committed_batch>,
    caf::reacts_to<credit_atom>,
    caf::reacts_to<sub_atom, subscriber_ptr>,
    caf::replies_to<snapnow_atom>::with<snapshot_report>,
    caf::replies_to<probe_atom, probe_request>::with<probe_outcome>>;

/// The journal actor: the single writer.
///   append(msg)  queues an input; a self-sent flush writes everything queued as one group
///   flush()      appends the queue to the journal, hands the batch to the index actor
///   sweep()      queues a TTL sweep record and re-arms the timer
using journal_actor = caf::typed_actor<caf::reacts_to<append_atom, append_msg>,
                                       caf::reacts_to<flush_atom>, caf::reacts_to<sweep_atom>>;

/// The snapshot writer (detached: RocksDB writes block): stores a serialised snapshot, keeps
/// the newest `keep` snapshots, and truncates the journal through the snapshot's sequence.
///   snapwrite(job) -> snapshot_report
using snapshot_actor =
    caf::typed_actor<caf::replies_to<snapwrite_atom, snapshot_job>::with<snapshot_report>>;


}  // namespace ic::actors
