// The runtime's exception policy: an exception escaping a stateful actor's handler aborts
// the process (after logging), so no input is journaled but silently never applied.
#pragma once

#include <cstdlib>
#include <exception>
#include <string>

#include <caf/scheduled_actor.hpp>
#include <spdlog/spdlog.h>

namespace ic::actors {

/// Installs the fail-fast policy of the runtime's stateful actors: an exception escaping a
/// handler would silently kill the actor (later inputs would be journaled but never applied,
/// and reactors waiting for them would hang), so log it and abort; the next start recovers
/// everything acknowledged from the journal.
template <class Self>
inline void fail_fast_on_exceptions(Self* self, const char* name) {
  self->set_exception_handler([name](caf::scheduled_actor*, std::exception_ptr& eptr) -> caf::error {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(eptr);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::critical("{} actor failed: {}; aborting (restart recovers from the journal)", name, what);
    spdlog::default_logger_raw()->flush();
    std::abort();
  });
}

}  // namespace ic::actors
