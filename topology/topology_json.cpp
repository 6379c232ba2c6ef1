#include "topology/topology_json.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "admin_json/json_reader.hpp"
#include "admin_json/ref.hpp"
#include "topology/glob.hpp"

namespace ic::topology {
namespace {

using admin_json::json;
using admin_json::reader;

constexpr const char* decode_prefix = "decode topology: ";
constexpr const char* invalid_prefix = "invalid topology: ";

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

bool decode_pool(reader& r, const json& v, const std::string& path, pool& out) {
  if (!r.object(v, path, {"name", "acceleratorType", "replicaIds", "replicaIdPatterns",
                          "replicas", "matchLabels"})) {
    return false;
  }
  if (auto* f = reader::field(v, "name")) r.string(*f, reader::member(path, "name"), out.name);
  if (auto* f = reader::field(v, "acceleratorType")) {
    r.string(*f, reader::member(path, "acceleratorType"), out.accelerator_type);
  }
  if (auto* f = reader::field(v, "replicaIds")) {
    r.string_array(*f, reader::member(path, "replicaIds"), out.replica_ids);
  }
  if (auto* f = reader::field(v, "replicaIdPatterns")) {
    r.string_array(*f, reader::member(path, "replicaIdPatterns"), out.replica_id_patterns);
  }
  if (auto* f = reader::field(v, "replicas")) {
    std::int64_t n = 0;
    if (r.integer(*f, reader::member(path, "replicas"), n, 0, 1'000'000)) out.replicas = n;
  }
  if (auto* f = reader::field(v, "matchLabels")) {
    r.string_map(*f, reader::member(path, "matchLabels"), out.match_labels);
  }
  return !r.failed();
}

bool decode_pools(reader& r, const json& v, const std::string& path, std::vector<pool>& out) {
  if (!r.array(v, path)) return false;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.emplace_back();
    if (!decode_pool(r, v[i], reader::element(path, i), out.back())) return false;
  }
  return true;
}

bool decode_accelerator(reader& r, const json& v, const std::string& path,
                        accelerator_type& out) {
  if (!r.object(v, path, {"name", "vendor", "model", "transport", "matchLabels"})) return false;
  if (auto* f = reader::field(v, "name")) r.string(*f, reader::member(path, "name"), out.name);
  if (auto* f = reader::field(v, "vendor")) r.string(*f, reader::member(path, "vendor"), out.vendor);
  if (auto* f = reader::field(v, "model")) r.string(*f, reader::member(path, "model"), out.model);
  if (auto* f = reader::field(v, "transport")) {
    r.string(*f, reader::member(path, "transport"), out.transport);
  }
  if (auto* f = reader::field(v, "matchLabels")) {
    r.string_map(*f, reader::member(path, "matchLabels"), out.match_labels);
  }
  return !r.failed();
}

bool decode_selection(reader& r, const json& v, const std::string& path, selection_options& out) {
  if (!r.object(v, path, {"statsMaxAgeMs", "maxDecodePressure", "maxPrefillPressure",
                          "localPrefillMaxUncachedTokens", "localPrefillWhenPrefillBusy"})) {
    return false;
  }
  if (auto* f = reader::field(v, "statsMaxAgeMs")) {
    r.integer(*f, reader::member(path, "statsMaxAgeMs"), out.stats_max_age_ms, 1, 3'600'000);
  }
  for (auto [key, slot] : {std::pair<const char*, float*>{"maxDecodePressure", &out.max_decode_pressure},
                           {"maxPrefillPressure", &out.max_prefill_pressure}}) {
    if (auto* f = reader::field(v, key)) {
      const std::string p = reader::member(path, key);
      if (r.float32(*f, p, *slot) && !(*slot > 0.0f && *slot <= 1e6f)) {
        r.fail(p, "must be in (0, 1000000]");
      }
    }
  }
  if (auto* f = reader::field(v, "localPrefillMaxUncachedTokens")) {
    r.integer(*f, reader::member(path, "localPrefillMaxUncachedTokens"),
              out.local_prefill_max_uncached_tokens, 0, INT32_MAX);
  }
  if (auto* f = reader::field(v, "localPrefillWhenPrefillBusy")) {
    r.boolean(*f, reader::member(path, "localPrefillWhenPrefillBusy"),
              out.local_prefill_when_prefill_busy);
  }
  return !r.failed();
}

bool decode_topology(reader& r, const json& v, const std::string& path, topology& out) {
  if (!r.object(v, path, {"namespace", "name", "hashScheme", "models", "transport",
                          "prefillPools", "decodePools", "acceleratorTypes", "selection"})) {
    return false;
  }
  if (auto* f = reader::field(v, "namespace")) {
    r.string(*f, reader::member(path, "namespace"), out.namespace_name);
  }
  if (auto* f = reader::field(v, "name")) r.string(*f, reader::member(path, "name"), out.name);
  if (auto* f = reader::field(v, "hashScheme")) {
    r.string(*f, reader::member(path, "hashScheme"), out.hash_scheme);
  }
  if (auto* f = reader::field(v, "models")) {
    r.string_array(*f, reader::member(path, "models"), out.models);
  }
  if (auto* f = reader::field(v, "transport")) {
    r.string(*f, reader::member(path, "transport"), out.transport);
  }
  if (auto* f = reader::field(v, "prefillPools")) {
    decode_pools(r, *f, reader::member(path, "prefillPools"), out.prefill_pools);
  }
  if (auto* f = reader::field(v, "decodePools")) {
    decode_pools(r, *f, reader::member(path, "decodePools"), out.decode_pools);
  }
  if (auto* f = reader::field(v, "acceleratorTypes")) {
    const std::string p = reader::member(path, "acceleratorTypes");
    if (r.array(*f, p)) {
      for (std::size_t i = 0; i < f->size() && !r.failed(); ++i) {
        out.accelerator_types.emplace_back();
        decode_accelerator(r, (*f)[i], reader::element(p, i), out.accelerator_types.back());
      }
    }
  }
  if (auto* f = reader::field(v, "selection")) {
    decode_selection(r, *f, reader::member(path, "selection"), out.selection);
  }
  return !r.failed();
}

bool valid_transport(std::string_view t) {
  return t == transport::mooncake || t == transport::nixl || t == transport::direct;
}

bool check_pools(reader& r, const topology& t, const std::string& path,
                 const std::vector<pool>& pools) {
  if (pools.empty()) return r.fail(path, "needs at least one pool");
  std::set<std::string> names;
  for (std::size_t i = 0; i < pools.size(); ++i) {
    const pool& p = pools[i];
    const std::string pp = reader::element(path, i);
    if (p.name.empty()) return r.fail(reader::member(pp, "name"), "must not be empty");
    if (!names.insert(p.name).second) {
      return r.fail(reader::member(pp, "name"), "duplicate pool name " + admin_json::quote(p.name));
    }
    if (p.replica_ids.empty() && p.replica_id_patterns.empty()) {
      return r.fail(pp, "needs replicaIds or replicaIdPatterns");
    }
    if (p.replica_ids.size() > max_pool_ids) {
      return r.fail(reader::member(pp, "replicaIds"), "more than 1024 ids");
    }
    if (p.replica_id_patterns.size() > max_pool_patterns) {
      return r.fail(reader::member(pp, "replicaIdPatterns"), "more than 32 patterns");
    }
    for (std::size_t k = 0; k < p.replica_ids.size(); ++k) {
      if (p.replica_ids[k].empty()) {
        return r.fail(reader::element(reader::member(pp, "replicaIds"), k), "must not be empty");
      }
    }
    for (std::size_t k = 0; k < p.replica_id_patterns.size(); ++k) {
      const std::string kp = reader::element(reader::member(pp, "replicaIdPatterns"), k);
      if (p.replica_id_patterns[k].empty()) return r.fail(kp, "must not be empty");
      if (!glob::compile(p.replica_id_patterns[k])) return r.fail(kp, "longer than 255 bytes");
    }
    if (!p.accelerator_type.empty()) {
      bool found = false;
      for (const auto& a : t.accelerator_types) found = found || a.name == p.accelerator_type;
      if (!found) {
        return r.fail(reader::member(pp, "acceleratorType"),
                      "names no acceleratorTypes entry " + admin_json::quote(p.accelerator_type));
      }
    }
  }
  return true;
}

bool check_topology(reader& r, const topology& t, const std::string& path) {
  if (!admin_json::check_ref_part(r, reader::member(path, "namespace"), t.namespace_name)) return false;
  if (!admin_json::check_ref_part(r, reader::member(path, "name"), t.name)) return false;
  if (t.hash_scheme.empty()) return r.fail(reader::member(path, "hashScheme"), "must not be empty");
  for (std::size_t i = 0; i < t.models.size(); ++i) {
    if (t.models[i].empty()) {
      return r.fail(reader::element(reader::member(path, "models"), i), "must not be empty");
    }
  }
  if (!t.transport.empty() && !valid_transport(t.transport)) {
    return r.fail(reader::member(path, "transport"), "must be \"Mooncake\", \"NIXL\" or \"Direct\"");
  }
  std::set<std::string> types;
  for (std::size_t i = 0; i < t.accelerator_types.size(); ++i) {
    const auto& a = t.accelerator_types[i];
    const std::string ap = reader::element(reader::member(path, "acceleratorTypes"), i);
    if (a.name.empty()) return r.fail(reader::member(ap, "name"), "must not be empty");
    if (!types.insert(a.name).second) {
      return r.fail(reader::member(ap, "name"), "duplicate accelerator type " + admin_json::quote(a.name));
    }
    if (!a.transport.empty() && !valid_transport(a.transport)) {
      return r.fail(reader::member(ap, "transport"), "must be \"Mooncake\", \"NIXL\" or \"Direct\"");
    }
  }
  if (!check_pools(r, t, reader::member(path, "prefillPools"), t.prefill_pools)) return false;
  if (!check_pools(r, t, reader::member(path, "decodePools"), t.decode_pools)) return false;
  if (t.transport.empty()) {
    for (const auto& p : t.prefill_pools) {
      for (const auto& d : t.decode_pools) {
        if (!derive_transport(t, p, d)) {
          return r.fail(reader::member(path, "transport"),
                        "unset and not derivable for pool pair (" + admin_json::quote(p.name) +
                            ", " + admin_json::quote(d.name) + ")");
        }
      }
    }
  }
  return true;
}

void normalise(topology& t) {
  sort_unique(t.models);
  for (auto* side : {&t.prefill_pools, &t.decode_pools}) {
    for (auto& p : *side) {
      sort_unique(p.replica_ids);
      sort_unique(p.replica_id_patterns);
    }
  }
}

json encode_labels(const std::map<std::string, std::string>& labels) {
  json o = json::object();
  for (const auto& [k, v] : labels) o[k] = v;
  return o;
}

json encode_pools(const std::vector<pool>& pools) {
  json a = json::array();
  for (const auto& p : pools) {
    json o = json::object();
    o["name"] = p.name;
    if (!p.accelerator_type.empty()) o["acceleratorType"] = p.accelerator_type;
    if (!p.replica_ids.empty()) o["replicaIds"] = p.replica_ids;
    if (!p.replica_id_patterns.empty()) o["replicaIdPatterns"] = p.replica_id_patterns;
    if (p.replicas) o["replicas"] = *p.replicas;
    if (!p.match_labels.empty()) o["matchLabels"] = encode_labels(p.match_labels);
    a.push_back(std::move(o));
  }
  return a;
}

}  // namespace

policy::result<topology_set> decode_topology_set(std::string_view text) {
  auto doc = admin_json::parse_document(text, decode_prefix);
  if (!doc) return policy::error{doc.error()};
  reader r(decode_prefix);
  topology_set set;
  const auto decoded = admin_json::decode_versioned_list(
      r, *doc, "topologies", "topology", [&](const json& v, const std::string& path) {
        set.topologies.emplace_back();
        return decode_topology(r, v, path, set.topologies.back());
      });
  if (!decoded) return policy::error{decoded.error()};
  reader v(invalid_prefix);
  if (set.topologies.size() > max_topologies) v.fail("topologies", "more than 256 topologies");
  std::set<std::pair<std::string, std::string>> refs;
  for (std::size_t i = 0; i < set.topologies.size() && !v.failed(); ++i) {
    const topology& t = set.topologies[i];
    const std::string path = reader::element("topologies", i);
    if (!check_topology(v, t, path)) break;
    if (!refs.emplace(t.namespace_name, t.name).second) {
      v.fail(path, "duplicate ref " + admin_json::quote(t.namespace_name + "/" + t.name));
    }
  }
  if (auto checked = v.status(); !checked) return policy::error{checked.error()};
  for (auto& t : set.topologies) normalise(t);
  admin_json::sort_by_ref(set.topologies, [](const topology& t) {
    return std::tie(t.namespace_name, t.name);
  });
  return set;
}

policy::result<topology_set> parse_topology_body(std::string_view body) {
  if (body.size() > max_topology_body_bytes) {
    return policy::error{std::string(decode_prefix) + "body larger than 1048576 bytes"};
  }
  return decode_topology_set(body);
}

std::string encode_topology_set(const topology_set& set) {
  json root = json::object();
  root["version"] = set.version;
  json list = json::array();
  for (const auto& t : set.topologies) {
    json o = json::object();
    o["namespace"] = t.namespace_name;
    o["name"] = t.name;
    o["hashScheme"] = t.hash_scheme;
    if (!t.models.empty()) o["models"] = t.models;
    if (!t.transport.empty()) o["transport"] = t.transport;
    o["prefillPools"] = encode_pools(t.prefill_pools);
    o["decodePools"] = encode_pools(t.decode_pools);
    if (!t.accelerator_types.empty()) {
      json a = json::array();
      for (const auto& x : t.accelerator_types) {
        json e = json::object();
        e["name"] = x.name;
        if (!x.vendor.empty()) e["vendor"] = x.vendor;
        if (!x.model.empty()) e["model"] = x.model;
        if (!x.transport.empty()) e["transport"] = x.transport;
        if (!x.match_labels.empty()) e["matchLabels"] = encode_labels(x.match_labels);
        a.push_back(std::move(e));
      }
      o["acceleratorTypes"] = std::move(a);
    }
    json s = json::object();
    s["statsMaxAgeMs"] = t.selection.stats_max_age_ms;
    s["maxDecodePressure"] = admin_json::shortest_double(t.selection.max_decode_pressure);
    s["maxPrefillPressure"] = admin_json::shortest_double(t.selection.max_prefill_pressure);
    s["localPrefillMaxUncachedTokens"] = t.selection.local_prefill_max_uncached_tokens;
    s["localPrefillWhenPrefillBusy"] = t.selection.local_prefill_when_prefill_busy;
    o["selection"] = std::move(s);
    list.push_back(std::move(o));
  }
  root["topologies"] = std::move(list);
  return root.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ic::topology
