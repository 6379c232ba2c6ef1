#include "journal/jetstream/nats_fixture.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/http_client.hpp"

namespace ic::journal::jetstream::testing {

namespace {

// `count` distinct free loopback ports: each socket stays bound until all are picked, so
// no two picks collide. They are closed again before the servers start, so another process
// (a client's ephemeral source port, another test's server) can still take one in between:
// nats_cluster::start() sees that server exit and starts over on fresh ports.
std::vector<int> free_ports(std::size_t count) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (std::size_t i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    fds.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      break;
    }
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  if (ports.size() != count) ports.assign(count, 0);
  return ports;
}

}  // namespace

std::string nats_cluster::binary() {
  std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/usr/bin:/usr/local/bin:/usr/local/sbin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/nats-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::unique_ptr<nats_cluster> nats_cluster::start(int nodes, std::string* error,
                                                  std::chrono::milliseconds timeout) {
  // A node that exits while starting has most likely lost one of its ports to another
  // process (its log then says "address already in use"): up to 3 attempts, each on fresh
  // ports.
  constexpr int attempts = 3;
  for (int attempt = 1;; ++attempt) {
    bool port_lost = false;
    auto c = try_start(nodes, error, timeout, &port_lost);
    if (c != nullptr || !port_lost || attempt == attempts) return c;
  }
}

std::unique_ptr<nats_cluster> nats_cluster::try_start(int nodes, std::string* error,
                                                      std::chrono::milliseconds timeout,
                                                      bool* port_lost) {
  std::unique_ptr<nats_cluster> c(new nats_cluster());
  c->binary_ = binary();
  if (c->binary_.empty()) {
    *error = "nats-server not installed";
    return nullptr;
  }
  c->dir_ = ic::test::make_temp_dir("ic_nats");
  if (c->dir_.empty() || nodes < 1) {
    *error = "cannot create a temp dir (or nodes < 1)";
    return nullptr;
  }
  c->nodes_.resize(static_cast<std::size_t>(nodes));
  const std::vector<int> ports = free_ports(3 * c->nodes_.size());
  for (std::size_t i = 0; i < c->nodes_.size(); ++i) {
    c->nodes_[i].client_port = ports[3 * i];
    c->nodes_[i].route_port = ports[3 * i + 1];
    c->nodes_[i].http_port = ports[3 * i + 2];
  }
  if (ports.front() == 0) {
    *error = "cannot bind a loopback port";
    return nullptr;
  }
  for (int i = 0; i < nodes; ++i) {
    auto& n = c->nodes_[static_cast<std::size_t>(i)];
    std::ostringstream conf;
    conf << "server_name: " << name(i) << "\n"
         << "listen: 127.0.0.1:" << n.client_port << "\n"
         << "http: 127.0.0.1:" << n.http_port << "\n"
         << "max_payload: 8MB\n"  // spec §3.2: one group commit per message
         << "jetstream {\n  store_dir: \"" << c->dir_ << "/" << name(i) << "\"\n"
         << "  max_memory_store: 64MB\n  max_file_store: 2GB\n}\n";
    if (nodes > 1) {
      conf << "cluster {\n  name: ic\n  listen: 127.0.0.1:" << n.route_port
           << "\n  no_advertise: true\n  routes: [\n";
      for (int j = 0; j < nodes; ++j) {
        if (j != i) {
          conf << "    nats-route://127.0.0.1:"
               << c->nodes_[static_cast<std::size_t>(j)].route_port << "\n";
        }
      }
      conf << "  ]\n}\n";
    }
    n.config = c->dir_ + "/" + name(i) + ".conf";
    std::ofstream(n.config) << conf.str();
  }
  for (int i = 0; i < nodes; ++i) {
    if (!c->launch(i)) {
      *error = "cannot start " + name(i) + "\n" + c->logs();
      return nullptr;
    }
  }
  for (int i = 0; i < nodes; ++i) {
    if (!c->wait_healthy(i, timeout)) {
      const auto& p = c->nodes_[static_cast<std::size_t>(i)].proc;
      *port_lost = p != nullptr && p->has_exited();
      *error = name(i) + (*port_lost ? " exited while starting\n"
                                     : " not healthy within " + std::to_string(timeout.count()) +
                                           " ms\n") +
               c->logs();
      return nullptr;
    }
  }
  return c;
}

nats_cluster::~nats_cluster() {
  for (int i = 0; i < size(); ++i) {
    if (running(i)) stop(i, std::chrono::seconds(5));
  }
  ic::test::remove_tree(dir_);
}

bool nats_cluster::launch(int i) {
  auto& n = nodes_[static_cast<std::size_t>(i)];
  n.proc = ic::test::server_process::start(binary_, {"-c", n.config});
  n.alive = n.proc != nullptr;
  return n.alive;
}

std::vector<std::string> nats_cluster::urls() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(url(i));
  return out;
}

std::string nats_cluster::url(int i) const {
  return "nats://127.0.0.1:" + std::to_string(nodes_[static_cast<std::size_t>(i)].client_port);
}

int nats_cluster::index_of(const std::string& server_name) const {
  for (int i = 0; i < size(); ++i) {
    if (name(i) == server_name) return i;
  }
  return -1;
}

bool nats_cluster::running(int i) const {
  return nodes_[static_cast<std::size_t>(i)].alive;
}

void nats_cluster::kill9(int i) { stop(i, std::chrono::milliseconds(0)); }

int nats_cluster::stop(int i, std::chrono::milliseconds timeout) {
  auto& n = nodes_[static_cast<std::size_t>(i)];
  auto& p = n.proc;
  if (p == nullptr || !n.alive) return -1;
  n.alive = false;
  int code = timeout.count() == 0 ? p->terminate(9, std::chrono::seconds(5))
                                  : p->terminate(15, timeout);
  return code;
}

bool nats_cluster::restart(int i, std::chrono::milliseconds timeout) {
  auto& p = nodes_[static_cast<std::size_t>(i)].proc;
  if (p != nullptr && running(i)) return false;
  p.reset();
  return launch(i) && wait_healthy(i, timeout);
}

bool nats_cluster::wait_healthy(int i, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int port = nodes_[static_cast<std::size_t>(i)].http_port;
  const auto& proc = nodes_[static_cast<std::size_t>(i)].proc;
  do {
    if (ic::test::http_call(port, "GET", "/healthz").status == 200) return true;
    if (proc == nullptr || proc->has_exited()) return false;  // e.g. a port was taken
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

std::string nats_cluster::stream_leader(const std::string& stream) const {
  for (int i = 0; i < size(); ++i) {
    if (!running(i)) continue;
    const auto r = ic::test::http_call(nodes_[static_cast<std::size_t>(i)].http_port, "GET",
                                       "/jsz?streams=true");
    const auto j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (r.status != 200 || !j.is_object() || !j.contains("account_details")) continue;
    for (const auto& account : j["account_details"]) {
      if (!account.contains("stream_detail")) continue;
      for (const auto& s : account["stream_detail"]) {
        if (s.value("name", "") != stream || !s.contains("cluster")) continue;
        const std::string leader = s["cluster"].value("leader", "");
        if (!leader.empty()) return leader;
      }
    }
  }
  return {};
}

std::string nats_cluster::meta_leader() const {
  for (int i = 0; i < size(); ++i) {
    if (!running(i)) continue;
    const auto r =
        ic::test::http_call(nodes_[static_cast<std::size_t>(i)].http_port, "GET", "/jsz");
    const auto j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (r.status != 200 || !j.is_object() || !j.contains("meta_cluster")) continue;
    const std::string leader = j["meta_cluster"].value("leader", "");
    if (!leader.empty()) return leader;
  }
  return {};
}

std::string nats_cluster::logs() const {
  std::string out;
  for (int i = 0; i < size(); ++i) {
    const auto& p = nodes_[static_cast<std::size_t>(i)].proc;
    if (p != nullptr) out += "---- " + name(i) + " ----\n" + p->logs();
  }
  return out;
}

}  // namespace ic::journal::jetstream::testing
