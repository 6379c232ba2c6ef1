#include "tools/bench/runner.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "tools/common/codec.hpp"

namespace ic::tools::bench {
namespace {

using steady = std::chrono::steady_clock;

double micros_since(steady::time_point t) {
  return std::chrono::duration<double, std::micro>(steady::now() - t).count();
}

double seconds_since(steady::time_point t) {
  return std::chrono::duration<double>(steady::now() - t).count();
}

std::string status_text(const grpc::Status& st) {
  return "gRPC code " + std::to_string(static_cast<int>(st.error_code())) + ": " + st.error_message();
}

/// Shared state of one closed loop.
class closed_loop {
 public:
  closed_loop(unary_calls& calls, int concurrency, limits lim)
      : calls_(calls), lim_(lim), slots_(static_cast<std::size_t>(concurrency)) {}

  loop_result run(const std::string& name) {
    start_ = steady::now();
    deadline_ = start_ + std::chrono::milliseconds(static_cast<long>(lim_.duration_s * 1000));
    active_ = static_cast<int>(slots_.size());
    for (std::size_t i = 0; i < slots_.size(); ++i) launch(static_cast<int>(i));
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto last = steady::now();
      while (active_ > 0) {
        cv_.wait_for(lock, std::chrono::milliseconds(200));
        if (steady::now() - last >= std::chrono::seconds(1)) {
          last = steady::now();
          std::fprintf(stderr, "[%s] %.0fs: %llu calls\n", name.c_str(), seconds_since(start_),
                       static_cast<unsigned long long>(completed_.load()));
        }
      }
    }
    loop_result r;
    r.elapsed_s = seconds_since(start_);
    for (auto& s : slots_) {
      r.latencies_us.insert(r.latencies_us.end(), s.latencies.begin(), s.latencies.end());
      r.ok += s.ok;
      r.errors += s.errors;
      if (r.first_error.empty()) r.first_error = s.first_error;
      for (const auto& [k, v] : s.labels) r.labels[k] += v;
    }
    return r;
  }

 private:
  struct slot {
    std::unique_ptr<grpc::ClientContext> ctx;
    steady::time_point started;
    std::vector<double> latencies;
    std::uint64_t ok = 0, errors = 0;
    std::string first_error;
    std::map<std::string, std::uint64_t> labels;
  };

  void launch(int i) {
    const bool over_budget =
        lim_.max_requests > 0 && issued_.fetch_add(1) >= lim_.max_requests;
    if (over_budget || steady::now() >= deadline_) {
      std::lock_guard<std::mutex> lock(mu_);
      --active_;
      cv_.notify_all();
      return;
    }
    slot& s = slots_[static_cast<std::size_t>(i)];
    calls_.prepare(i);
    s.ctx = std::make_unique<grpc::ClientContext>();
    s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    s.started = steady::now();
    calls_.start(i, s.ctx.get(), [this, i](grpc::Status st) { on_done(i, st); });
  }

  void on_done(int i, const grpc::Status& st) {
    slot& s = slots_[static_cast<std::size_t>(i)];
    const double us = micros_since(s.started);
    if (st.ok()) {
      ++s.ok;
      s.latencies.push_back(us);
      ++s.labels[calls_.label(i)];
    } else {
      ++s.errors;
      if (s.first_error.empty()) s.first_error = status_text(st);
    }
    completed_.fetch_add(1);
    launch(i);
  }

  unary_calls& calls_;
  limits lim_;
  std::vector<slot> slots_;
  steady::time_point start_, deadline_;
  std::atomic<std::uint64_t> issued_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0;
};

/// Sleeps until `t` unless `stop` is set first; false when stopped.
bool sleep_until(steady::time_point t, const std::atomic<bool>* stop, steady::time_point deadline) {
  while (steady::now() < t) {
    if ((stop && stop->load()) || steady::now() >= deadline) return false;
    auto step = std::min<steady::duration>(t - steady::now(), std::chrono::milliseconds(20));
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace

std::vector<std::shared_ptr<grpc::Channel>> make_channels(const std::string& target, int n) {
  std::vector<std::shared_ptr<grpc::Channel>> out;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("ic.bench.channel", i);  // distinct args: never share a connection
    args.SetMaxSendMessageSize(64 * 1024 * 1024);
    out.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  return out;
}

health_calls::health_calls(const std::vector<std::shared_ptr<grpc::Channel>>& channels, int slots)
    : req_(static_cast<std::size_t>(slots)), resp_(static_cast<std::size_t>(slots)) {
  for (int i = 0; i < slots; ++i)
    stubs_.push_back(grpc::health::v1::Health::NewStub(channels[static_cast<std::size_t>(i) % channels.size()]));
}

void health_calls::start(int slot, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
  auto i = static_cast<std::size_t>(slot);
  stubs_[i]->async()->Check(ctx, &req_[i], &resp_[i], std::move(done));
}

std::string health_calls::label(int slot) {
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      resp_[static_cast<std::size_t>(slot)].status());
}

namespace {

/// One stub per slot, spread over the channels round-robin.
std::vector<std::unique_ptr<v1::InferenceCache::Stub>> make_stubs(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels, int slots) {
  std::vector<std::unique_ptr<v1::InferenceCache::Stub>> out;
  for (int i = 0; i < slots; ++i)
    out.push_back(v1::InferenceCache::NewStub(channels[static_cast<std::size_t>(i) % channels.size()]));
  return out;
}

}  // namespace

chain_picker::chain_picker(int slots, std::uint64_t chains, std::uint64_t seed)
    : chains_(chains == 0 ? 1 : chains) {
  for (int i = 0; i < slots; ++i) rng_.emplace_back(mix64(seed + static_cast<std::uint64_t>(i)));
}

std::uint64_t chain_picker::next(int slot) { return rng_[static_cast<std::size_t>(slot)]() % chains_; }

lookup_calls::lookup_calls(const std::vector<std::shared_ptr<grpc::Channel>>& channels, int slots,
                           const workload& w, std::uint64_t chains, std::uint64_t seed)
    : w_(w), picker_(slots, chains, seed), stubs_(make_stubs(channels, slots)),
      req_(static_cast<std::size_t>(slots)), resp_(static_cast<std::size_t>(slots)),
      server_us_(static_cast<std::size_t>(slots)) {}

void add_chain_report(const workload& w, std::uint64_t chain, int blocks, updates_by_place* by_place) {
  auto key = std::make_pair(w.tenant_of(chain), w.replica_of(chain));
  auto& u = (*by_place)[key];
  if (u.replica_id().empty()) {
    u.set_replica_id(w.replica_name(key.second));
    u.set_tenant_id(w.tenant_name(key.first));
    u.set_model_id(w.shape().model);
    u.set_hash_scheme(w.shape().scheme);
  }
  std::vector<std::uint64_t> hashes;
  w.chain(chain, blocks, &hashes);
  auto* e = u.add_prefixes();
  e->set_tier(v1::CACHE_TIER_T1);
  for (auto h : hashes) {
    e->add_block_hashes(be64(h));
    e->add_block_token_counts(w.shape().block_tokens);
  }
}

void whole_chain_lookup(const workload& w, std::uint64_t chain, v1::LookupRouteRequest* req) {
  req->Clear();
  req->set_tenant_id(w.tenant_name(w.tenant_of(chain)));
  req->set_model_id(w.shape().model);
  req->set_hash_scheme(w.shape().scheme);
  std::vector<std::uint64_t> hashes;
  w.chain(chain, w.shape().chain_blocks, &hashes);
  for (auto h : hashes) {
    req->add_block_hashes(be64(h));
    req->add_block_token_counts(w.shape().block_tokens);
  }
}

void whole_chain_pd_lookup(const workload& w, std::uint64_t chain, v1::LookupPDRouteRequest* req) {
  req->Clear();
  req->set_tenant_id(w.tenant_name(w.tenant_of(chain)));
  req->set_model_id(w.shape().model);
  req->set_prefix_hash(be64(w.block_hash(chain, w.shape().chain_blocks - 1)));
  req->set_prefix_token_count(w.shape().chain_blocks * w.shape().block_tokens);
  req->set_pd_topology_ref(kPdTopologyName);
}

void lookup_calls::prepare(int slot) {
  whole_chain_lookup(w_, picker_.next(slot), &req_[static_cast<std::size_t>(slot)]);
}

void lookup_calls::start(int slot, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
  auto i = static_cast<std::size_t>(slot);
  resp_[i].Clear();
  stubs_[i]->async()->LookupRoute(ctx, &req_[i], &resp_[i], std::move(done));
}

std::string lookup_calls::label(int slot) {
  const auto& resp = resp_[static_cast<std::size_t>(slot)];
  server_us_[static_cast<std::size_t>(slot)].push_back(static_cast<double>(resp.lookup_latency_us()));
  return resp.reason_code().empty() ? "NO_HINT" : resp.reason_code();
}

std::vector<double> lookup_calls::server_latencies_us() const {
  std::vector<double> out;
  for (const auto& v : server_us_) out.insert(out.end(), v.begin(), v.end());
  return out;
}

pd_calls::pd_calls(const std::vector<std::shared_ptr<grpc::Channel>>& channels, int slots,
                   const workload& w, const pd_shape& shape, std::uint64_t chains,
                   std::uint64_t seed)
    : w_(w), shape_(shape), picker_(slots, chains, seed), stubs_(make_stubs(channels, slots)),
      req_(static_cast<std::size_t>(slots)), resp_(static_cast<std::size_t>(slots)),
      holder_(static_cast<std::size_t>(slots)) {}

void pd_calls::prepare(int slot) {
  auto i = static_cast<std::size_t>(slot);
  const std::uint64_t chain = picker_.next(slot);
  holder_[i] = w_.replica_name(w_.replica_of(chain));
  whole_chain_pd_lookup(w_, chain, &req_[i]);
}

void pd_calls::start(int slot, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
  auto i = static_cast<std::size_t>(slot);
  resp_[i].Clear();
  stubs_[i]->async()->LookupPDRoute(ctx, &req_[i], &resp_[i], std::move(done));
}

std::string pd_calls::label(int slot) {
  auto i = static_cast<std::size_t>(slot);
  const auto& r = resp_[i];
  return pd_answer_label({r.reason_code(), r.prefill_replica_id(), r.decode_replica_id(),
                          r.transport_hint()},
                         holder_[i], shape_);
}

void merge_into(loop_result* into, const loop_result& r) {
  into->latencies_us.insert(into->latencies_us.end(), r.latencies_us.begin(), r.latencies_us.end());
  into->ok += r.ok;
  into->errors += r.errors;
  into->elapsed_s += r.elapsed_s;
  if (into->first_error.empty()) into->first_error = r.first_error;
  for (const auto& [k, v] : r.labels) into->labels[k] += v;
}

loop_result run_closed_loop(unary_calls& calls, int concurrency, limits lim, const std::string& name) {
  closed_loop loop(calls, concurrency, lim);
  return loop.run(name);
}

ingest_result run_ingest(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                         const workload& w, const ingest_options& opts,
                         const std::atomic<bool>* stop, const std::string& name) {
  const auto start = steady::now();
  const auto deadline = start + std::chrono::milliseconds(static_cast<long>(opts.lim.duration_s * 1000));
  std::atomic<std::uint64_t> next_chain{opts.first_chain};
  std::atomic<std::uint64_t> messages_issued{0};
  std::atomic<std::uint64_t> blocks_progress{0};
  std::atomic<bool> finished{false};
  const std::uint64_t chain_end =
      opts.max_chains > 0 ? opts.first_chain + opts.max_chains : ~std::uint64_t{0};
  std::vector<ingest_result> per(static_cast<std::size_t>(opts.producers));

  auto producer = [&](int p) {
    ingest_result& r = per[static_cast<std::size_t>(p)];
    auto stub = v1::InferenceCache::NewStub(channels[static_cast<std::size_t>(p) % channels.size()]);
    const double rate = opts.rate_blocks_per_s > 0 ? opts.rate_blocks_per_s / opts.producers : 0;
    std::uint64_t sent_blocks = 0;
    // Live sessions: (chain, next turn). A finished session is replaced by a new chain.
    std::vector<std::pair<std::uint64_t, int>> sessions;
    auto new_chain = [&]() -> std::int64_t {
      std::uint64_t c = next_chain.fetch_add(1);
      if (c >= chain_end) return -1;
      ++r.chains_started;
      return static_cast<std::int64_t>(c);
    };
    bool out_of_chains = false;
    auto should_stop = [&] {
      return out_of_chains || (stop && stop->load()) || steady::now() >= deadline;
    };
    while (!should_stop()) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::Ack ack;
      std::unique_ptr<grpc::ClientWriter<v1::CacheStateUpdate>> writer;
      const auto stream_start = steady::now();
      std::uint64_t stream_blocks = 0;
      for (int m = 0; m < opts.messages_per_stream && !should_stop(); ++m) {
        if (opts.lim.max_requests > 0 && messages_issued.fetch_add(1) >= opts.lim.max_requests) {
          out_of_chains = true;
          break;
        }
        // Advance up to chains_per_message sessions by one turn each.
        while (static_cast<int>(sessions.size()) < opts.chains_per_message) {
          std::int64_t c = new_chain();
          if (c < 0) break;
          sessions.push_back({static_cast<std::uint64_t>(c), 0});
        }
        if (sessions.empty()) {
          out_of_chains = true;
          break;
        }
        // One CacheStateUpdate per (tenant, replica) placement among the sessions.
        updates_by_place by_place;
        std::uint64_t msg_blocks = 0;
        for (auto& [c, turn] : sessions) {
          const int len = w.turn_length(turn);
          add_chain_report(w, c, len, &by_place);
          msg_blocks += static_cast<std::uint64_t>(len);
          ++turn;
        }
        // Drop finished sessions.
        std::vector<std::pair<std::uint64_t, int>> live;
        for (auto& s : sessions)
          if (s.second < w.shape().turns) live.push_back(s);
        sessions.swap(live);
        if (rate > 0) {
          auto due = start + std::chrono::microseconds(static_cast<long>(sent_blocks / rate * 1e6));
          if (!sleep_until(due, stop, deadline)) break;
        }
        if (!writer) writer = stub->ReportCacheState(&ctx, &ack);
        bool ok = true;
        for (auto& [key, u] : by_place) {
          u.set_timestamp_us(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
          if (!writer->Write(u)) {
            ok = false;
            break;
          }
          ++r.messages;
        }
        if (!ok) break;
        sent_blocks += msg_blocks;
        stream_blocks += msg_blocks;
      }
      if (!writer) break;
      const auto done_at = steady::now();
      writer->WritesDone();
      grpc::Status st = writer->Finish();
      ++r.streams;
      if (!st.ok()) {
        ++r.errors;
        if (r.first_error.empty()) r.first_error = status_text(st);
        if (st.error_code() == grpc::StatusCode::UNAVAILABLE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      r.ack_wait_us.push_back(micros_since(done_at));
      r.stream_latency_us.push_back(micros_since(stream_start));
      ++r.ack_reasons[ack.reason_code().empty() ? (ack.accepted() ? "ACCEPTED" : "REFUSED")
                                                 : ack.reason_code()];
      if (ack.accepted()) {
        r.blocks_acked += stream_blocks;
        blocks_progress.fetch_add(stream_blocks);
      }
    }
  };

  std::vector<std::thread> threads;
  for (int p = 0; p < opts.producers; ++p) threads.emplace_back(producer, p);
  std::thread progress([&] {
    auto last = steady::now();
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (steady::now() - last >= std::chrono::seconds(1)) {
        last = steady::now();
        std::fprintf(stderr, "[%s] %.0fs: %llu blocks acked\n", name.c_str(), seconds_since(start),
                     static_cast<unsigned long long>(blocks_progress.load()));
      }
    }
  });
  for (auto& t : threads) t.join();
  finished.store(true);
  progress.join();

  ingest_result total;
  total.elapsed_s = seconds_since(start);
  for (auto& r : per) {
    total.blocks_acked += r.blocks_acked;
    total.messages += r.messages;
    total.streams += r.streams;
    total.errors += r.errors;
    total.chains_started += r.chains_started;
    total.stream_latency_us.insert(total.stream_latency_us.end(), r.stream_latency_us.begin(),
                                   r.stream_latency_us.end());
    total.ack_wait_us.insert(total.ack_wait_us.end(), r.ack_wait_us.begin(), r.ack_wait_us.end());
    if (total.first_error.empty()) total.first_error = r.first_error;
    for (const auto& [k, v] : r.ack_reasons) total.ack_reasons[k] += v;
  }
  return total;
}

}  // namespace ic::tools::bench
