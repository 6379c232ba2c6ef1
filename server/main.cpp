// inferencecache-server: parse flags, block signals, run the app until SIGTERM/SIGINT.
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>

#include <absl/synchronization/mutex.h>

#include "server/config.hpp"
#include "server/logging.hpp"
#include "server/server_app.hpp"

int main(int argc, char** argv) {
  auto parsed = ic::server::parse_command_line(argc, argv);
  if (auto* exit = std::get_if<ic::server::early_exit>(&parsed)) {
    if (exit->code == 0) {
      std::cout << exit->message;
    } else {
      std::cerr << "inferencecache-server: " << exit->message << "\n";
    }
    return exit->code;
  }
  const auto& cfg = std::get<ic::server::server_config>(parsed);
  // Debian builds Abseil with mutex deadlock detection on; it cost ~10% of the server's CPU
  // under load (gRPC's mutexes), for a check that only matters when debugging Abseil users.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ic::server::configure_logging(cfg.format, cfg.log_level);
  // Each HTTP port may hold --http-max-connections sockets: make sure the process may open
  // them (plus gRPC and RocksDB files) by lifting the soft descriptor limit toward the hard one.
  rlimit files{};
  const rlim_t want = 4096 + 2 * static_cast<rlim_t>(cfg.http_max_connections);
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < want) {
    files.rlim_cur = files.rlim_max == RLIM_INFINITY ? want : std::min(want, files.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  // Block the shutdown signals before any thread exists, so only sigwait below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  ic::server::server_app app(cfg);
  if (int rc = app.start(); rc != 0) {
    app.stop();
    return rc;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  app.stop();
  return 0;
}
