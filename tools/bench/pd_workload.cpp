#include "tools/bench/pd_workload.hpp"

#include <nlohmann/json.hpp>

namespace ic::tools::bench {
namespace {

using json = nlohmann::json;

constexpr const char* kDecodePrefix = "bench-decode-";

/// One pool: every id listed, or the one `pattern` that matches them.
json pool_json(const char* name, const std::vector<std::string>& ids, const char* pattern,
               bool explicit_ids) {
  json p{{"name", name}};
  if (explicit_ids) p["replicaIds"] = ids;
  else p["replicaIdPatterns"] = json::array({pattern});
  p["replicas"] = ids.size();
  return p;
}

std::string tally_text(const std::map<std::string, std::uint64_t>& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return out.empty() ? "none" : out;
}

/// Empty when `t` (of RPC `rpc`) is healthy, else why not.
std::string check_one(const char* rpc, const answer_tally& t, double min_match) {
  const std::uint64_t calls = t.ok + t.errors;
  if (t.ok == 0) return std::string("no successful ") + rpc + " (" + std::to_string(t.errors) + " errors)";
  if (t.errors * 100 > calls)
    return std::string(rpc) + ": " + std::to_string(t.errors) + " of " + std::to_string(calls) +
           " calls failed";
  auto it = t.labels.find("PREFIX_MATCH");
  const std::uint64_t matched = it == t.labels.end() ? 0 : it->second;
  if (static_cast<double>(matched) < min_match * static_cast<double>(t.ok))
    return std::string(rpc) + ": only " + std::to_string(matched) + " of " + std::to_string(t.ok) +
           " answers were PREFIX_MATCH (" + tally_text(t.labels) +
           "); a ratio over fail-open answers means nothing";
  for (const auto& [label, n] : t.labels)
    if (label.rfind("WRONG_", 0) == 0)
      return std::string(rpc) + ": " + std::to_string(n) + " answers " + label + " (" +
             tally_text(t.labels) + ")";
  return "";
}

}  // namespace

std::string decode_replica_name(int i) { return kDecodePrefix + std::to_string(i); }

std::string validate(const workload& w, const pd_shape& s) {
  if (s.decode <= 0 || s.decode > 1024) return "--decode-replicas must be in [1, 1024]";
  if (w.shape().replicas > 1024) return "--replicas must be at most 1024 with pd (a pool's id limit)";
  if (w.shape().tenants > 256) return "--tenants must be at most 256 with pd (one topology each)";
  return "";
}

float pd_pressure(bool decode, int i) {
  const float step = 0.125f * static_cast<float>(i % 4);
  return decode ? 0.25f + step : step;
}

std::vector<pd_replica> pd_replicas(const workload& w, const pd_shape& s) {
  std::vector<pd_replica> out;
  for (int i = 0; i < w.shape().replicas; ++i) out.push_back({w.replica_name(i), pd_pressure(false, i), false});
  for (int i = 0; i < s.decode; ++i) out.push_back({decode_replica_name(i), pd_pressure(true, i), true});
  return out;
}

std::string pd_topology_json(const workload& w, const pd_shape& s) {
  std::vector<std::string> prefill, decode;
  for (const auto& r : pd_replicas(w, s)) (r.decode ? decode : prefill).push_back(r.id);
  json topologies = json::array();
  for (int t = 0; t < w.shape().tenants; ++t) {
    topologies.push_back(
        {{"namespace", w.tenant_name(t)},
         {"name", kPdTopologyName},
         {"hashScheme", w.shape().scheme},
         {"models", json::array({w.shape().model})},
         {"transport", kPdTransport},
         {"prefillPools", json::array({pool_json("prefill", prefill, "bench-replica-*", s.explicit_ids)})},
         {"decodePools", json::array({pool_json("decode", decode, "bench-decode-*", s.explicit_ids)})},
         {"selection", {{"statsMaxAgeMs", 3'600'000}}}});
  }
  return json{{"version", 1}, {"topologies", topologies}}.dump();
}

std::string pd_answer_label(const pd_answer& a, const std::string& holder, const pd_shape& s) {
  // LOCAL_PREFILL (prefill = decode, Direct) cannot come from this topology: tallied as is.
  const bool checked = a.reason_code == "PREFIX_MATCH" || a.reason_code == "AFFINITY_HINT";
  if (!checked) return a.reason_code.empty() ? "NO_HINT" : a.reason_code;
  if (a.reason_code == "PREFIX_MATCH" && a.prefill != holder) return "WRONG_PREFILL";
  bool lowest_decode = false;
  const std::string prefix = kDecodePrefix;
  if (a.decode.rfind(prefix, 0) == 0) {
    const std::string num = a.decode.substr(prefix.size());
    const bool digits = !num.empty() && num.size() < 6 &&
                        num.find_first_not_of("0123456789") == std::string::npos;
    const int i = digits ? std::stoi(num) : -1;
    lowest_decode = digits && i < s.decode && pd_pressure(true, i) == pd_pressure(true, 0);
  }
  if (!lowest_decode) return "WRONG_DECODE";
  if (a.transport != kPdTransport) return "WRONG_TRANSPORT";
  return a.reason_code;
}

std::string pd_verdict(const answer_tally& route, const answer_tally& pd, double min_match) {
  std::string why = check_one("LookupRoute", route, min_match);
  if (why.empty()) why = check_one("LookupPDRoute", pd, min_match);
  return why;
}

}  // namespace ic::tools::bench
