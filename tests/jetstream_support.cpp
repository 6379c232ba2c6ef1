#include "tests/jetstream_support.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "tests/support/chain_requests.hpp"
#include "tests/support/http_client.hpp"

namespace ic::test {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::vector<std::string> replica_args(const std::string& data_dir, const std::string& id,
                                      const std::string& nats_urls, int nats_replicas) {
  return {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
          "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + data_dir,
          "--insecure-disable-auth", "--journal=jetstream", "--nats-servers=" + nats_urls,
          "--nats-replicas=" + std::to_string(nats_replicas), "--replica-id=" + id,
          "--journal-append-timeout=1s"};
}

v1::Ack report(v1::InferenceCache::Stub& stub, const std::string& replica,
               const std::vector<std::string>& blocks, grpc::Status* rpc,
               const std::string& tenant) {
  v1::CacheStateUpdate u = chain_update_message(tenant, replica, blocks);
  grpc::ClientContext ctx;
  // Longer than any answer the server owes (--journal-append-timeout + --max-apply-lag + a
  // check): an RPC error here is a server that did not answer, never a slow stream.
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  v1::Ack ack;
  auto writer = stub.ReportCacheState(&ctx, &ack);
  writer->Write(u);
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (rpc) *rpc = st;
  return ack;
}

v1::LookupRouteResponse lookup(v1::InferenceCache::Stub& stub,
                               const std::vector<std::string>& blocks,
                               const std::string& tenant) {
  return test::chain_lookup(stub, tenant, blocks, 5s);
}

bool converges(v1::InferenceCache::Stub& stub, const std::vector<std::string>& blocks,
               const std::string& replica, std::chrono::milliseconds bound) {
  const auto deadline = steady::now() + bound;
  while (steady::now() < deadline) {
    auto r = lookup(stub, blocks);
    if (r.reason_code() == "PREFIX_MATCH" && r.replica_scores_size() == 1 &&
        r.replica_scores(0).replica_id() == replica &&
        r.replica_scores(0).matched_tokens() == 64 * static_cast<int>(blocks.size()))
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

double metric_value(int http_port, const std::string& series) {
  auto m = http_call(http_port, "GET", "/metrics");
  const std::string key = "\n" + series + " ";
  auto at = m.body.find(key);
  return at == std::string::npos ? std::nan("") : std::atof(m.body.c_str() + at + key.size());
}

long long journal_position(int http_port, const std::string& kind) {
  const double v = metric_value(http_port, "inferencecache_journal_position{kind=\"" + kind + "\"}");
  return std::isnan(v) ? -1 : static_cast<long long>(v);
}

std::unique_ptr<v1::InferenceCache::Stub> stub(const server_process& s) {
  return v1::InferenceCache::NewStub(
      grpc::CreateChannel(s.grpc_target(), grpc::InsecureChannelCredentials()));
}

namespace {

// Every server's applied position when all equal their stream_last and each other, else -1.
long long common_position(const std::vector<const server_process*>& servers) {
  long long common = -1;
  for (const auto* s : servers) {
    const long long applied = journal_position(s->http_port(), "applied");
    if (applied <= 0 || applied != journal_position(s->http_port(), "stream_last")) return -1;
    if (common != -1 && applied != common) return -1;
    common = applied;
  }
  return common;
}

std::string cache_state(v1::InferenceCache::Stub& stub, const std::string& tenant) {
  v1::GetCacheStateRequest req;
  req.set_model_id("llama");
  req.set_tenant_id(tenant);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::GetCacheStateResponse resp;
  const grpc::Status st = stub.GetCacheState(&ctx, req, &resp);
  return st.ok() ? resp.DebugString() : "GetCacheState failed: " + st.error_message();
}

}  // namespace

std::string wait_identical(const std::vector<const server_process*>& servers,
                           const std::vector<std::string>& tenants,
                           std::chrono::milliseconds bound) {
  std::vector<std::unique_ptr<v1::InferenceCache::Stub>> stubs;
  for (const auto* s : servers) stubs.push_back(stub(*s));
  const auto deadline = steady::now() + bound;
  std::string last = "never caught up (applied == stream_last on every replica)";
  while (steady::now() < deadline) {
    const long long before = common_position(servers);
    if (before < 0) {
      std::this_thread::sleep_for(20ms);
      continue;
    }
    std::vector<std::string> states;
    for (std::size_t i = 0; i < servers.size(); ++i) {
      std::string st = http_call(servers[i]->snapshot_port(), "GET", "/snapshot").body;
      for (const auto& t : tenants) st += "\n--- GetCacheState " + t + "\n" + cache_state(*stubs[i], t);
      states.push_back(std::move(st));
    }
    if (common_position(servers) != before) continue;  // moved while read: read again
    last.clear();
    for (std::size_t i = 1; i < states.size() && last.empty(); ++i) {
      if (states[i] != states[0])
        last = "at position " + std::to_string(before) + " replica 0:\n" +
               states[0].substr(0, 3000) + "\nreplica " + std::to_string(i) + ":\n" +
               states[i].substr(0, 3000);
    }
    if (last.empty()) return last;
    std::this_thread::sleep_for(50ms);
  }
  return last;
}

std::vector<probe_prompt> probe_set(const std::vector<std::pair<std::string, std::string>>& keys,
                                    std::size_t n) {
  std::vector<probe_prompt> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& [tenant, block] = keys.empty() ? std::pair<std::string, std::string>{"t", "none"}
                                               : keys[i % keys.size()];
    switch (i % 4) {
      case 0: out.push_back({tenant, {block}}); break;
      case 1: out.push_back({tenant, {block, block + "-unheld"}}); break;
      case 2: out.push_back({tenant, {"probe-unknown-" + std::to_string(i)}}); break;
      default: out.push_back({tenant, {block, block}}); break;
    }
  }
  return out;
}

namespace {

// "" when `x` and `y` agree as compare_probes() describes, else both answers.
std::string compare_answer(const v1::LookupRouteResponse& x, const v1::LookupRouteResponse& y,
                           double score_tolerance, bool by_id) {
  auto scores = [by_id](const v1::LookupRouteResponse& r) {
    std::vector<v1::ReplicaScore> s(r.replica_scores().begin(), r.replica_scores().end());
    if (by_id)
      std::sort(s.begin(), s.end(),
                [](const auto& l, const auto& r2) { return l.replica_id() < r2.replica_id(); });
    return s;
  };
  const auto sx = scores(x), sy = scores(y);
  bool same = x.reason_code() == y.reason_code() && sx.size() == sy.size();
  for (std::size_t k = 0; same && k < sx.size(); ++k) {
    same = sx[k].replica_id() == sy[k].replica_id() &&
           sx[k].matched_tokens() == sy[k].matched_tokens() && sx[k].tier() == sy[k].tier() &&
           std::fabs(sx[k].score() - sy[k].score()) <=
               score_tolerance * std::max(1.0f, std::fabs(sx[k].score()));
  }
  return same ? std::string() : x.DebugString() + "vs\n" + y.DebugString();
}

}  // namespace

std::string compare_probes(v1::InferenceCache::Stub& a, v1::InferenceCache::Stub& b,
                           const std::vector<probe_prompt>& probes, double score_tolerance,
                           bool by_id) {
  if (probes.empty()) return "no probes";
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const auto& p = probes[i];
    const std::string diff =
        compare_answer(lookup(a, p.blocks, p.tenant), lookup(b, p.blocks, p.tenant),
                       score_tolerance, by_id);
    if (!diff.empty()) return "probe " + std::to_string(i) + ":\n" + diff;
  }
  return {};
}

event_recorder::event_recorder(const server_process& s) : stub_(stub(s)) {
  ctx_.set_deadline(std::chrono::system_clock::now() + 120s);
  auto reader = stub_->StreamCacheEvents(&ctx_, v1::StreamEventsRequest{});
  reader->WaitForInitialMetadata();  // the subscription is in place
  reader_ = std::thread([this, r = std::move(reader)] {
    v1::CacheEvent e;
    while (r->Read(&e)) {
      std::ostringstream line;
      line << v1::CacheEvent::Type_Name(e.type()) << ' ' << e.replica_id() << ' '
           << e.prefix_hash() << ' ' << e.timestamp_us();
      {
        std::lock_guard<std::mutex> lock(mu_);
        events_[e.tenant_id()].push_back(line.str());
      }
      ++count_;
      last_event_ns_ = steady::now().time_since_epoch().count();
    }
    const grpc::Status st = r->Finish();
    if (!stopping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = "ERROR stream ended: " + std::to_string(st.error_code()) + " " + st.error_message();
    }
  });
}

event_recorder::~event_recorder() {
  stopping_ = true;
  ctx_.TryCancel();
  if (reader_.joinable()) reader_.join();
}

std::map<std::string, std::vector<event_recorder::rendered>> event_recorder::stop(
    std::chrono::milliseconds quiet) {
  const auto deadline = steady::now() + 10s;
  last_event_ns_ = std::max<std::int64_t>(last_event_ns_, steady::now().time_since_epoch().count());
  while (steady::now() < deadline &&
         steady::now().time_since_epoch().count() - last_event_ns_.load() <
             std::chrono::nanoseconds(quiet).count())
    std::this_thread::sleep_for(20ms);
  stopping_ = true;
  ctx_.TryCancel();
  if (reader_.joinable()) reader_.join();
  std::lock_guard<std::mutex> lock(mu_);
  auto out = events_;
  if (!error_.empty()) out[""].push_back(error_);
  return out;
}

std::string compare_events(const std::map<std::string, std::vector<event_recorder::rendered>>& a,
                           const std::map<std::string, std::vector<event_recorder::rendered>>& b) {
  if (a.empty()) return "no event recorded";
  if (a.size() != b.size()) return "tenant counts differ";
  for (const auto& [tenant, events] : a) {
    auto it = b.find(tenant);
    if (it == b.end()) return "tenant " + tenant + " missing on the second replica";
    if (events.empty()) return "no event for tenant " + tenant;
    const auto& other = it->second;
    for (std::size_t i = 0; i < std::max(events.size(), other.size()); ++i) {
      const std::string x = i < events.size() ? events[i] : "(none)";
      const std::string y = i < other.size() ? other[i] : "(none)";
      if (x != y)
        return "tenant " + tenant + " event " + std::to_string(i) + " of " +
               std::to_string(events.size()) + "/" + std::to_string(other.size()) + ": " + x +
               " vs " + y;
    }
  }
  return {};
}

void replicas_fixture::SetUp() {
  if (journal::jetstream::testing::nats_cluster::binary().empty())
    GTEST_SKIP() << "nats-server is not installed (scripts/install_deps.sh installs it)";
  std::string why;
  nats_ = journal::jetstream::testing::nats_cluster::start(nodes_, &why);
  ASSERT_TRUE(nats_) << why;
  dir_a_ = make_temp_dir("ic_js_a");
  dir_b_ = make_temp_dir("ic_js_b");
}

void replicas_fixture::TearDown() {
  a_.reset();
  b_.reset();
  nats_.reset();
  if (!dir_a_.empty()) remove_tree(dir_a_);
  if (!dir_b_.empty()) remove_tree(dir_b_);
}

std::string replicas_fixture::nats_urls() const {
  std::string out;
  for (const auto& u : nats_->urls()) out += (out.empty() ? "" : ",") + u;
  return out;
}

std::unique_ptr<server_process> replicas_fixture::start(const std::string& dir,
                                                        const std::string& id,
                                                        std::vector<std::string> extra,
                                                        const std::string& binary) {
  auto args = replica_args(dir, id, nats_urls(), nodes_ == 1 ? 1 : 3);
  args.insert(args.end(), extra.begin(), extra.end());
  auto s = server_process::start(binary, args);
  EXPECT_TRUE(s && s->wait_ready(std::chrono::seconds(30))) << (s ? s->logs() : "fork failed");
  return s;
}

}  // namespace ic::test
