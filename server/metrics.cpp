#include "server/metrics.hpp"
#include "server/series_cache.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>

namespace ic::server {
namespace {

const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1};

std::string format_le(double v) {
  if (std::isinf(v)) return "+Inf";
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

struct server_metrics::call_series {
  call_series(prometheus::Family<prometheus::Counter>* c, prometheus::Family<prometheus::Histogram>* l)
      : calls(c, {"model", "reason_code", "hint_used"}), latency(l, {"model"}) {}
  void record(const std::string& model, const std::string& reason_code, bool hint_used,
              double seconds) {
    calls.get({model, reason_code, hint_used ? "true" : "false"}).Increment();
    latency.get({model}, kLatencyBuckets).Observe(seconds);
  }
  series_cache<prometheus::Counter, 3> calls;
  series_cache<prometheus::Histogram, 1> latency;
};

struct server_metrics::render_series {
  explicit render_series(prometheus::Family<prometheus::Counter>* c) : calls(c, {"reason_code"}) {}
  series_cache<prometheus::Counter, 1> calls;
};

server_metrics::server_metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  up_ = &prometheus::BuildGauge().Name("inferencecache_server_up").Help("1 while the server serves").Register(r).Add({});
  tls_ = &prometheus::BuildGauge()
              .Name("inferencecache_server_grpc_tls_enabled")
              .Help("1 when the gRPC listener uses TLS")
              .Register(r)
              .Add({});
  index_entries_ = &prometheus::BuildGauge()
                        .Name("inferencecache_index_entries")
                        .Help("Distinct prefix keys per model (reserved tenant excluded)")
                        .Register(r);
  lookup_calls_ = &prometheus::BuildCounter()
                       .Name("inferencecache_lookup_route_calls_total")
                       .Help("LookupRoute calls by model, reason code and whether a hint was given")
                       .Register(r);
  lookup_latency_ = &prometheus::BuildHistogram()
                         .Name("inferencecache_lookup_route_latency_seconds")
                         .Help("LookupRoute latency on the server")
                         .Register(r);
  tenant_evictions_ = &prometheus::BuildCounter()
                           .Name("inferencecache_tenant_evictions_total")
                           .Help("Distinct keys evicted by tenant quotas")
                           .Register(r);
  index_evictions_ = &prometheus::BuildCounter()
                          .Name("inferencecache_index_evictions_total")
                          .Help("(key x replica) entries evicted by the global cap or the TTL sweep")
                          .Register(r);
  snapshot_auth_ = &prometheus::BuildCounter()
                        .Name("inferencecache_snapshot_auth_total")
                        .Help("Auth decisions on /snapshot")
                        .Register(r);
  policy_auth_ = &prometheus::BuildCounter()
                      .Name("inferencecache_policy_auth_total")
                      .Help("Auth decisions on /policy")
                      .Register(r);
  probe_auth_ = &prometheus::BuildCounter()
                     .Name("inferencecache_probe_auth_total")
                     .Help("Auth decisions on /probe")
                     .Register(r);
  ingest_dropped_ = &prometheus::BuildCounter()
                         .Name("inferencecache_ingest_dropped_total")
                         .Help("Ingested PrefixEntries (or messages) dropped, by reason")
                         .Register(r);
  journal_writes_ = &prometheus::BuildCounter()
                         .Name("inferencecache_journal_writes_total")
                         .Help("Journal group commits by result")
                         .Register(r);
  journal_records_ = &prometheus::BuildCounter()
                          .Name("inferencecache_journal_records_total")
                          .Help("Records appended to the journal")
                          .Register(r)
                          .Add({});
  journal_available_ = &prometheus::BuildGauge()
                            .Name("inferencecache_journal_available")
                            .Help("1 while the journal accepts writes")
                            .Register(r)
                            .Add({});
  subscribers_dropped_ = &prometheus::BuildCounter()
                              .Name("inferencecache_stream_subscribers_dropped_total")
                              .Help("StreamCacheEvents subscribers cut off for falling behind")
                              .Register(r)
                              .Add({});
  tokenizations_ = &prometheus::BuildCounter()
                        .Name("inferencecache_tokenizations_total")
                        .Help("prompt_text tokenizations by outcome (ok, unknown_model, "
                              "text_too_large, busy, failed, timeout)")
                        .Register(r);
  tokenize_duration_ = &prometheus::BuildHistogram()
                            .Name("inferencecache_tokenization_duration_seconds")
                            .Help("prompt_text tokenization time (template render + encode), "
                                  "queueing included")
                            .Register(r)
                            .Add({}, prometheus::Histogram::BucketBoundaries{
                                         0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5});
  for (const char* o : {"ok", "unknown_model", "text_too_large", "busy", "failed", "timeout"})
    tokenizations_->Add({{"outcome", o}});
  http_rejected_ = &prometheus::BuildCounter()
                       .Name("inferencecache_http_connections_rejected_total")
                       .Help("HTTP connections closed at accept because the listener's "
                             "--http-max-connections were open")
                       .Register(r);
  http_open_ = &prometheus::BuildGauge()
                   .Name("inferencecache_http_connections_open")
                   .Help("HTTP connections open on the listener (as of the scrape)")
                   .Register(r);
  for (const char* listener : {"http", "admin"}) {
    http_rejected_->Add({{"listener", listener}});
    http_open_->Add({{"listener", listener}});
  }
  // LookupPDRoute, RenderTemplate and their stores (pd-templates.md §2.7, §3.6).
  topology_auth_ = &prometheus::BuildCounter()
                        .Name("inferencecache_topology_auth_total")
                        .Help("Auth decisions on /topology")
                        .Register(r);
  templates_auth_ = &prometheus::BuildCounter()
                         .Name("inferencecache_templates_auth_total")
                         .Help("Auth decisions on /templates")
                         .Register(r);
  topology_push_ = &prometheus::BuildCounter()
                        .Name("inferencecache_topology_push_total")
                        .Help("/topology pushes by result (ok, invalid, journal_unavailable)")
                        .Register(r);
  templates_push_ = &prometheus::BuildCounter()
                         .Name("inferencecache_templates_push_total")
                         .Help("/templates pushes by result (ok, invalid, journal_unavailable)")
                         .Register(r);
  for (const char* result : {"ok", "invalid", "journal_unavailable"}) {
    topology_push_->Add({{"result", result}});
    templates_push_->Add({{"result", result}});
  }
  pd_calls_ = &prometheus::BuildCounter()
                   .Name("inferencecache_lookup_pd_route_calls_total")
                   .Help("LookupPDRoute calls by model, reason code and whether a hint was given")
                   .Register(r);
  pd_latency_ = &prometheus::BuildHistogram()
                     .Name("inferencecache_lookup_pd_route_latency_seconds")
                     .Help("LookupPDRoute latency on the server")
                     .Register(r);
  pd_replicas_ = &prometheus::BuildGauge()
                      .Name("inferencecache_pd_topology_replicas")
                      .Help("PD pool members per topology and role: live, stale, desired")
                      .Register(r);
  render_calls_ = &prometheus::BuildCounter()
                       .Name("inferencecache_render_template_calls_total")
                       .Help("RenderTemplate calls by reason code")
                       .Register(r);
  render_latency_ = &prometheus::BuildHistogram()
                         .Name("inferencecache_render_template_latency_seconds")
                         .Help("RenderTemplate latency on the server")
                         .Register(r)
                         .Add({}, kLatencyBuckets);
  lookup_series_ = std::make_unique<call_series>(lookup_calls_, lookup_latency_);
  pd_series_ = std::make_unique<call_series>(pd_calls_, pd_latency_);
  render_series_ = std::make_unique<render_series>(render_calls_);
  journal_available_->Set(1);
  journal_position_ = &prometheus::BuildGauge()
                           .Name("inferencecache_journal_position")
                           .Help("Journal positions: applied (handed to apply) and stream_last "
                                 "(highest known); stream sequences in JetStream mode")
                           .Register(r);
  journal_apply_lag_ = &prometheus::BuildGauge()
                            .Name("inferencecache_journal_apply_lag_seconds")
                            .Help("0 when caught up, else the age of the last applied batch")
                            .Register(r)
                            .Add({});
  journal_nats_connected_ = &prometheus::BuildGauge()
                                 .Name("inferencecache_journal_nats_connected")
                                 .Help("1 while connected to NATS (1 in rocksdb mode)")
                                 .Register(r)
                                 .Add({});
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
  };
  journal_shared_bytes_ = gauge("inferencecache_journal_snapshot_shared_bytes",
                                "Size of the last shared snapshot this replica uploaded");
  journal_shared_seconds_ = gauge("inferencecache_journal_snapshot_shared_seconds",
                                  "Upload time of the last shared snapshot this replica wrote");
  journal_shared_age_ = gauge("inferencecache_journal_snapshot_shared_age_seconds",
                              "Since this replica first saw the current shared snapshot "
                              "manifest (0 = none yet)");
  journal_lease_holder_ = gauge("inferencecache_journal_lease_holder",
                                "1 while this replica holds the snapshotter lease");
  journal_publish_retries_ = counter("inferencecache_journal_publish_retries_total",
                                     "JetStream publishes repeated with the same Msg-Id");
  journal_unknown_outcomes_ = counter("inferencecache_journal_unknown_outcome_total",
                                      "Appends answered JOURNAL_UNAVAILABLE with an unknown outcome: "
                                      "not stored within --journal-append-timeout, or not back "
                                      "from the stream within --max-apply-lag");
  journal_gaps_ = counter("inferencecache_journal_gaps_total",
                          "Stream gaps (purged past this replica): it stopped applying");
  journal_halted_ = gauge("inferencecache_journal_halted",
                          "1 while this replica does not apply after a gap (reloading from the "
                          "shared snapshot, or none covers it yet): producers are refused");
  journal_reloads_ = counter("inferencecache_journal_reloads_total",
                             "Live reloads from the shared snapshot after a gap that completed");
  journal_resets_ = counter("inferencecache_journal_resets_total",
                            "Start-ups with --journal-reset that accepted losing purged records "
                            "no snapshot covered (the log names the range)");
  journal_stamp_skew_ = gauge("inferencecache_journal_stamp_skew_seconds",
                              "Stream time minus producer stamp of the last applied batch "
                              "(negative: its producer's clock ran ahead); records apply at the "
                              "stamps, so a skewed clock moves TTL time");
  journal_stamp_skew_over_ = counter("inferencecache_journal_stamp_skew_over_1s_total",
                                     "Applied batches whose stream time and producer stamp "
                                     "differed by more than 1 s (a skewed clock, or a publish "
                                     "retried across a NATS outage)");
  journal_consumer_resets_ = counter("inferencecache_journal_consumer_resets_total",
                                     "Ordered consumer resets handled by the NATS client");
  // Pre-create the drop reasons so dashboards see zeros.
  for (const char* reason :
       {"DROPPED_EMPTY_HASH_SCHEME", "DROPPED_MALFORMED_CHAIN", "RESERVED_TENANT"})
    ingest_dropped_->Add({{"reason", reason}});
}

server_metrics::~server_metrics() = default;

void server_metrics::set_up(bool up) { up_->Set(up ? 1 : 0); }

void server_metrics::set_tls_enabled(bool on) { tls_->Set(on ? 1 : 0); }

void server_metrics::on_auth(admin_route route, const std::string& result) {
  auto* fam = route == admin_route::snapshot   ? snapshot_auth_
              : route == admin_route::policy   ? policy_auth_
              : route == admin_route::topology ? topology_auth_
              : route == admin_route::templates ? templates_auth_
                                               : probe_auth_;
  fam->Add({{"result", result}}).Increment();
}

void server_metrics::set_index_entries(
    const std::vector<std::pair<std::string, std::int64_t>>& by_model) {
  std::lock_guard<std::mutex> lock(models_mu_);
  std::set<std::string> now;
  for (const auto& [model, n] : by_model) {
    index_entries_->Add({{"model", model}}).Set(static_cast<double>(n));
    now.insert(model);
    models_seen_.insert(model);
  }
  for (const auto& m : models_seen_)
    if (!now.count(m)) index_entries_->Add({{"model", m}}).Set(0);
}

void server_metrics::on_ingest(const std::string& tenant, const index::ingest_result& r) {
  if (r.dropped_empty_hash_scheme)
    ingest_dropped_->Add({{"reason", "DROPPED_EMPTY_HASH_SCHEME"}})
        .Increment(static_cast<double>(r.dropped_empty_hash_scheme));
  if (r.dropped_malformed_chain)
    ingest_dropped_->Add({{"reason", "DROPPED_MALFORMED_CHAIN"}})
        .Increment(static_cast<double>(r.dropped_malformed_chain));
  if (r.dropped_reserved_tenant)
    ingest_dropped_->Add({{"reason", "RESERVED_TENANT"}})
        .Increment(static_cast<double>(r.dropped_reserved_tenant));
  if (r.quota_evicted_keys)
    tenant_evictions_->Add({{"tenant_id", tenant}, {"reason", "over_entries"}})
        .Increment(static_cast<double>(r.quota_evicted_keys));
  if (r.cap_evicted_lru)
    index_evictions_->Add({{"algorithm", "lru"}, {"reason", "cap"}})
        .Increment(static_cast<double>(r.cap_evicted_lru));
  if (r.cap_evicted_lfu)
    index_evictions_->Add({{"algorithm", "lfu"}, {"reason", "cap"}})
        .Increment(static_cast<double>(r.cap_evicted_lfu));
}

void server_metrics::on_sweep(const index::sweep_result& r) {
  if (r.entries_removed_lru)
    index_evictions_->Add({{"algorithm", "lru"}, {"reason", "ttl"}})
        .Increment(static_cast<double>(r.entries_removed_lru));
  if (r.entries_removed_lfu)
    index_evictions_->Add({{"algorithm", "lfu"}, {"reason", "ttl"}})
        .Increment(static_cast<double>(r.entries_removed_lfu));
}

void server_metrics::on_journal_write(bool ok, std::size_t records) {
  journal_writes_->Add({{"result", ok ? "ok" : "error"}}).Increment();
  if (ok) journal_records_->Increment(static_cast<double>(records));
  journal_available_->Set(ok ? 1 : 0);
  journal_writable_ = ok;
}

void server_metrics::on_subscriber_dropped() { subscribers_dropped_->Increment(); }

void server_metrics::on_http_connection_rejected(const std::string& listener) {
  http_rejected_->Add({{"listener", listener}}).Increment();
}

void server_metrics::set_http_connections_open(const std::string& listener, std::size_t open) {
  http_open_->Add({{"listener", listener}}).Set(static_cast<double>(open));
}

void server_metrics::on_lookup(const std::string& model, const std::string& reason_code,
                               bool hint_used, double seconds) {
  lookup_series_->record( model, reason_code, hint_used, seconds);
}

void server_metrics::on_dropped(const std::string& reason, std::int64_t count) {
  ingest_dropped_->Add({{"reason", reason}}).Increment(static_cast<double>(count));
}

void server_metrics::on_tokenize(std::string_view outcome, double seconds) {
  tokenizations_->Add({{"outcome", std::string(outcome)}}).Increment();
  if (outcome == "ok") tokenize_duration_->Observe(seconds);
}

void server_metrics::on_store_push(const std::string& store, const std::string& result) {
  (store == "topology" ? topology_push_ : templates_push_)->Add({{"result", result}}).Increment();
}

void server_metrics::set_pd_topology_replicas(const std::vector<pd_replicas_row>& rows) {
  std::lock_guard<std::mutex> lock(models_mu_);
  std::set<std::vector<std::string>> now;
  for (const auto& row : rows) {
    pd_replicas_->Add({{"topology", row.topology}, {"role", row.role}, {"state", row.state}})
        .Set(row.value);
    now.insert({row.topology, row.role, row.state});
    pd_series_seen_.insert({row.topology, row.role, row.state});
  }
  for (const auto& k : pd_series_seen_)
    if (!now.count(k)) pd_replicas_->Add({{"topology", k[0]}, {"role", k[1]}, {"state", k[2]}}).Set(0);
}

void server_metrics::on_pd_lookup(const std::string& model, const std::string& reason_code,
                                  bool hint_used, double seconds) {
  pd_series_->record( model, reason_code, hint_used, seconds);
}

void server_metrics::on_render(const std::string& reason_code, double seconds) {
  render_series_->calls.get({reason_code}).Increment();
  render_latency_->Observe(seconds);
}

std::string server_metrics::render() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

std::vector<grpc_gateway::metric_sample> server_metrics::samples() const {
  std::vector<grpc_gateway::metric_sample> out;
  for (const auto& fam : registry_->Collect()) {
    for (const auto& m : fam.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& l : m.label) labels[l.name] = l.value;
      switch (fam.type) {
        case prometheus::MetricType::Counter:
          out.push_back({fam.name, "counter", labels, m.counter.value, fam.name});
          break;
        case prometheus::MetricType::Gauge:
          out.push_back({fam.name, "gauge", labels, m.gauge.value, fam.name});
          break;
        case prometheus::MetricType::Histogram: {
          out.push_back({fam.name + "_count", "histogram", labels,
                         static_cast<double>(m.histogram.sample_count), fam.name});
          out.push_back({fam.name + "_sum", "histogram", labels, m.histogram.sample_sum, fam.name});
          for (const auto& b : m.histogram.bucket) {
            auto with_le = labels;
            with_le["le"] = format_le(b.upper_bound);
            out.push_back({fam.name + "_bucket", "histogram", with_le,
                           static_cast<double>(b.cumulative_count), fam.name});
          }
          break;
        }
        default:
          break;
      }
    }
  }
  return out;
}

void server_metrics::set_journal_stats(const journal::log_stats& s) {
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  journal_position_->Add({{"kind", "applied"}}).Set(static_cast<double>(s.delivered_position));
  journal_position_->Add({{"kind", "stream_last"}}).Set(static_cast<double>(s.log_position));
  if (s.replicated)
    journal_position_->Add({{"kind", "stream_first"}}).Set(static_cast<double>(s.first_position));
  journal_shared_bytes_->Set(static_cast<double>(s.shared_snapshot_bytes));
  journal_shared_seconds_->Set(s.shared_snapshot_seconds);
  journal_shared_age_->Set(s.shared_snapshot_seen_ns > 0 && now_ns > s.shared_snapshot_seen_ns
                               ? double(now_ns - s.shared_snapshot_seen_ns) / 1e9
                               : 0.0);
  journal_lease_holder_->Set(s.lease_holder ? 1 : 0);
  journal_halted_->Set(s.halted ? 1 : 0);
  journal_apply_lag_->Set(journal::apply_lag_seconds(s, now_ns));
  journal_nats_connected_->Set(s.connected ? 1 : 0);
  journal_stamp_skew_->Set(double(s.stamp_skew_us) / 1e6);
  std::lock_guard<std::mutex> lk(journal_mu_);
  auto grow = [](prometheus::Counter* c, std::uint64_t now, std::uint64_t before) {
    if (now > before) c->Increment(static_cast<double>(now - before));
  };
  grow(journal_publish_retries_, s.publish_retries, journal_last_.publish_retries);
  grow(journal_unknown_outcomes_, s.unknown_outcomes, journal_last_.unknown_outcomes);
  grow(journal_gaps_, s.gaps, journal_last_.gaps);
  grow(journal_reloads_, s.reloads, journal_last_.reloads);
  grow(journal_consumer_resets_, s.consumer_resets, journal_last_.consumer_resets);
  grow(journal_resets_, s.journal_resets, journal_last_.journal_resets);
  grow(journal_stamp_skew_over_, s.stamp_skew_over, journal_last_.stamp_skew_over);
  journal_last_ = s;
}

}  // namespace ic::server
