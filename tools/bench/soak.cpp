#include "tools/bench/soak.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "tools/bench/runner.hpp"
#include "tools/bench/server_child.hpp"
#include "tools/bench/stats.hpp"
#include "tools/common/codec.hpp"
#include "tools/common/http_client.hpp"

namespace ic::tools::bench {
namespace {

using steady = std::chrono::steady_clock;
using seconds_d = std::chrono::duration<double>;

int count_fds(int pid) {
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (auto* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

/// Bytes allocated to the files under `dir` (as du counts them: RocksDB preallocates its WAL).
std::uint64_t dir_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      n += static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
  return n;
}

/// The server the workers talk to now; replaced on every restart.
struct endpoint {
  std::shared_ptr<grpc::Channel> channel;
  host_port admin;
  int epoch = 0;
};

/// Everything the soak's threads share.
class soak_run {
 public:
  soak_run(const soak_options& o, std::ostream& out)
      : o_(o), out_(out), w_(make_shape(o)), model_(pool_size(o)), rng_(o.seed) {}

  soak_report run();

 private:
  static workload_shape make_shape(const soak_options& o) {
    workload_shape s;
    s.tenants = o.tenants;
    s.replicas = o.replicas;
    s.chain_blocks = o.chain_blocks;
    s.system_blocks = 0;  // chains share no block: each chain's answer depends on it alone
    s.seed = o.seed;
    s.model = "soak-model";
    return s;
  }
  static std::uint64_t pool_size(const soak_options& o) {
    return o.chains > 0 ? o.chains
                        : static_cast<std::uint64_t>(o.tenants) * o.replicas * kChainsPerGroup;
  }
  int placement_of(std::uint64_t c) const { return w_.tenant_of(c) + o_.tenants * w_.replica_of(c); }
  int whole_tokens() const { return o_.chain_blocks * w_.shape().block_tokens; }

  endpoint current() {
    std::lock_guard<std::mutex> lock(ep_mu_);
    return ep_;
  }
  /// A failed call is expected when the server it went to is being restarted (or the run ends).
  bool expected_failure(int epoch) {
    return down_ || stop_ || current().epoch != epoch;
  }
  void problem(const std::string& what) {
    ++errors_;
    std::lock_guard<std::mutex> lock(prob_mu_);
    if (problems_.size() < 20) problems_.push_back(what.substr(0, 2000));
    out_ << "  error: " << what << "\n" << std::flush;
  }
  void failed_call(int epoch, const std::string& what) {
    if (expected_failure(epoch)) {
      ++cut_;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } else {
      problem(what);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  /// An Ack that said no: expected while the soak stops the server or the journal is full,
  /// else an error.
  void refused_ack(int epoch, const v1::Ack& ack, const std::string& op) {
    if (ack.reason_code() == "SHUTTING_DOWN" && expected_failure(epoch)) {
      ++cut_;  // the server is being stopped by the soak
    } else if (filling_ && ack.reason_code() == "JOURNAL_UNAVAILABLE") {
      ++refused_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } else {
      problem(op + " refused: " + ack.reason_code());
    }
  }
  void sleep_while_running(double s) {
    const auto until = steady::now() + seconds_d(s);
    while (!stop_ && steady::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  void producer(int p);
  bool report(const endpoint& ep, const std::vector<std::uint64_t>& chains);
  bool publish(const endpoint& ep, v1::CacheEvent::Type type, std::uint64_t chain,
               const std::vector<std::uint64_t>& chains);
  void checker();
  void check_one(const endpoint& ep, v1::InferenceCache::Stub& stub, std::uint64_t chain,
                 const std::string& when);
  void sweep(const std::string& when);
  void policy_pusher();
  template <class Msg, class Open>
  void subscriber(std::uint64_t seed, double min_life, double max_life,
                  std::atomic<std::uint64_t>& count, const char* what, Open open);
  void events_subscriber();
  void metrics_subscriber();
  void finish_subscription(int epoch, const grpc::Status& st, const std::string& what);
  void journal_fill();
  bool start_server();
  bool start_server_retrying();
  void restart(int sig);
  void recover_from_crash();
  soak_row row(int minute);

  const soak_options& o_;
  std::ostream& out_;
  workload w_;
  soak_model model_;
  std::mt19937_64 rng_;  // the controller's

  steady::time_point end_;  // the run's end
  std::mutex ep_mu_;
  endpoint ep_;
  std::unique_ptr<server_child> server_;
  std::vector<std::string> args_;
  std::string root_, data_dir_;
  bool mounted_ = false;

  std::atomic<bool> stop_{false}, down_{false}, filling_{false};
  std::atomic<std::uint64_t> acked_{0}, lookups_{0}, errors_{0}, lost_{0}, wrong_{0},
      undecidable_{0}, refused_{0}, cut_{0}, events_{0}, metrics_{0}, subs_{0}, pushes_{0};
  std::atomic<std::int64_t> last_accept_ns_{0};
  std::mutex prob_mu_;
  std::vector<std::string> problems_;
  std::string fill_note_ = "not run";
  int term_restarts_ = 0, kill_restarts_ = 0, crashes_ = 0;
};

bool soak_run::report(const endpoint& ep, const std::vector<std::uint64_t>& chains) {
  auto stub = v1::InferenceCache::NewStub(ep.channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::Ack ack;
  auto writer = stub->ReportCacheState(&ctx, &ack);
  bool ok = true;
  // Two messages per stream, so a stream carries more than one write.
  const std::size_t half = (chains.size() + 1) / 2;
  for (std::size_t from = 0; from < chains.size() && ok; from += half) {
    updates_by_place by_place;
    for (std::size_t i = from; i < std::min(chains.size(), from + half); ++i)
      add_chain_report(w_, chains[i], o_.chain_blocks, &by_place);
    for (auto& [key, u] : by_place)
      if (!writer->Write(u)) {
        ok = false;
        break;
      }
  }
  if (ok) writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) {
    failed_call(ep.epoch, "ReportCacheState: " + st.error_message());
    return false;
  }
  if (!ack.accepted()) {
    refused_ack(ep.epoch, ack, "ReportCacheState");
    return false;
  }
  acked_ += chains.size();
  last_accept_ns_ = steady::now().time_since_epoch().count();
  return true;
}

bool soak_run::publish(const endpoint& ep, v1::CacheEvent::Type type, std::uint64_t chain,
                       const std::vector<std::uint64_t>& hashes) {
  auto stub = v1::InferenceCache::NewStub(ep.channel);
  auto one = [&](const std::string& hash) {
    v1::CacheEvent ev;
    ev.set_type(type);
    ev.set_replica_id(w_.replica_name(w_.replica_of(chain)));
    ev.set_tenant_id(w_.tenant_name(w_.tenant_of(chain)));
    ev.set_model_id(w_.shape().model);
    if (!hash.empty()) ev.set_prefix_hash(hash);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::Ack ack;
    grpc::Status st = stub->PublishEvent(&ctx, ev, &ack);
    if (!st.ok()) {
      failed_call(ep.epoch, "PublishEvent: " + st.error_message());
      return false;
    }
    if (!ack.accepted()) {
      refused_ack(ep.epoch, ack, "PublishEvent");
      return false;
    }
    ++acked_;
    return true;
  };
  if (type == v1::CacheEvent::ALL_CLEARED) return one("");
  for (auto h : hashes)
    if (!one(be64(h))) return false;
  return true;
}

void soak_run::producer(int p) {
  std::vector<std::uint64_t> owned;
  for (std::uint64_t c = 0; c < model_.size(); ++c)
    if (placement_of(c) % o_.producers == p) owned.push_back(c);
  if (owned.empty()) return;
  std::mt19937_64 rng(o_.seed * 1000003 + static_cast<std::uint64_t>(p));
  std::uniform_real_distribution<double> u01(0, 1);
  const double rate = o_.ingest_rate_blocks_per_s / o_.producers;
  const auto start = steady::now();
  auto next_clear = start + seconds_d(o_.clear_every_s * (0.5 + u01(rng)));
  std::uint64_t blocks = 0;
  std::vector<std::uint64_t> hashes;
  while (!stop_) {
    const endpoint ep = current();
    if (down_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (steady::now() >= next_clear) {
      next_clear += seconds_d(o_.clear_every_s);
      const int pl = placement_of(owned[rng() % owned.size()]);
      std::vector<std::uint64_t> chains;
      for (auto c : owned)
        if (placement_of(c) == pl) chains.push_back(c);
      model_.begin(chains);
      const bool ok = publish(ep, v1::CacheEvent::ALL_CLEARED, chains.front(), {});
      model_.end(chains, ok, chain_state::absent);
    } else if (u01(rng) < o_.evict_share) {
      const std::uint64_t c = owned[rng() % owned.size()];
      w_.chain(c, o_.chain_blocks, &hashes);
      model_.begin({c});
      const bool ok = publish(ep, v1::CacheEvent::PREFIX_EVICTED, c, hashes);
      model_.end({c}, ok, chain_state::absent);
      blocks += hashes.size();
    } else {
      std::vector<std::uint64_t> chains;
      for (int i = 0; i < 8; ++i) {
        const std::uint64_t c = owned[rng() % owned.size()];
        if (std::find(chains.begin(), chains.end(), c) == chains.end()) chains.push_back(c);
      }
      model_.begin(chains);
      const bool ok = report(ep, chains);
      model_.end(chains, ok, chain_state::held);
      blocks += chains.size() * static_cast<std::uint64_t>(o_.chain_blocks);
    }
    const auto due = start + seconds_d(static_cast<double>(blocks) / rate);
    while (!stop_ && steady::now() < due) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void soak_run::check_one(const endpoint& ep, v1::InferenceCache::Stub& stub, std::uint64_t chain,
                         const std::string& when) {
  const chain_view before = model_.read(chain);
  v1::LookupRouteRequest req;
  whole_chain_lookup(w_, chain, &req);
  v1::LookupRouteResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status st = stub.LookupRoute(&ctx, req, &resp);
  const chain_view after = model_.read(chain);
  if (!st.ok()) {
    failed_call(ep.epoch, "LookupRoute: " + st.error_message());
    return;
  }
  ++lookups_;
  if (!decidable(before, after)) {
    ++undecidable_;
    return;
  }
  answer_view a;
  a.rpc_ok = true;
  a.reason = resp.reason_code();
  for (const auto& r : resp.replica_scores()) a.replicas.emplace_back(r.replica_id(), r.matched_tokens());
  std::string why;
  const verdict v = check_answer(before.state, w_.replica_name(w_.replica_of(chain)), whole_tokens(),
                                 a, &why);
  if (v == verdict::lost) {
    ++lost_;
    problem(when + ": chain " + std::to_string(chain) + " " + why);
  } else if (v == verdict::wrong) {
    ++wrong_;
    problem(when + ": chain " + std::to_string(chain) + " " + why);
  }
}

void soak_run::checker() {
  std::mt19937_64 rng(o_.seed * 7919 + 1);
  const auto start = steady::now();
  std::uint64_t n = 0;
  while (!stop_) {
    const endpoint ep = current();
    if (!down_) {
      auto stub = v1::InferenceCache::NewStub(ep.channel);
      check_one(ep, *stub, rng() % model_.size(), "lookup");
    }
    ++n;
    const auto due = start + seconds_d(static_cast<double>(n) / o_.lookup_rate_per_s);
    while (!stop_ && steady::now() < due) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void soak_run::sweep(const std::string& when) {
  const endpoint ep = current();
  auto stub = v1::InferenceCache::NewStub(ep.channel);
  const auto lost_before = lost_.load();
  for (std::uint64_t c = 0; c < model_.size(); ++c) check_one(ep, *stub, c, when);
  const auto n = model_.count();
  out_ << "  " << when << ": looked up all " << model_.size() << " chains (model: " << n.held
       << " held, " << n.absent << " absent, " << n.unknown << " unknown); lost "
       << lost_.load() - lost_before << "\n" << std::flush;
}

void soak_run::policy_pusher() {
  std::mt19937_64 rng(o_.seed * 31 + 7);
  while (!stop_) {
    sleep_while_running(o_.policy_every_s);
    if (stop_) break;
    if (down_) continue;
    const endpoint ep = current();
    nlohmann::json pols = nlohmann::json::array();
    static const int kMinMatched[] = {0, 64, 128};
    for (int t = 0; t < o_.tenants; ++t)
      pols.push_back({{"namespace", w_.tenant_name(t)},
                      {"evictionTTL", 86400000000000LL},  // 24 h: nothing expires in the run
                      {"minimumPrefixTokens", 0},
                      {"minimumMatchedTokens", kMinMatched[rng() % 3]},
                      {"routingFloorScore", 0.0},
                      {"lookupTimeoutMs", 0},
                      {"affinityRouting", (rng() & 1) != 0},
                      {"eviction", (rng() & 1) != 0 ? "lru" : "lfu"},
                      {"strategy",
                       {{"enableChainMatching", true},
                        {"requireChain", false},
                        {"enableTenantHot", false}}}});
    nlohmann::json body{{"version", 7}, {"policies", pols}};  // the /policy schema version
    http_request req{"POST", "/policy", body.dump(), {{"Content-Type", "application/json"}}};
    auto res = http_call(ep.admin, req, 5.0);
    if (!res.error.empty()) {
      failed_call(ep.epoch, "POST /policy: " + res.error);
    } else if (filling_ && res.status == 503 &&
               res.body.find("JOURNAL_UNAVAILABLE") != std::string::npos) {
      ++refused_;  // a policy change is journaled too: refused while the disk is full
    } else if (res.status != 204 && res.status != 200) {
      problem("POST /policy answered " + std::to_string(res.status) + ": " + res.body);
    } else {
      ++pushes_;
    }
  }
}

void soak_run::finish_subscription(int epoch, const grpc::Status& st, const std::string& what) {
  ++subs_;
  const auto code = st.error_code();
  if (code == grpc::StatusCode::OK || code == grpc::StatusCode::DEADLINE_EXCEEDED) return;
  failed_call(epoch, what + ": " + st.error_message());
}

// One subscription after another, each living a random time in [min_life, max_life] s, on
// whichever server is up; counts what arrives in `count`. `open(stub, ctx, rng)` starts the
// call and returns its reader.
template <class Msg, class Open>
void soak_run::subscriber(std::uint64_t seed, double min_life, double max_life,
                          std::atomic<std::uint64_t>& count, const char* what, Open open) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> life(min_life, max_life), pause(0.1, 2.0);
  while (!stop_) {
    if (down_) {
      sleep_while_running(0.05);
      continue;
    }
    const endpoint ep = current();
    auto stub = v1::InferenceCache::NewStub(ep.channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<long>(life(rng) * 1000)));
    auto reader = open(*stub, ctx, rng);
    Msg m;
    while (reader->Read(&m)) {
      ++count;
      if (stop_) ctx.TryCancel();
    }
    grpc::Status st = reader->Finish();
    if (!stop_) finish_subscription(ep.epoch, st, what);
    sleep_while_running(pause(rng));
  }
}

void soak_run::events_subscriber() {
  subscriber<v1::CacheEvent>(o_.seed * 131 + 3, 1.0, 8.0, events_, "StreamCacheEvents",
                             [this](v1::InferenceCache::Stub& stub, grpc::ClientContext& ctx,
                                    std::mt19937_64& rng) {
                               v1::StreamEventsRequest req;
                               req.set_tenant_id(
                                   w_.tenant_name(static_cast<int>(rng() % o_.tenants)));
                               req.set_model_id(w_.shape().model);
                               return stub.StreamCacheEvents(&ctx, req);
                             });
}

void soak_run::metrics_subscriber() {
  subscriber<v1::Metric>(o_.seed * 137 + 5, 2.0, 10.0, metrics_, "StreamMetrics",
                         [](v1::InferenceCache::Stub& stub, grpc::ClientContext& ctx,
                            std::mt19937_64&) {
                           return stub.StreamMetrics(&ctx, v1::StreamMetricsRequest());
                         });
}

void soak_run::journal_fill() {
  const std::string ballast = root_ + "/ballast";
  const std::uint64_t refused0 = refused_;
  filling_ = true;
  const auto t0 = steady::now();
  int fd = ::open(ballast.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::uint64_t written = 0;
  if (fd >= 0) {
    std::string chunk(1 << 16, 'b');
    while (true) {
      ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n <= 0) break;
      written += static_cast<std::uint64_t>(n);
    }
    ::close(fd);
  }
  const std::uint64_t journal = dir_bytes(data_dir_);
  out_ << "  journal fill: tmpfs full (ballast " << written / (1 << 20) << " MiB, data dir "
       << journal / (1 << 20) << " MiB)\n" << std::flush;
  double first_refusal = -1;
  while (!stop_ && seconds_d(steady::now() - t0).count() < o_.fill_hold_max_s) {
    if (refused_ > refused0) {
      first_refusal = seconds_d(steady::now() - t0).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Hold a little longer so several writers see the full disk, then drain.
  if (first_refusal >= 0) sleep_while_running(std::min(5.0, o_.fill_hold_max_s));
  ::unlink(ballast.c_str());
  const auto drained = steady::now();
  double resumed = -1;
  while (!stop_ && seconds_d(steady::now() - drained).count() < 60) {
    if (last_accept_ns_ > drained.time_since_epoch().count()) {
      resumed = seconds_d(steady::now() - drained).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sleep_while_running(1.0);  // Acks of streams written before the drain may still say no
  filling_ = false;
  std::ostringstream s;
  s << "tmpfs of " << o_.journal_fs_bytes / (1 << 20) << " MiB filled with a " << written / (1 << 20)
    << " MiB ballast (data dir " << journal / (1 << 20) << " MiB); ";
  if (first_refusal >= 0)
    s << "first JOURNAL_UNAVAILABLE after " << first_refusal << " s, ";
  else
    s << "no update refused within " << o_.fill_hold_max_s << " s, ";
  s << refused_ - refused0 << " updates refused; ";
  if (resumed >= 0)
    s << "accepting again " << resumed << " s after the drain";
  else if (!stop_)
    problem("the server did not accept an update within 60 s after the journal drained");
  fill_note_ = s.str();
  out_ << "  journal fill: " << fill_note_ << "\n" << std::flush;
}

bool soak_run::start_server() {
  std::string err;
  auto s = server_child::start(o_.server_binary, args_, &err);
  if (!s) {
    problem("cannot start the server: " + err);
    return false;
  }
  if (s->wait_for_line("\"ready\"", std::chrono::seconds(120)).empty()) {
    problem("the server did not get ready: " + s->tail());
    return false;
  }
  std::string e2;
  auto admin = parse_host_port(s->admin_addr(), &e2);
  if (!admin) {
    problem("no admin address in the startup line: " + e2);
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(ep_mu_);
    ep_.channel = grpc::CreateChannel(s->grpc_addr(), grpc::InsecureChannelCredentials());
    ep_.admin = *admin;
    ++ep_.epoch;
  }
  server_ = std::move(s);
  return true;
}

/// A start that fails (each failure an error) is tried again every 2 s until the run's end:
/// a server that cannot start while the disk is full may start once it drained.
bool soak_run::start_server_retrying() {
  while (true) {
    if (start_server()) return true;
    if (steady::now() >= end_) return false;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

void soak_run::restart(int sig) {
  const bool term = sig == SIGTERM;
  if (server_->poll_exit() != -2) return recover_from_crash();
  down_ = true;
  const auto t0 = steady::now();
  const int code = server_->stop(sig, std::chrono::seconds(60));
  const double stop_s = seconds_d(steady::now() - t0).count();
  if (code != (term ? 0 : 128 + SIGKILL))
    problem(std::string(term ? "SIGTERM" : "SIGKILL") + " stop ended with exit code " +
            std::to_string(code) + ": " + server_->tail());
  if (term && stop_s >= 5.0) {
    // The server's grace for owed answers is 5 s: a stop that long left a call unanswered.
    problem("SIGTERM stop took " + std::to_string(stop_s) + " s (an answer was never given): " +
            server_->tail(8));
  } else if (stop_s > 2) {
    out_ << "  slow stop (" << stop_s << " s); the server's last lines:\n" << server_->tail(8);
  }
  server_.reset();
  const auto t1 = steady::now();
  const bool ok = start_server_retrying();
  const double ready_s = seconds_d(steady::now() - t1).count();
  down_ = false;
  (term ? term_restarts_ : kill_restarts_)++;
  out_ << "  " << (term ? "SIGTERM" : "SIGKILL") << " restart: stopped in " << stop_s
       << " s (exit " << code << "), ready again after " << ready_s << " s\n" << std::flush;
  if (ok) sweep(term ? "after SIGTERM restart" : "after SIGKILL restart");
}

void soak_run::recover_from_crash() {
  down_ = true;
  ++crashes_;
  problem("the server exited by itself (exit " + std::to_string(server_->poll_exit()) +
          "): " + server_->tail(o_.crash_tail_lines));
  server_.reset();
  const bool ok = start_server_retrying();
  down_ = false;
  if (ok) sweep("after the server died");
}

soak_row soak_run::row(int minute) {
  soak_row r;
  r.minute = minute;
  r.server_pid = server_ ? server_->pid() : 0;
  if (r.server_pid > 0) {
    r.rss_bytes = read_rss_bytes(r.server_pid);
    r.open_fds = count_fds(r.server_pid);
  }
  r.journal_bytes = dir_bytes(data_dir_);
  r.acked = acked_;
  r.lookups = lookups_;
  r.errors = errors_;
  r.lost = lost_;
  return r;
}

soak_report soak_run::run() {
  soak_report rep;
  char tmpl[] = "/tmp/ic_soak_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    rep.verdict = "cannot create a temporary dir";
    return rep;
  }
  root_ = tmpl;
  if (o_.journal_fs_bytes > 0) {
    const std::string opts = "size=" + std::to_string(o_.journal_fs_bytes) + ",mode=0700";
    if (::mount("tmpfs", root_.c_str(), "tmpfs", 0, opts.c_str()) == 0) {
      mounted_ = true;
    } else {
      fill_note_ = std::string("skipped: mounting a tmpfs failed (") + std::strerror(errno) +
                   "; needs root or CAP_SYS_ADMIN); the data dir is a plain directory";
    }
  } else {
    fill_note_ = "skipped (--journal-fs-mb=0)";
  }
  data_dir_ = root_ + "/data";
  std::filesystem::create_directories(data_dir_);
  args_ = {"--insecure-disable-auth", "--data-dir=" + data_dir_, "--grpc-bind-address=127.0.0.1:0",
           "--http-bind-address=127.0.0.1:0", "--snapshot-bind-address=127.0.0.1:0",
           "--max-index-entries=0", "--default-ttl=24h", "--metrics-stream-interval=1s",
           "--snapshot-interval=" + std::to_string(static_cast<long>(o_.snapshot_every_s * 1000)) + "ms",
           "--log-level=warn"};
  // A --server-arg replaces the soak's default for the same flag (the server refuses twice).
  args_.erase(std::remove_if(args_.begin(), args_.end(),
                             [&](const std::string& d) {
                               const auto eq = d.find('=');
                               if (eq == std::string::npos) return false;
                               const std::string flag = d.substr(0, eq + 1);
                               return std::any_of(o_.server_args.begin(), o_.server_args.end(),
                                                  [&](const std::string& a) {
                                                    return a.rfind(flag, 0) == 0;
                                                  });
                             }),
              args_.end());
  args_.insert(args_.end(), o_.server_args.begin(), o_.server_args.end());
  out_ << "soak: " << o_.duration_s << " s, pool " << model_.size() << " chains x "
       << o_.chain_blocks << " blocks, " << o_.producers << " producers at "
       << o_.ingest_rate_blocks_per_s << " blocks/s, " << o_.lookup_rate_per_s
       << " lookups/s, restarts every " << o_.restart_every_s << " s, data dir " << data_dir_
       << (mounted_ ? " (tmpfs)" : "") << "\n" << std::flush;

  end_ = steady::now();  // the first start is not retried
  if (start_server()) {
    std::vector<std::thread> threads;
    for (int p = 0; p < o_.producers; ++p) threads.emplace_back([this, p] { producer(p); });
    threads.emplace_back([this] { checker(); });
    threads.emplace_back([this] { policy_pusher(); });
    threads.emplace_back([this] { events_subscriber(); });
    threads.emplace_back([this] { metrics_subscriber(); });
    std::thread filler;
    const auto t0 = steady::now();
    end_ = t0 + std::chrono::duration_cast<steady::duration>(seconds_d(o_.duration_s));
    auto at = [&](double s) { return t0 + seconds_d(s); };
    const double P = o_.restart_every_s;
    double next_term = P / 3, next_kill = 2 * P / 3, next_row = 60;
    const double fill_at = o_.fill_at_s >= 0 ? o_.fill_at_s : P / 2;
    bool fill_started = !mounted_;
    int minute = 0;
    out_ << table_header() << "\n" << std::flush;
    while (steady::now() < at(o_.duration_s)) {
      const double now = seconds_d(steady::now() - t0).count();
      if (!fill_started && now >= fill_at && fill_at < o_.duration_s) {
        fill_started = true;
        filler = std::thread([this] { journal_fill(); });
      }
      if (now >= next_term && next_term < o_.duration_s) {
        if (filler.joinable()) filler.join();
        restart(SIGTERM);
        next_term += P;
      } else if (now >= next_kill && next_kill < o_.duration_s) {
        if (filler.joinable()) filler.join();
        restart(SIGKILL);
        next_kill += P;
      }
      if (server_ && server_->poll_exit() != -2) recover_from_crash();
      if (!server_) break;  // a restart failed: the error is counted
      if (seconds_d(steady::now() - t0).count() >= next_row) {
        rep.rows.push_back(row(++minute));
        out_ << table_line(rep.rows.back()) << "\n" << std::flush;
        next_row += 60;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (filler.joinable()) filler.join();
    stop_ = true;
    for (auto& t : threads) t.join();
    if (server_) {
      stop_ = false;  // the final sweep counts failures as errors
      sweep("final check");
      stop_ = true;
      rep.last = row(minute + 1);
      rep.rows.push_back(rep.last);
      out_ << table_line(rep.last) << "  (end)\n";
      const int code = server_->stop(SIGTERM, std::chrono::seconds(60));
      if (code != 0) problem("the final SIGTERM ended with exit code " + std::to_string(code));
      server_.reset();
    }
  }
  rep.last.errors = errors_;
  rep.last.lost = lost_;
  rep.last.acked = acked_;
  rep.last.lookups = lookups_;
  rep.wrong = wrong_;
  rep.undecidable = undecidable_;
  rep.refused = refused_;
  rep.cut = cut_;
  rep.events_received = events_;
  rep.metrics_received = metrics_;
  rep.subscriptions = subs_;
  rep.policy_pushes = pushes_;
  rep.term_restarts = term_restarts_;
  rep.kill_restarts = kill_restarts_;
  rep.crashes = crashes_;
  rep.fill = fill_note_;
  rep.problems = problems_;
  rep.rss = rss_growth_after(rep.rows, o_.warmup_minutes);
  rep.verdict = soak_verdict(rep.last, rep.wrong, rep.rss, o_.max_rss_growth);
  if (rep.last.acked == 0) rep.verdict += (rep.verdict.empty() ? "" : "; ") + std::string("no update acknowledged");
  if (rep.events_received == 0 && o_.duration_s >= 10)
    rep.verdict += (rep.verdict.empty() ? "" : "; ") + std::string("no StreamCacheEvents event received");
  if (rep.metrics_received == 0 && o_.duration_s >= 10)
    rep.verdict += (rep.verdict.empty() ? "" : "; ") + std::string("no StreamMetrics sample received");
  if (!o_.markdown_file.empty()) {
    std::ofstream md(o_.markdown_file);
    md << markdown_header() << "\n";
    for (const auto& r : rep.rows) md << markdown_line(r) << "\n";
  }
  if (mounted_) ::umount2(root_.c_str(), MNT_DETACH);
  std::filesystem::remove_all(root_);
  return rep;
}

}  // namespace

nlohmann::json soak_report::to_json() const {
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : rows)
    rs.push_back({{"minute", r.minute}, {"server_pid", r.server_pid}, {"rss_bytes", r.rss_bytes},
                  {"open_fds", r.open_fds}, {"journal_bytes", r.journal_bytes}, {"acked", r.acked},
                  {"lookups", r.lookups}, {"errors", r.errors}, {"lost", r.lost}});
  return {{"rows", rs},
          {"acked", last.acked},
          {"lookups", last.lookups},
          {"errors", last.errors},
          {"lost", last.lost},
          {"wrong", wrong},
          {"undecidable", undecidable},
          {"refused_while_full", refused},
          {"cut_by_restart", cut},
          {"events_received", events_received},
          {"metrics_received", metrics_received},
          {"subscriptions", subscriptions},
          {"policy_pushes", policy_pushes},
          {"term_restarts", term_restarts},
          {"kill_restarts", kill_restarts},
          {"crashes", crashes},
          {"journal_fill", fill},
          {"rss", {{"applicable", rss.applicable}, {"baseline_bytes", rss.baseline},
                   {"peak_bytes", rss.peak}, {"growth", rss.growth}}},
          {"problems", problems},
          {"verdict", verdict.empty() ? "passed" : verdict}};
}

soak_report run_soak(const soak_options& o, std::ostream& out) {
  soak_run r(o, out);
  return r.run();
}

}  // namespace ic::tools::bench
