// The server's Prometheus metrics: every `inferencecache_*` series of spec/operations.md §3.8
// plus ingest drops by reason and journal health (spec/extensions.md §4), and the HTTP
// listeners' connection bound (open connections, connections rejected at the bound).
//
// `server_metrics` is the only place that knows prometheus-cpp: it implements the probe
// interfaces the runtime and the gateway report through, renders /metrics text, and lists
// current series for StreamMetrics.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "journal/record_log.hpp"
#include "actors/messages.hpp"
#include "grpc_gateway/inference_cache_service.hpp"

namespace prometheus {
class Registry;
class Gauge;
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace ic::server {

/// Which admin route an auth decision was for.
enum class admin_route { snapshot, policy, probe, topology, templates };

/// Metrics registry and probes. Thread-safe.
class server_metrics final : public actors::runtime_probe, public grpc_gateway::gateway_probe {
 public:
  server_metrics();
  ~server_metrics() override;

  void set_up(bool up);
  void set_tls_enabled(bool on);
  /// Counts one auth decision (`result` = ok | unauth | forbidden | error).
  void on_auth(admin_route route, const std::string& result);
  /// Replaces `inferencecache_index_entries{model}`; models no longer present read 0.
  void set_index_entries(const std::vector<std::pair<std::string, std::int64_t>>& by_model);
  /// Counts one connection the `listener` ("http" | "admin") closed at its connection bound.
  void on_http_connection_rejected(const std::string& listener);
  /// Sets `inferencecache_http_connections_open{listener}`.
  void set_http_connections_open(const std::string& listener, std::size_t open);
  /// Counts one /topology or /templates push (`store` = "topology" | "templates"; `result` =
  /// ok | invalid | journal_unavailable): `inferencecache_{store}_push_total{result}`.
  void on_store_push(const std::string& store, const std::string& result);
  /// One `inferencecache_pd_topology_replicas` series.
  struct pd_replicas_row {
    std::string topology, role, state;
    double value = 0;
  };
  /// Replaces `inferencecache_pd_topology_replicas{topology, role, state}`; series no longer
  /// present read 0.
  void set_pd_topology_replicas(const std::vector<pd_replicas_row>& rows);

  // actors::runtime_probe
  void on_ingest(const std::string& tenant, const index::ingest_result& r) override;
  void on_sweep(const index::sweep_result& r) override;
  void on_journal_write(bool ok, std::size_t records) override;
  /// False after a journal write failed, until one succeeds (/readyz?producer=1).
  bool journal_writable() const { return journal_writable_.load(); }
  void on_subscriber_dropped() override;

  // grpc_gateway::gateway_probe
  void on_lookup(const std::string& model, const std::string& reason_code, bool hint_used,
                 double seconds) override;
  void on_dropped(const std::string& reason, std::int64_t count) override;
  void on_tokenize(std::string_view outcome, double seconds) override;
  void on_pd_lookup(const std::string& model, const std::string& reason_code, bool hint_used,
                    double seconds) override;
  void on_render(const std::string& reason_code, double seconds) override;

  /// Sets the journal series of spec/scaleout.md §3.9 from the journal's counters (at
  /// scrape time): positions, apply lag, publish retries, unknown outcomes, gaps, NATS
  /// connected.
  void set_journal_stats(const journal::log_stats& s);

  /// Renders the Prometheus text exposition of every series.
  std::string render() const;
  /// Lists every current series (histograms as _count, _sum and _bucket{le}).
  std::vector<grpc_gateway::metric_sample> samples() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* up_;
  prometheus::Gauge* tls_;
  prometheus::Family<prometheus::Gauge>* index_entries_;
  prometheus::Family<prometheus::Counter>* lookup_calls_;
  prometheus::Family<prometheus::Histogram>* lookup_latency_;
  prometheus::Family<prometheus::Counter>* tenant_evictions_;
  prometheus::Family<prometheus::Counter>* index_evictions_;
  prometheus::Family<prometheus::Counter>* snapshot_auth_;
  prometheus::Family<prometheus::Counter>* policy_auth_;
  prometheus::Family<prometheus::Counter>* probe_auth_;
  prometheus::Family<prometheus::Counter>* ingest_dropped_;
  prometheus::Family<prometheus::Counter>* journal_writes_;
  prometheus::Counter* journal_records_;
  prometheus::Gauge* journal_available_;
  std::atomic<bool> journal_writable_{true};
  prometheus::Counter* subscribers_dropped_;
  prometheus::Family<prometheus::Counter>* tokenizations_;
  prometheus::Histogram* tokenize_duration_;
  prometheus::Family<prometheus::Counter>* http_rejected_;
  prometheus::Family<prometheus::Gauge>* http_open_;
  // journal seam (issue #15): set_journal_stats
  prometheus::Family<prometheus::Gauge>* journal_position_;
  prometheus::Gauge* journal_apply_lag_;
  prometheus::Gauge* journal_nats_connected_;
  prometheus::Counter* journal_publish_retries_;
  prometheus::Counter* journal_unknown_outcomes_;
  prometheus::Counter* journal_gaps_;
  prometheus::Counter* journal_reloads_;
  prometheus::Gauge* journal_halted_;
  prometheus::Counter* journal_consumer_resets_;
  prometheus::Counter* journal_resets_;
  prometheus::Gauge* journal_stamp_skew_;
  prometheus::Counter* journal_stamp_skew_over_;
  prometheus::Gauge* journal_shared_bytes_;
  prometheus::Gauge* journal_shared_seconds_;
  prometheus::Gauge* journal_shared_age_;
  prometheus::Gauge* journal_lease_holder_;
  std::mutex journal_mu_;
  journal::log_stats journal_last_;
  prometheus::Family<prometheus::Counter>* topology_auth_;
  prometheus::Family<prometheus::Counter>* templates_auth_;
  prometheus::Family<prometheus::Counter>* topology_push_;
  prometheus::Family<prometheus::Counter>* templates_push_;
  prometheus::Family<prometheus::Counter>* pd_calls_;
  prometheus::Family<prometheus::Histogram>* pd_latency_;
  prometheus::Family<prometheus::Gauge>* pd_replicas_;
  prometheus::Family<prometheus::Counter>* render_calls_;
  prometheus::Histogram* render_latency_;
  /// The per-call series of LookupRoute / LookupPDRoute and RenderTemplate, found without
  /// allocating (server/series_cache.hpp; defined in metrics.cpp).
  struct call_series;
  struct render_series;
  std::unique_ptr<call_series> lookup_series_;
  std::unique_ptr<call_series> pd_series_;
  std::unique_ptr<render_series> render_series_;
  std::mutex models_mu_;
  std::set<std::string> models_seen_;
  std::set<std::vector<std::string>> pd_series_seen_;
};

}  // namespace ic::server
