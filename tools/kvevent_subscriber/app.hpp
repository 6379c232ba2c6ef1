// The composition root of inferencecache-kvevent-subscriber: builds the components from a
// validated config, runs the threads of spec §4.3 and shuts them down in reverse order.
//
// Threads: signals (sigwait), ZMQ receiver, core, sender, stats, HTTP (civetweb). Shutdown
// on SIGTERM/SIGINT (A24): stop reading ZMQ, let the core finish what is queued, flush the
// pending adds, give the sender `--shutdown-timeout` to drain the log, stop stats and HTTP,
// exit 0. A second signal exits at once (code 1).
#pragma once

#include "tools/kvevent_subscriber/config.hpp"

namespace ic::kvevent {

/// Runs the subscriber until a signal; returns the process exit code.
int run_subscriber(const config& cfg);

}  // namespace ic::kvevent
