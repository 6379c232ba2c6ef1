#include "policy/policy_json.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "admin_json/json_reader.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::policy {
namespace {

using ojson = nlohmann::ordered_json;
using admin_json::kind_of;
using admin_json::one_line;
using admin_json::quote;
using admin_json::reader;
using admin_json::shortest_double;

constexpr const char* decode_prefix = "decode policy snapshot: ";

/// Compares ASCII-case-insensitively (Go's decoder matches keys this way).
bool fold_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

/// Go's `encoding/json` rules over the shared walk state (`admin_json::reader`: the first
/// error in document order wins and stops the walk): folded keys, null as "leave" or "nil",
/// Go's message wording.
class decoder {
 public:
  /// Returns success, or the first error as one line `decode policy snapshot: <Go's message>`.
  status outcome() const { return r_.status(); }

  bool type_error(const ojson& v, const std::string& path, std::string_view type) {
    return fail("json: cannot unmarshal " + kind_of(v) + " into field " + path + " of type " +
                std::string(type));
  }
  bool unknown_field(std::string_view key, const std::string& path) {
    return fail("json: unknown field " + quote(key) + (path.empty() ? "" : " in " + path));
  }

  /// Decodes a JSON integer within [lo, hi]; null leaves `out` untouched.
  template <class Int>
  bool integer(const ojson& v, const std::string& path, std::string_view type, Int& out) {
    constexpr auto lo = std::numeric_limits<Int>::min();
    constexpr auto hi = std::numeric_limits<Int>::max();
    if (v.is_null()) return true;
    if (v.is_number_integer() && !v.is_number_unsigned()) {
      const auto x = v.get<std::int64_t>();
      if (x < static_cast<std::int64_t>(lo) || x > static_cast<std::int64_t>(hi)) {
        return type_error(v, path, type);
      }
      out = static_cast<Int>(x);
      return true;
    }
    if (v.is_number_unsigned()) {
      const auto x = v.get<std::uint64_t>();
      if (x > static_cast<std::uint64_t>(hi)) return type_error(v, path, type);
      out = static_cast<Int>(x);
      return true;
    }
    return type_error(v, path, type);
  }

  /// Decodes any JSON number within float32 range into an optional; null resets it.
  bool float32(const ojson& v, const std::string& path, std::optional<float>& out) {
    if (v.is_null()) {
      out.reset();
      return true;
    }
    if (!v.is_number()) return type_error(v, path, "float32");
    const double d = v.get<double>();
    // Values that round to ±FLT_MAX are accepted; from FLT_MAX + half an ulp on they
    // would round to infinity, which Go's ParseFloat(s, 32) reports as out of range.
    static const double limit = static_cast<double>(FLT_MAX) + std::ldexp(1.0, 103);
    if (!std::isfinite(d) || std::fabs(d) >= limit) return type_error(v, path, "float32");
    if (std::fabs(d) > static_cast<double>(FLT_MAX)) {
      out = d < 0 ? -FLT_MAX : FLT_MAX;
    } else {
      out = static_cast<float>(d);
    }
    return true;
  }

  /// Decodes a JSON boolean into an optional (Go *bool); null resets it.
  bool bool_ptr(const ojson& v, const std::string& path, std::optional<bool>& out) {
    if (v.is_null()) {
      out.reset();
      return true;
    }
    if (!v.is_boolean()) return type_error(v, path, "bool");
    out = v.get<bool>();
    return true;
  }

  /// Decodes a JSON string; null leaves `out` untouched.
  bool string(const ojson& v, const std::string& path, std::string& out) {
    if (v.is_null()) return true;
    if (!v.is_string()) return type_error(v, path, "string");
    out = v.get<std::string>();
    return true;
  }

  bool strategy(const ojson& v, const std::string& path, std::optional<policy_strategy>& out) {
    if (v.is_null()) {
      out.reset();
      return true;
    }
    if (!v.is_object()) return type_error(v, path, "object");
    if (!out) out.emplace();
    for (const auto& [key, val] : v.items()) {
      const std::string p = reader::member(path, key);
      bool ok = true;
      if (fold_equal(key, "enableChainMatching")) {
        ok = bool_ptr(val, p, out->enable_chain_matching);
      } else if (fold_equal(key, "requireChain")) {
        ok = bool_ptr(val, p, out->require_chain);
      } else if (fold_equal(key, "enableTenantHot")) {
        ok = bool_ptr(val, p, out->enable_tenant_hot);
      } else {
        ok = unknown_field(key, path);
      }
      if (!ok) return false;
    }
    return true;
  }

  bool policy(const ojson& v, const std::string& path, cache_policy& out) {
    if (v.is_null()) return true;  // Go: null into a struct is a no-op (zero entry).
    if (!v.is_object()) return type_error(v, path, "object");
    for (const auto& [key, val] : v.items()) {
      const std::string p = reader::member(path, key);
      bool ok = true;
      if (fold_equal(key, "namespace")) {
        ok = string(val, p, out.namespace_name);
      } else if (fold_equal(key, "evictionTTL")) {
        ok = integer(val, p, "int64", out.eviction_ttl_ns);
      } else if (fold_equal(key, "minimumPrefixTokens")) {
        ok = integer(val, p, "int32", out.minimum_prefix_tokens);
      } else if (fold_equal(key, "minimumMatchedTokens")) {
        ok = integer(val, p, "int32", out.minimum_matched_tokens);
      } else if (fold_equal(key, "routingFloorScore")) {
        ok = float32(val, p, out.routing_floor_score);
      } else if (fold_equal(key, "lookupTimeoutMs")) {
        ok = integer(val, p, "int32", out.lookup_timeout_ms);
      } else if (fold_equal(key, "affinityRouting")) {
        ok = bool_ptr(val, p, out.affinity_routing);
      } else if (fold_equal(key, "eviction")) {
        ok = string(val, p, out.eviction);
      } else if (fold_equal(key, "strategy")) {
        ok = strategy(val, p, out.strategy);
      } else {
        ok = unknown_field(key, path);
      }
      if (!ok) return false;
    }
    return true;
  }

  bool tenant(const ojson& v, const std::string& path, cache_tenant& out) {
    if (v.is_null()) return true;
    if (!v.is_object()) return type_error(v, path, "object");
    for (const auto& [key, val] : v.items()) {
      const std::string p = reader::member(path, key);
      bool ok = true;
      if (fold_equal(key, "tenantID")) {
        ok = string(val, p, out.tenant_id);
      } else if (fold_equal(key, "maxIndexEntries")) {
        ok = integer(val, p, "int64", out.max_index_entries);
      } else if (fold_equal(key, "isolationMode")) {
        ok = string(val, p, out.isolation_mode);
      } else {
        ok = unknown_field(key, path);
      }
      if (!ok) return false;
    }
    return true;
  }

  template <class T, class Fn>
  bool array(const ojson& v, const std::string& path, std::vector<T>& out, Fn&& element) {
    if (v.is_null()) {
      out.clear();
      return true;
    }
    if (!v.is_array()) return type_error(v, path, "array");
    out.clear();
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      out.emplace_back();
      if (!(this->*element)(v[i], reader::element(path, i), out.back())) return false;
    }
    return true;
  }

  bool snapshot(const ojson& v, policy_set& out) {
    if (v.is_null()) return true;  // Go: leaves version 0, rejected by the version check.
    if (!v.is_object()) {
      return fail("json: cannot unmarshal " + kind_of(v) + " into policy snapshot of type object");
    }
    for (const auto& [key, val] : v.items()) {
      bool ok = true;
      if (fold_equal(key, "version")) {
        ok = integer(val, key, "int", out.version);
      } else if (fold_equal(key, "policies")) {
        ok = array(val, "policies", out.policies, &decoder::policy);
      } else if (fold_equal(key, "tenants")) {
        ok = array(val, "tenants", out.tenants, &decoder::tenant);
      } else {
        ok = unknown_field(key, "");
      }
      if (!ok) return false;
    }
    return true;
  }

 private:
  bool fail(const std::string& msg) { return r_.fail("", msg); }

  reader r_{decode_prefix};
};

}  // namespace

result<policy_set> decode_policy_set(std::string_view json_text) {
  auto parsed = admin_json::parse_first_value(json_text, decode_prefix);
  if (!parsed) return error{parsed.error()};
  policy_set set;
  set.version = 0;  // absent version is Go's zero value, which the version check refuses
  decoder d;
  try {
    if (!d.snapshot(*parsed, set)) return error{d.outcome().error()};
  } catch (const std::exception& e) {  // nlohmann type errors "cannot happen" after the checks
    return error{one_line(std::string(decode_prefix) + e.what())};
  }
  if (set.version < min_accepted_version || set.version > current_version) {
    return error{"unsupported policy snapshot version " + std::to_string(set.version) +
                 " (accepted " + std::to_string(min_accepted_version) + ".." +
                 std::to_string(current_version) + ")"};
  }
  backfill(set);
  return set;
}

result<policy_set> parse_policy_body(std::string_view body) {
  if (body.size() > max_body_bytes) {
    return error{std::string(decode_prefix) + "http: request body too large (limit " +
                 std::to_string(max_body_bytes) + " bytes)"};
  }
  return decode_policy_set(body);
}

void backfill(policy_set& set) {
  if (set.version >= 7) return;
  for (auto& p : set.policies) {
    if (set.version < 4 && p.minimum_matched_tokens == 0) {
      p.minimum_matched_tokens = default_minimum_matched_tokens;
    }
    if (set.version < 5 && !p.routing_floor_score) {
      p.routing_floor_score = default_routing_floor_score;
    }
    if (set.version < 6) {
      if (!p.strategy) p.strategy.emplace();
      if (!p.strategy->enable_chain_matching) p.strategy->enable_chain_matching = true;
      if (!p.strategy->require_chain) p.strategy->require_chain = false;
      if (!p.strategy->enable_tenant_hot) p.strategy->enable_tenant_hot = true;
    }
    if (!p.affinity_routing) p.affinity_routing = true;  // version < 7 here
  }
}

std::string encode_policy_set(const policy_set& set) {
  ojson root = ojson::object();
  root["version"] = set.version;
  ojson policies = ojson::array();
  for (const auto& p : set.policies) {
    ojson e = ojson::object();
    e["namespace"] = p.namespace_name;
    if (p.eviction_ttl_ns != 0) e["evictionTTL"] = p.eviction_ttl_ns;
    if (p.minimum_prefix_tokens != 0) e["minimumPrefixTokens"] = p.minimum_prefix_tokens;
    if (p.minimum_matched_tokens != 0) e["minimumMatchedTokens"] = p.minimum_matched_tokens;
    if (p.routing_floor_score) e["routingFloorScore"] = shortest_double(*p.routing_floor_score);
    if (p.lookup_timeout_ms != 0) e["lookupTimeoutMs"] = p.lookup_timeout_ms;
    if (p.affinity_routing) e["affinityRouting"] = *p.affinity_routing;
    if (!p.eviction.empty()) e["eviction"] = p.eviction;
    if (p.strategy) {
      ojson s = ojson::object();
      if (p.strategy->enable_chain_matching) {
        s["enableChainMatching"] = *p.strategy->enable_chain_matching;
      }
      if (p.strategy->require_chain) s["requireChain"] = *p.strategy->require_chain;
      if (p.strategy->enable_tenant_hot) s["enableTenantHot"] = *p.strategy->enable_tenant_hot;
      e["strategy"] = std::move(s);
    }
    policies.push_back(std::move(e));
  }
  root["policies"] = std::move(policies);
  ojson tenants = ojson::array();
  for (const auto& t : set.tenants) {
    ojson e = ojson::object();
    e["tenantID"] = t.tenant_id;
    e["maxIndexEntries"] = t.max_index_entries;
    if (!t.isolation_mode.empty()) e["isolationMode"] = t.isolation_mode;
    tenants.push_back(std::move(e));
  }
  root["tenants"] = std::move(tenants);
  // Invalid UTF-8 can only come from a hand-built set; replace it rather than throw.
  return root.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

}  // namespace ic::policy
