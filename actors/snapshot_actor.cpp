// The snapshot writer: writes server snapshots (then prunes and truncates the journal) and
// runs frozen reads, on its own thread, at quiescent points the coordinator sets up.
#include "actors/spawn.hpp"

#include <caf/all.hpp>

#include "state/snapshot_io.hpp"

namespace ic::actors {
namespace {

using steady = std::chrono::steady_clock;

snapshot_actor::behavior_type snapshot_actor_impl(snapshot_actor::pointer, journal::record_log* log,
                                                  std::size_t keep) {
  return {
      [=](snapwrite_atom, snapshot_job& job) -> snapshot_report {
        const auto t0 = steady::now();
        snapshot_report r;
        r.covering_seq = job.covering_seq;
        auto fail = [&](const journal::status& st) {
          r.ok = false;
          r.error = st.to_string();
          return r;
        };
        auto writer = log->begin_snapshot(job.covering_seq);
        if (!writer.ok()) return fail(writer.status());
        journal::status add_error = journal::status::success();
        const bool ok = state::write_state_snapshot(*job.view.policies, job.view.stores, job.effective_time, job.view.list(), [&](std::string_view c) {
          r.bytes += c.size();
          add_error = writer->add_chunk(c);
          return add_error.ok();
        });
        if (!ok) return fail(add_error);
        auto info = writer->finish();
        if (!info.ok()) return fail(info.status());
        if (auto pruned = log->prune_snapshots(keep); !pruned.ok()) return fail(pruned.status());
        if (auto st = log->truncate_through(job.covering_seq); !st.ok()) return fail(st);
        r.truncation = log->replicated()
                           ? "stream not purged by a local snapshot (the snapshotter lease holder uploads it as the shared snapshot, then purges)"
                           : "journal truncated through " + std::to_string(log->truncated_through());
        r.ok = true;
        r.seconds = std::chrono::duration<double>(steady::now() - t0).count();
        return r;
      },
      [](read_atom, read_job& job) -> bool {
        job.run(job.view);
        return true;
      },
  };
}

}  // namespace

snapshot_actor spawn_snapshot_writer(caf::actor_system& sys, journal::record_log* log,
                                      std::size_t keep) {
  return sys.spawn<caf::detached>(snapshot_actor_impl, log, keep);
}

}  // namespace ic::actors
