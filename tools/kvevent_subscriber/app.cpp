#include "tools/kvevent_subscriber/app.hpp"

#include <signal.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/common/http_client.hpp"
#include "tools/kvevent_subscriber/core.hpp"
#include "tools/kvevent_subscriber/grpc_client.hpp"
#include "tools/kvevent_subscriber/http_endpoints.hpp"
#include "tools/kvevent_subscriber/receiver.hpp"
#include "tools/kvevent_subscriber/sender.hpp"
#include "tools/kvevent_subscriber/stats.hpp"

#ifndef IC_VERSION
#define IC_VERSION "0.1.0"
#endif

namespace ic::kvevent {
namespace {

// A parsed http:// URL for the scraper.
struct http_url {
  ic::tools::host_port target;
  std::string path = "/";
};

std::optional<http_url> parse_http_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return std::nullopt;
  std::string rest = url.substr(scheme.size());
  http_url out;
  auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) out.path = rest.substr(slash);
  if (hostport.find(':') == std::string::npos) hostport += ":80";
  std::string err;
  auto hp = ic::tools::parse_host_port(hostport, &err);
  if (!hp) return std::nullopt;
  out.target = *hp;
  return out;
}

struct stop_signal {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  void raise() {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    cv.notify_all();
  }
  // Waits up to `ms`; true when stopping.
  bool wait_for(std::int64_t ms) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop; });
  }
};

std::uint64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

void line(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  char buf[64];
  std::snprintf(buf, sizeof buf, " %.17g\n", v);
  out += buf;
}

void help(std::string& out, const std::string& name, const char* type, const char* text) {
  out += "# HELP " + name + " " + text + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

int run_subscriber(const config& cfg) {
  logger log(cfg.log_json, cfg.level);
  for (const auto& w : cfg.warnings) log.warn(w);

  // Signals: handled by one thread with sigwait, so no other thread sees them (EINTR-free).
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGUSR1);  // our own wake-up of the signal thread at exit
#ifdef IC_KVEVENT_TESTHOOKS
  sigaddset(&sigs, SIGUSR2);  // test hook: stall the core thread (/healthz must turn 503)
#endif
  std::atomic<bool> stall_core{false};
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  std::string err;
  auto channel = make_channel(cfg.server, cfg.server_tls_ca_file, cfg.server_tls_server_name, &err);
  if (!channel) {
    std::fprintf(stderr, "inferencecache-kvevent-subscriber: %s\n", err.c_str());
    return 1;
  }
  const identity id{cfg.replica_id, cfg.model_id, cfg.tenant_id, cfg.hash_scheme};
  core_metrics metrics(static_cast<std::size_t>(cfg.dp_size));
  rpc_metrics rpcs;
  adapter_registry adapters;
  op_log ops(cfg.max_pending_ops);
  inbound_queue queue(65536);
  zmq_receiver receiver(cfg.engine_endpoints, cfg.replay_endpoints, cfg.topic, queue, metrics, &log);
  kv_core core(cfg.core(), ops, adapters, metrics, &receiver, &log);
  grpc_cache_client client(channel, id, adapters, cfg.rpc_timeout_ms);
  grpc_cache_client stats_client(channel, id, adapters, cfg.rpc_timeout_ms);
  sender_options so;
  so.initial_backoff_ms = cfg.retry_initial_backoff_ms;
  so.max_backoff_ms = cfg.retry_max_backoff_ms;
  so.resync = cfg.resync_after_outage;
  so.stats_interval_ms = cfg.stats_interval_ms;
  sender snd(so, ops, client, [&](resync_reason r) { core.request_resync(r); }, metrics, rpcs, &log, mono_ms);

  std::atomic<bool> ready{false};
  std::atomic<std::int64_t> core_loop_ms{mono_ms()};
  std::atomic<std::uint64_t> scrapes[static_cast<int>(scrape_result::count_)] = {};
  std::atomic<bool> load_stale{false};
  std::mutex status_mu;
  nlohmann::json core_status = nlohmann::json::object();

  // --- HTTP (A22) --------------------------------------------------------------------------
  http_endpoints http;
  const std::int64_t health_window = std::max<std::int64_t>(5000, 2 * cfg.window_ms);
  http.route("/healthz", [&] {
    std::int64_t now = mono_ms();
    bool ok = now - core_loop_ms.load() <= health_window && now - receiver.last_loop_ms() <= health_window;
    return ok ? http_reply{200, "text/plain; charset=utf-8", "ok\n"}
              : http_reply{503, "text/plain; charset=utf-8", "core or receiver thread stalled\n"};
  });
  http.route("/readyz", [&] {
    return ready ? http_reply{200, "text/plain; charset=utf-8", "ok\n"}
                 : http_reply{503, "text/plain; charset=utf-8", "starting\n"};
  });
  http.route("/statusz", [&] {
    nlohmann::json j;
    {
      std::lock_guard<std::mutex> lock(status_mu);
      j = core_status;
    }
    j["server"] = {{"target", cfg.server},
                   {"state", snd.failing() ? "failing" : "ok"},
                   {"failing_since_ms_ago", snd.failing() ? mono_ms() - snd.failing_since_ms() : 0}};
    j["pending_ops"] = ops.size();
    j["resync_needed"] = ops.resync_needed();
    j["identity"] = {{"replica_id", cfg.replica_id}, {"model_id", cfg.model_id}, {"tenant_id", cfg.tenant_id},
                     {"hash_scheme", cfg.hash_scheme}};
    return http_reply{200, "application/json", j.dump(2) + "\n"};
  });
  http.route("/metrics", [&] {
    const std::string p = "inferencecache_adapter_";
    std::string out;
    auto src = [](std::size_t s) { return "source=\"" + std::to_string(s) + "\""; };
    help(out, p + "zmq_messages_total", "counter", "Live messages received per source.");
    for (std::size_t s = 0; s < metrics.sources; ++s) line(out, p + "zmq_messages_total", src(s), metrics.zmq_messages.get(s));
    help(out, p + "batches_dropped_total", "counter", "Messages dropped whole, by reason.");
    for (std::size_t s = 0; s < metrics.sources; ++s)
      for (int r = 0; r < static_cast<int>(batch_drop::count_); ++r)
        line(out, p + "batches_dropped_total",
             src(s) + ",reason=\"" + batch_drop_name(static_cast<batch_drop>(r)) + "\"",
             metrics.batch_dropped(s, static_cast<batch_drop>(r)));
    help(out, p + "events_total", "counter", "Events decoded, by type and medium class.");
    for (int t = 0; t < static_cast<int>(event_type_label::count_); ++t)
      for (int m = 0; m < static_cast<int>(medium_label::count_); ++m)
        line(out, p + "events_total",
             std::string("type=\"") + event_type_name(static_cast<event_type_label>(t)) + "\",medium=\"" +
                 medium_label_name(static_cast<medium_label>(m)) + "\"",
             metrics.events.get(static_cast<std::size_t>(t) * static_cast<std::size_t>(medium_label::count_) +
                                static_cast<std::size_t>(m)));
    help(out, p + "events_dropped_total", "counter", "Events not applied, by reason (spec A3).");
    for (int r = 1; r < static_cast<int>(drop_reason::count_); ++r)
      line(out, p + "events_dropped_total", std::string("reason=\"") + drop_reason_name(static_cast<drop_reason>(r)) + "\"",
           metrics.events_dropped.get(static_cast<std::size_t>(r)));
    help(out, p + "seq_gaps_total", "counter", "Sequence gaps detected.");
    for (std::size_t s = 0; s < metrics.sources; ++s) line(out, p + "seq_gaps_total", src(s), metrics.seq_gaps.get(s));
    help(out, p + "seq_missed_batches_total", "counter", "Batches missing in detected gaps.");
    for (std::size_t s = 0; s < metrics.sources; ++s) line(out, p + "seq_missed_batches_total", src(s), metrics.seq_missed.get(s));
    help(out, p + "replay_requests_total", "counter", "Replay rounds by result.");
    for (std::size_t s = 0; s < metrics.sources; ++s)
      for (int r = 0; r < static_cast<int>(replay_result::count_); ++r)
        line(out, p + "replay_requests_total",
             src(s) + ",result=\"" + replay_result_name(static_cast<replay_result>(r)) + "\"",
             metrics.replay_count(s, static_cast<replay_result>(r)));
    help(out, p + "engine_restarts_total", "counter", "Engine restarts detected from the sequence.");
    for (std::size_t s = 0; s < metrics.sources; ++s) line(out, p + "engine_restarts_total", src(s), metrics.engine_restarts.get(s));
    help(out, p + "tracked_blocks", "gauge", "Reverse-map entries.");
    line(out, p + "tracked_blocks", "", metrics.tracked_blocks.load());
    help(out, p + "residency_keys", "gauge", "Residency keys by reported tier.");
    for (int t = 1; t <= 3; ++t)
      line(out, p + "residency_keys", "tier=\"T" + std::to_string(t) + "\"", metrics.residency_keys.get(static_cast<std::size_t>(t)));
    help(out, p + "tracked_blocks_evicted_total", "counter", "Reverse-map entries dropped by the bound.");
    line(out, p + "tracked_blocks_evicted_total", "", metrics.tracked_evicted.load());
    help(out, p + "hash_conflicts_total", "counter", "Engine hashes re-stored with different content.");
    line(out, p + "hash_conflicts_total", "", metrics.hash_conflicts.load());
    help(out, p + "rpc_total", "counter", "RPCs by result.");
    for (const auto& [k, v] : rpcs.totals())
      line(out, p + "rpc_total", "rpc=\"" + k.first + "\",result=\"" + k.second + "\"", static_cast<double>(v));
    help(out, p + "rpc_duration_seconds", "histogram", "RPC latency.");
    for (const auto& [rpc, h] : rpcs.durations()) {
      for (std::size_t i = 0; i < rpc_metrics::bounds().size(); ++i) {
        char le[32];
        std::snprintf(le, sizeof le, "%g", rpc_metrics::bounds()[i]);
        line(out, p + "rpc_duration_seconds_bucket", "rpc=\"" + rpc + "\",le=\"" + le + "\"", static_cast<double>(h.buckets[i]));
      }
      line(out, p + "rpc_duration_seconds_bucket", "rpc=\"" + rpc + "\",le=\"+Inf\"", static_cast<double>(h.count));
      line(out, p + "rpc_duration_seconds_sum", "rpc=\"" + rpc + "\"", h.sum);
      line(out, p + "rpc_duration_seconds_count", "rpc=\"" + rpc + "\"", static_cast<double>(h.count));
    }
    help(out, p + "pending_ops", "gauge", "Operations waiting for the sender.");
    line(out, p + "pending_ops", "", static_cast<double>(ops.size() + (snd.busy() ? 1 : 0)));
    help(out, p + "ops_dropped_total", "counter", "Operations discarded (log overflow or rejected by the server).");
    line(out, p + "ops_dropped_total", "", static_cast<double>(ops.dropped() + rpcs.dropped()));
    help(out, p + "ack_reasons_total", "counter", "Accepted Acks with a drop reason.");
    for (const auto& [r, v] : rpcs.ack_reasons()) line(out, p + "ack_reasons_total", "reason=\"" + r + "\"", static_cast<double>(v));
    help(out, p + "resyncs_total", "counter", "Full reports sent, by reason.");
    for (int r = 0; r < static_cast<int>(resync_reason::count_); ++r)
      line(out, p + "resyncs_total", std::string("reason=\"") + resync_reason_name(static_cast<resync_reason>(r)) + "\"",
           metrics.resyncs.get(static_cast<std::size_t>(r)));
    help(out, p + "stats_scrapes_total", "counter", "Engine /metrics scrapes by result.");
    for (int r = 0; r < static_cast<int>(scrape_result::count_); ++r)
      line(out, p + "stats_scrapes_total", std::string("result=\"") + scrape_result_name(static_cast<scrape_result>(r)) + "\"",
           static_cast<double>(scrapes[r].load()));
    help(out, p + "load_signal_stale", "gauge", "1 after 3 consecutive failed stats ticks.");
    line(out, p + "load_signal_stale", "", load_stale ? 1 : 0);
    help(out, p + "last_event_timestamp_seconds", "gauge", "Engine ts of the last applied batch.");
    for (std::size_t s = 0; s < metrics.sources; ++s)
      line(out, p + "last_event_timestamp_seconds", src(s), static_cast<double>(metrics.last_event_ts_ms.get(s)) / 1000.0);
    help(out, p + "resident_memory_bytes", "gauge", "Process RSS.");
    line(out, p + "resident_memory_bytes", "", static_cast<double>(rss_bytes()));
    help(out, p + "build_info", "gauge", "Build version.");
    line(out, p + "build_info", std::string("version=\"") + IC_VERSION + "\"", 1);
    return http_reply{200, "text/plain; version=0.0.4; charset=utf-8", out};
  });
  if (!cfg.http_bind_address.empty()) {
    std::string e = http.start(cfg.http_bind_address);
    if (!e.empty()) {
      std::fprintf(stderr, "inferencecache-kvevent-subscriber: --http-bind-address: %s\n", e.c_str());
      return 2;
    }
  }

  // --- sockets, then threads ------------------------------------------------------------------
  if (!receiver.open(&err)) {
    std::fprintf(stderr, "inferencecache-kvevent-subscriber: %s\n", err.c_str());
    return 2;
  }
  ready = true;
  log.info("startup", {{"http_port", std::to_string(http.port())}, {"server", cfg.server},
                       {"replica_id", cfg.replica_id}, {"sources", std::to_string(cfg.dp_size)},
                       {"replay", cfg.replay_endpoint.empty() ? "off" : cfg.replay_endpoint}});

  stop_signal stop;
  std::atomic<int> signals_seen{0};
  std::thread sig_thread([&] {
    while (true) {
      int sig = 0;
      if (sigwait(&sigs, &sig) != 0) continue;
      if (sig == SIGUSR1) return;
      if (sig == SIGUSR2) {
        log.warn("test hook: stalling the core thread");
        stall_core = true;
        continue;
      }
      if (signals_seen.fetch_add(1) >= 1) {
        log.warn("second signal; exiting at once");
        std::_Exit(1);
      }
      log.info("shutting down", {{"signal", std::to_string(sig)}});
      stop.raise();
    }
  });

  std::thread rx_thread([&] { receiver.run(); });
  std::atomic<bool> core_stop{false};
  std::thread core_thread([&] {
    core.start(mono_ms());
    std::int64_t last_tick = 0, last_status = 0, last_trim = 0;
    auto dispatch = [&](inbound& in, std::int64_t now) {
      switch (in.k) {
        case inbound::kind::live: core.on_live(in.source, std::move(in.m), now); break;
        case inbound::kind::replay: core.on_replay(in.source, in.m.seq, in.m.payload, now); break;
        case inbound::kind::replay_end: core.on_replay_end(in.source, now); break;
      }
    };
    auto publish_status = [&](std::int64_t now) {
      nlohmann::json j;
      nlohmann::json srcs = nlohmann::json::array();
      for (int s = 0; s < cfg.dp_size; ++s) {
        auto st = core.status(static_cast<std::size_t>(s));
        std::uint64_t last = metrics.last_message_ms.get(static_cast<std::size_t>(s));
        srcs.push_back({{"source", s},
                        {"endpoint", cfg.engine_endpoints[static_cast<std::size_t>(s)]},
                        {"replay_endpoint", cfg.replay_endpoints.empty() ? "" : cfg.replay_endpoints[static_cast<std::size_t>(s)]},
                        {"expected_seq", st.expected ? nlohmann::json(*st.expected) : nlohmann::json(nullptr)},
                        {"incarnation", st.incarnation},
                        {"last_message_ms_ago", last ? nlohmann::json(now - static_cast<std::int64_t>(last)) : nlohmann::json(nullptr)},
                        {"replay", st.recovering ? (st.startup ? "startup" : "recovering") : "idle"},
                        {"replay_rounds", st.rounds},
                        {"held_messages", st.held}});
      }
      j["sources"] = srcs;
      j["tracked_blocks"] = core.tracked_blocks();
      j["residency_keys"] = core.residency_size();
      j["pending_adds"] = core.pending_adds();
      std::lock_guard<std::mutex> lock(status_mu);
      core_status = std::move(j);
    };
    // Idle wake-ups: often enough for the window (a quarter of it, at most 10 ms), no more,
    // so an idle sidecar costs about 1 % of a core.
    const auto idle_wait = std::chrono::milliseconds(std::clamp<std::int64_t>(cfg.window_ms / 4, 1, 10));
    inbound in;
    while (!core_stop) {
      while (stall_core && !core_stop) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      bool got = queue.pop(in, idle_wait);
      std::int64_t now = mono_ms();
      if (got) dispatch(in, now);
      if (now != last_tick) {
        core.tick(now);
        last_tick = now;
      }
      if (now - last_status >= 250) {
        publish_status(now);
        last_status = now;
        // After a burst, give the freed message buffers back to the OS: the sidecar's
        // memory limit is about steady state, not about the largest burst it survived.
        if (!got && queue.size() == 0 && now - last_trim >= 2000) {
          ::malloc_trim(0);
          last_trim = now;
        }
      }
      core_loop_ms = now;
    }
    // A24 step 2–3: finish what the receiver queued, then flush the pending adds.
    while (queue.pop(in, std::chrono::milliseconds(0))) dispatch(in, mono_ms());
    core.tick(mono_ms());
    core.flush();
  });
  std::thread sender_thread([&] { snd.run(); });

  std::thread stats_thread([&] {
    stats_options sopt;
    sopt.sglang = cfg.sglang_profile();
    sopt.tier = cfg.cache_tier;
    sopt.model_name = cfg.engine_model_name;
    sopt.cache_size_bytes = cfg.engine_cache_size_bytes;
    sopt.ceiling = cfg.max_concurrency_ceiling;
    stats_computer computer(sopt);
    stale_tracker stale(&log);
    auto url = parse_http_url(cfg.engine_metrics_url);
    // The first tick comes one interval after start [REF].
    while (!stop.wait_for(cfg.stats_interval_ms)) {
      scrape_result result = scrape_result::ok;
      std::optional<stats_sample> sample;
      std::string why;
      if (!url) {
        result = scrape_result::http_error;
        why = "--engine-metrics-url must be http://host:port/path";
      } else {
        ic::tools::http_request req;
        req.path = url->path;
        auto res = ic::tools::http_call(url->target, req, 5.0);
        if (!res.error.empty() || res.status != 200) {
          result = scrape_result::http_error;
          why = res.error.empty() ? "HTTP status " + std::to_string(res.status) : res.error;
        } else {
          auto r = computer.compute(res.body);
          if (auto* s = std::get_if<stats_sample>(&r)) sample = *s;
          else {
            result = std::get<scrape_result>(r);
            why = std::string("scrape ") + scrape_result_name(result);
          }
        }
      }
      scrapes[static_cast<int>(result)]++;
      bool delivered = false;
      if (sample) {
        rpc_outcome o = stats_client.report_stats(*sample, cfg.client_version);
        rpcs.record("ReportCacheState", o);
        delivered = o.code == 0 && o.accepted;
        if (!delivered) why = o.code != 0 ? "report failed: " + o.code_name : "report not accepted: " + o.reason;
      }
      if (delivered) {
        stale.success();
        snd.note_stats_delivered(mono_ms());
      } else {
        stale.failure(why);
      }
      load_stale = stale.stale();
    }
  });

  // --- run until a signal, then shut down in reverse order ------------------------------------
  {
    std::unique_lock<std::mutex> lock(stop.mu);
    stop.cv.wait(lock, [&] { return stop.stop; });
  }
  const std::int64_t deadline = mono_ms() + cfg.shutdown_timeout_ms;
  receiver.stop();
  queue.wake();
  rx_thread.join();
  core_stop = true;
  core_thread.join();
  snd.drain_until(deadline);
  sender_thread.join();
  stats_thread.join();
  std::size_t left = ops.size() + (snd.busy() ? 1 : 0);
  log.info("stopped", {{"undelivered_ops", std::to_string(left)}});
  http.stop();
  ::kill(::getpid(), SIGUSR1);
  sig_thread.join();
  return 0;
}

}  // namespace ic::kvevent
