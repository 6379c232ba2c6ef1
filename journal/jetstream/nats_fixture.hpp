// Test/bench fixture: real nats-server processes on free loopback ports (1 standalone node
// with JetStream, or a 3-node JetStream cluster), each from a config written into a fresh
// temp dir, started and stopped by PID (tests/support/server_process: SIGKILL in its
// destructor, so a failing test never leaks a server).
//
//   std::string why;
//   auto c = nats_cluster::start(3, &why);          // nullptr + why on failure
//   if (!c) FAIL() << why;
//   opts.servers = c->urls();
//   c->kill9(c->index_of(state.leader));  ...  c->restart(i, 10s);
//   c->kill9(c->index_of(c->stream_leader("IC_JOURNAL")));  // the leader, from /jsz
//
// `nats_cluster::binary()` is empty when nats-server is not installed: tests GTEST_SKIP then.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/server_process.hpp"

namespace ic::journal::jetstream::testing {

/// N nats-server processes sharing one temp dir (configs, stores, nothing else).
class nats_cluster {
 public:
  /// Returns the absolute path of nats-server found on PATH, or "" when absent.
  static std::string binary();

  /// Writes configs for `nodes` (1, or 3 for a cluster named "ic") on free loopback ports,
  /// starts every node and waits (≤ `timeout`) until each answers /healthz 200. A node that
  /// exits meanwhile lost a port to another process: up to 3 attempts on fresh ports.
  /// Returns nullptr and sets *error (with the servers' logs) on failure; started nodes
  /// are killed.
  static std::unique_ptr<nats_cluster> start(int nodes, std::string* error,
                                             std::chrono::milliseconds timeout =
                                                 std::chrono::seconds(20));
  /// Kills every node still running (SIGTERM, SIGKILL after 5 s) and removes the temp dir.
  ~nats_cluster();
  nats_cluster(const nats_cluster&) = delete;
  nats_cluster& operator=(const nats_cluster&) = delete;

  /// Number of nodes.
  int size() const { return static_cast<int>(nodes_.size()); }
  /// Client URLs of every node, "nats://127.0.0.1:<port>", node 0 first.
  std::vector<std::string> urls() const;
  /// Client URL of node `i`.
  std::string url(int i) const;
  /// The index of the node whose server_name is `name` ("n1" → 0), or -1.
  int index_of(const std::string& name) const;
  /// The server_name of node `i` ("n1", "n2", ...).
  static std::string name(int i) { return "n" + std::to_string(i + 1); }
  /// True while node `i` runs.
  bool running(int i) const;

  /// kill -9 node `i` (by its PID) and reaps it.
  void kill9(int i);
  /// SIGTERM node `i`, bounded by `timeout` (then SIGKILL); returns its exit code.
  int stop(int i, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Starts node `i` again on its ports and store; waits for /healthz (≤ `timeout`).
  bool restart(int i, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  /// Waits until node `i` answers /healthz 200 (≤ `timeout`); false at once if it exited.
  bool wait_healthy(int i, std::chrono::milliseconds timeout) const;
  /// The server_name of the node leading stream `stream` ("" when no running node reports
  /// one, e.g. during an election), read from the running nodes' /jsz?streams=true.
  std::string stream_leader(const std::string& stream) const;
  /// The server_name of the JetStream meta leader (it places streams and consumers), "" when
  /// no running node reports one; from /jsz.
  std::string meta_leader() const;
  /// Every node's log so far (for failure messages).
  std::string logs() const;

 private:
  struct node {
    int client_port = 0;
    int route_port = 0;
    int http_port = 0;
    std::string config;
    bool alive = false;  ///< started and not stopped by us
    std::unique_ptr<ic::test::server_process> proc;
  };
  nats_cluster() = default;
  // One attempt of start(); *port_lost when a node exited before it was healthy.
  static std::unique_ptr<nats_cluster> try_start(int nodes, std::string* error,
                                                 std::chrono::milliseconds timeout,
                                                 bool* port_lost);
  bool launch(int i);

  std::string dir_;
  std::string binary_;
  std::vector<node> nodes_;
};

}  // namespace ic::journal::jetstream::testing
