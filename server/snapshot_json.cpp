#include "server/snapshot_json.hpp"

#include <charconv>
#include <cmath>
#include <ctime>

#include <nlohmann/json.hpp>

namespace ic::server {
namespace {

std::string quote(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::string go_float32(float v) {
  if (std::isnan(v) || std::isinf(v)) return "0";  // Go refuses these; the index never stores them
  char buf[64];
  const float a = std::fabs(v);
  std::to_chars_result r;
  if (a != 0 && (a < 1e-6f || a >= 1e21f)) {
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    // Go writes a two-digit exponent at least ("1e-07"), like C's %e.
    auto e = s.find('e');
    if (e != std::string::npos) {
      std::string mant = s.substr(0, e);
      std::string exp = s.substr(e + 1);
      char sign = '+';
      if (exp[0] == '-' || exp[0] == '+') {
        sign = exp[0];
        exp = exp.substr(1);
      }
      if (exp.size() < 2) exp = "0" + exp;
      s = mant + "e" + sign + exp;
    }
    return s;
  }
  r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

std::string go_time(std::optional<index::micros> us) {
  if (!us) return "0001-01-01T00:00:00Z";
  std::int64_t secs = *us / 1'000'000;
  std::int64_t frac = *us % 1'000'000;
  if (frac < 0) {
    frac += 1'000'000;
    secs -= 1;
  }
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char base[32];
  std::strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = base;
  if (frac != 0) {
    char digits[16];
    std::snprintf(digits, sizeof digits, "%06lld000", static_cast<long long>(frac));
    std::string f = digits;
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + "Z";
}

std::string snapshot_json(const index::snapshot_view& view) {
  std::string out = "{\"replicas\":";
  if (view.replicas.empty()) {
    out += "null";
  } else {
    out += "[";
    bool first = true;
    for (const auto& r : view.replicas) {
      if (!first) out += ",";
      first = false;
      out += "{\"replicaId\":" + quote(r.replica_id);
      if (!r.tenant.empty()) out += ",\"tenant\":" + quote(r.tenant);
      out += ",\"cacheMemoryBytes\":" + std::to_string(r.cache_memory_bytes);
      out += ",\"hitRate\":" + go_float32(r.hit_rate);
      out += ",\"pressure\":" + go_float32(r.pressure);
      out += ",\"lastUpdate\":" + quote(go_time(r.last_update));
      out += ",\"prefixCount\":" + std::to_string(r.prefix_count);
      out += ",\"lastEventAt\":" + quote(go_time(r.last_event_at));
      if (r.stats_reported) out += ",\"statsReported\":true";
      if (r.t2_hit_tokens != 0) out += ",\"t2HitTokens\":" + std::to_string(r.t2_hit_tokens);
      if (r.t2_query_tokens != 0) out += ",\"t2QueryTokens\":" + std::to_string(r.t2_query_tokens);
      out += "}";
    }
    out += "]";
  }
  out += ",\"tenants\":";
  if (view.tenants.empty()) {
    out += "null";
  } else {
    out += "[";
    bool first = true;
    for (const auto& t : view.tenants) {
      if (!first) out += ",";
      first = false;
      out += "{\"tenantId\":" + quote(t.tenant_id);
      out += ",\"indexEntries\":" + std::to_string(t.index_entries);
      out += ",\"hitRate\":" + go_float32(t.hit_rate);
      if (t.hit_rate_reported) out += ",\"hitRateReported\":true";
      out += ",\"memoryUsed\":0}";
    }
    out += "]";
  }
  out += ",\"totalPrefixes\":" + std::to_string(view.total_prefixes);
  out += ",\"hotPrefixes\":" + std::to_string(view.hot_prefixes);
  out += "}";
  return out;
}

}  // namespace ic::server
