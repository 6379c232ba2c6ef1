#include "tools/kvevent_subscriber/stats.hpp"

#include <algorithm>
#include <cmath>

#include "tools/kvevent_subscriber/prom_text.hpp"

namespace ic::kvevent {
namespace {

struct view {
  const std::vector<prom_sample>& all;
  const std::string& model;

  bool keep(const prom_sample& s) const {
    if (model.empty()) return true;
    auto it = s.labels.find("model_name");
    return it != s.labels.end() && it->second == model;
  }
  bool present(const std::string& name) const {
    return std::any_of(all.begin(), all.end(), [&](const prom_sample& s) { return s.name == name; });
  }
  // Max over the kept series of a gauge; nullopt when absent.
  std::optional<double> max_of(const std::string& name) const {
    std::optional<double> out;
    for (const auto& s : all) {
      if (s.name != name || !keep(s) || !std::isfinite(s.value)) continue;
      out = out ? std::max(*out, s.value) : s.value;
    }
    return out;
  }
  // Sum over the kept series, skipping `priority != ""`; nullopt when absent, or when a
  // value is not finite (a broken load gauge fails loud).
  std::optional<double> load_sum(const std::string& name, bool* non_finite) const {
    std::optional<double> out;
    for (const auto& s : all) {
      if (s.name != name || !keep(s)) continue;
      auto p = s.labels.find("priority");
      if (p != s.labels.end() && !p->second.empty()) continue;
      if (!std::isfinite(s.value)) {
        *non_finite = true;
        continue;
      }
      out = out.value_or(0) + s.value;
    }
    return out;
  }
  // A counter as `<name>_total` first, else `<name>`; NaN/Inf skipped.
  std::optional<double> counter(const std::string& name) const {
    for (const std::string& n : {name + "_total", name}) {
      std::optional<double> out;
      for (const auto& s : all) {
        if (s.name != n || !keep(s) || !std::isfinite(s.value)) continue;
        out = out.value_or(0) + s.value;
      }
      if (out) return out;
    }
    return std::nullopt;
  }
};

double clamp01(double v) { return std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0; }

}  // namespace

const char* scrape_result_name(scrape_result r) {
  switch (r) {
    case scrape_result::ok: return "ok";
    case scrape_result::http_error: return "http_error";
    case scrape_result::parse_error: return "parse_error";
    case scrape_result::unrecognized: return "unrecognized";
    default: return "incomplete";
  }
}

std::variant<stats_sample, scrape_result> stats_computer::compute(std::string_view body) {
  std::string err;
  auto samples = parse_prom_text(body, &err);
  if (!samples) return scrape_result::parse_error;
  view v{*samples, opts_.model_name};
  stats_sample out;
  double usage = 0;
  double load = 0;
  bool non_finite = false;
  if (opts_.sglang) {
    if (!v.present("sglang:token_usage") && !v.present("sglang:cache_hit_rate") &&
        !v.present("sglang:num_running_reqs") && !v.present("sglang:num_queue_reqs")) {
      return scrape_result::unrecognized;
    }
    auto running = v.load_sum("sglang:num_running_reqs", &non_finite);
    auto queued = v.load_sum("sglang:num_queue_reqs", &non_finite);
    if (!running || !queued || non_finite) return scrape_result::incomplete;
    load = *running + *queued;
    usage = v.max_of("sglang:token_usage").value_or(0);
    out.hit_rate = clamp01(v.max_of("sglang:cache_hit_rate").value_or(0));
  } else {
    static const char* families[] = {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                                     "vllm:cpu_cache_usage_perc", "vllm:num_requests_running",
                                     "vllm:num_requests_waiting", "vllm:prefix_cache_hits",
                                     "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries",
                                     "vllm:prefix_cache_queries_total"};
    if (std::none_of(std::begin(families), std::end(families), [&](const char* f) { return v.present(f); })) {
      return scrape_result::unrecognized;
    }
    auto running = v.load_sum("vllm:num_requests_running", &non_finite);
    auto waiting = v.load_sum("vllm:num_requests_waiting", &non_finite);
    if (!running || !waiting || non_finite) return scrape_result::incomplete;
    load = *running + *waiting;
    auto kv = v.max_of("vllm:kv_cache_usage_perc");
    auto gpu = v.max_of("vllm:gpu_cache_usage_perc");
    auto cpu = v.max_of("vllm:cpu_cache_usage_perc");
    switch (opts_.tier) {
      case cache_tier_flag::kv: usage = kv.value_or(0); break;
      case cache_tier_flag::gpu: usage = gpu.value_or(0); break;
      case cache_tier_flag::cpu: usage = cpu.value_or(0); break;
      default: usage = kv ? *kv : std::max(gpu.value_or(0), cpu.value_or(0)); break;
    }
    auto hits = v.counter("vllm:prefix_cache_hits");
    auto queries = v.counter("vllm:prefix_cache_queries");
    if (hits && queries) {
      if (baseline_) {
        double dh = *hits - baseline_->first;
        double dq = *queries - baseline_->second;
        out.hit_rate = (dh < 0 || dq <= 0) ? 0 : clamp01(dh / dq);
      }
      baseline_ = std::make_pair(*hits, *queries);  // first scrape, reset, or a delta taken
    }
    out.t2_hit_tokens = static_cast<std::int64_t>(v.counter("vllm:external_prefix_cache_hits").value_or(0));
    out.t2_query_tokens = static_cast<std::int64_t>(v.counter("vllm:external_prefix_cache_queries").value_or(0));
  }
  out.pressure = (opts_.ceiling > 0 && load > 0) ? clamp01(load / static_cast<double>(opts_.ceiling)) : 0;
  out.cache_memory_bytes =
      opts_.cache_size_bytes > 0 ? static_cast<std::int64_t>(usage * static_cast<double>(opts_.cache_size_bytes)) : 0;
  return out;
}

void stale_tracker::failure(const std::string& why) {
  ++failures_;
  if (!log_) return;
  if (failures_ < 3) {
    log_->warn("engine load stats update failed; will retry", {{"error", why}, {"failures", std::to_string(failures_)}});
  } else if (failures_ == 3) {
    log_->error(delivered_ ? "engine load stats are stale; the server keeps the last delivered sample"
                           : "engine load stats were never delivered; the server has no load signal for this replica",
                {{"event", "load_signal_stale"}, {"failures", std::to_string(failures_)}, {"error", why}});
  } else {
    log_->debug("engine load stats update failed; will retry", {{"error", why}, {"failures", std::to_string(failures_)}});
  }
}

void stale_tracker::success() {
  if (failures_ >= 3 && log_) {
    log_->info("engine load stats recovered", {{"event", "load_signal_recovered"},
                                               {"after_failures", std::to_string(failures_)}});
  }
  failures_ = 0;
  delivered_ = true;
}

}  // namespace ic::kvevent
