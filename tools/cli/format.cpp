#include "tools/cli/format.hpp"

#include <iomanip>
#include <map>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "tools/common/codec.hpp"

namespace ic::tools {

namespace {

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

/// One row of left-aligned cells; the last cell is not padded.
std::string row(const std::vector<std::pair<std::string, int>>& cells) {
  std::ostringstream out;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i + 1 < cells.size()) out << std::left << std::setw(cells[i].second) << cells[i].first;
    else out << cells[i].first;
  }
  out << "\n";
  return out.str();
}

std::string fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

}  // namespace

std::string to_json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

std::string tier_name(v1::CacheTier t) {
  switch (t) {
    case v1::CACHE_TIER_T1: return "T1";
    case v1::CACHE_TIER_T2: return "T2";
    case v1::CACHE_TIER_T3: return "T3";
    default: return "-";
  }
}

std::string format_lookup_table(const v1::LookupRouteResponse& resp) {
  std::string out = "reason: " + (resp.reason_code().empty() ? "NO_HINT" : resp.reason_code()) +
                    "   server latency: " + std::to_string(resp.lookup_latency_us()) + " us\n";
  if (resp.replica_scores_size() > 0) {
    out += row({{"REPLICA", 24}, {"SCORE", 10}, {"MATCHED_TOKENS", 16}, {"HIT_PROB", 10}, {"TIER", 0}});
    for (const auto& s : resp.replica_scores())
      out += row({{s.replica_id(), 24}, {fixed(s.score(), 4), 10},
                  {std::to_string(s.matched_tokens()), 16},
                  {fixed(s.estimated_cache_hit_prob(), 3), 10}, {tier_name(s.tier()), 0}});
  }
  if (resp.token_ids_size() > 0) {  // prompt_text lookups echo the server's tokens
    out += "tokens (" + std::to_string(resp.token_ids_size()) + "): ";
    for (int i = 0; i < resp.token_ids_size(); ++i)
      out += (i ? "," : "") + std::to_string(resp.token_ids(i));
    out += "\n";
  }
  return out;
}

std::string format_state_table(const v1::GetCacheStateResponse& resp) {
  std::string out = "total prefixes: " + std::to_string(resp.summary().total_prefixes()) +
                    "   hot prefixes: " + std::to_string(resp.summary().hot_prefixes()) + "\n";
  if (resp.replicas_size() > 0) {
    out += row({{"REPLICA", 24}, {"CACHE_BYTES", 14}, {"HIT_RATE", 10}, {"PRESSURE", 10}, {"VERSION", 0}});
    for (const auto& r : resp.replicas()) {
      std::ostringstream hit, pressure;
      hit << r.hit_rate();
      pressure << r.pressure();
      out += row({{r.replica_id(), 24}, {std::to_string(r.cache_memory_bytes()), 14},
                  {hit.str(), 10}, {pressure.str(), 10}, {or_dash(r.client_version()), 0}});
    }
  }
  return out;
}

std::string format_event_line(const v1::CacheEvent& e) {
  std::ostringstream out;
  out << e.timestamp_us() << "  " << std::left << std::setw(16)
      << v1::CacheEvent::Type_Name(e.type()) << " tenant=" << e.tenant_id()
      << " model=" << e.model_id() << " replica=" << e.replica_id();
  if (!e.prefix_hash().empty()) out << " hash=" << to_hex(e.prefix_hash());
  if (!e.adapter_id().empty()) out << " adapter=" << e.adapter_id();
  return out.str();
}

std::string format_metric_line(const v1::Metric& m) {
  std::ostringstream out;
  out << m.name();
  if (m.labels_size() > 0) {
    std::map<std::string, std::string> sorted(m.labels().begin(), m.labels().end());
    out << "{";
    bool first = true;
    for (const auto& [k, v] : sorted) {
      out << (first ? "" : ",") << k << "=\"" << v << "\"";
      first = false;
    }
    out << "}";
  }
  out << " " << m.value() << "  (" << m.type() << ")";
  return out.str();
}

bool pd_route_has_pair(const v1::LookupPDRouteResponse& resp) {
  return !resp.prefill_replica_id().empty() && !resp.decode_replica_id().empty();
}

std::string format_pd_route_table(const v1::LookupPDRouteResponse& resp) {
  std::string out = "reason: " + (resp.reason_code().empty() ? "NO_HINT" : resp.reason_code()) + "\n";
  if (!pd_route_has_pair(resp)) {
    out += "no prefill/decode pair: route with the gateway's own default\n";
    return out;
  }
  out += row({{"PREFILL", 24}, {"DECODE", 24}, {"TRANSPORT", 0}});
  out += row({{resp.prefill_replica_id(), 24}, {resp.decode_replica_id(), 24},
              {or_dash(resp.transport_hint()), 0}});
  return out;
}

std::string format_render_table(const v1::RenderTemplateResponse& resp) {
  std::string out = "reason: " + or_dash(resp.reason_code()) +
                    "   revision: " + or_dash(resp.template_revision()) +
                    "   namespace: " + or_dash(resp.tenant_namespace()) + "\n";
  out += "stable prefix hash: " +
         (resp.stable_prefix_hash().empty() ? std::string("- (none: hash the raw prompt)")
                                            : to_hex(resp.stable_prefix_hash())) +
         "\n";
  out += "rendered prompt (" + std::to_string(resp.rendered_prompt().size()) + " bytes):\n";
  out += resp.rendered_prompt();
  if (!resp.rendered_prompt().empty() && resp.rendered_prompt().back() != '\n') out += "\n";
  return out;
}

std::string render_to_json(const v1::RenderTemplateResponse& resp) {
  nlohmann::ordered_json j;
  j["renderedPrompt"] = resp.rendered_prompt();
  j["stablePrefixHash"] = to_hex(resp.stable_prefix_hash());
  j["tenantNamespace"] = resp.tenant_namespace();
  j["reasonCode"] = resp.reason_code();
  j["templateRevision"] = resp.template_revision();
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

/// The `array_key` array of a GET body, or nullptr when the body is not such a document.
const nlohmann::json* listing(const nlohmann::json& doc, const char* array_key) {
  if (!doc.is_object()) return nullptr;
  auto it = doc.find(array_key);
  if (it == doc.end() || !it->is_array()) return nullptr;
  for (const auto& item : *it)
    if (!item.is_object()) return nullptr;
  return &*it;
}

std::string str_of(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

/// "name[a,b]" per pool, comma separated: the pool name and how members are given.
std::string pools_of(const nlohmann::json& t, const char* key) {
  auto it = t.find(key);
  if (it == t.end() || !it->is_array()) return "-";
  std::string out;
  for (const auto& p : *it) {
    if (!p.is_object()) continue;
    std::string members;
    for (const char* k : {"replicaIds", "replicaIdPatterns"}) {
      auto m = p.find(k);
      if (m == p.end() || !m->is_array()) continue;
      for (const auto& id : *m)
        if (id.is_string()) members += (members.empty() ? "" : ",") + id.get<std::string>();
    }
    out += (out.empty() ? "" : " ") + str_of(p, "name") + "[" + members + "]";
  }
  return or_dash(out);
}

}  // namespace

std::string format_topology_table(const std::string& body) {
  auto doc = nlohmann::json::parse(body, nullptr, false);
  const auto* items = listing(doc, "topologies");
  if (!items) return "";
  std::string out = "topologies: " + std::to_string(items->size()) + "\n";
  if (items->empty()) return out;
  out += row({{"REF", 32}, {"SCHEME", 10}, {"TRANSPORT", 11}, {"PREFILL POOLS", 32}, {"DECODE POOLS", 0}});
  for (const auto& t : *items) {
    std::string transport = str_of(t, "transport");
    out += row({{str_of(t, "namespace") + "/" + str_of(t, "name"), 32},
                {or_dash(str_of(t, "hashScheme")), 10},
                {transport.empty() ? "(derived)" : transport, 11},
                {pools_of(t, "prefillPools"), 32}, {pools_of(t, "decodePools"), 0}});
  }
  return out;
}

std::string format_templates_table(const std::string& body) {
  auto doc = nlohmann::json::parse(body, nullptr, false);
  const auto* items = listing(doc, "templates");
  if (!items) return "";
  std::string out = "templates: " + std::to_string(items->size()) + "\n";
  if (items->empty()) return out;
  out += row({{"REF", 32}, {"REVISION", 34}, {"BODY_BYTES", 12}, {"SLOTS", 0}});
  for (const auto& t : *items) {
    std::string slots;
    if (auto s = t.find("slots"); s != t.end() && s->is_array()) {
      for (const auto& slot : *s) {
        if (!slot.is_object()) continue;
        std::string type = str_of(slot, "type");
        slots += (slots.empty() ? "" : ",") + str_of(slot, "name") + ":" +
                 (type.empty() ? "?" : type.substr(0, 1));
      }
    }
    out += row({{str_of(t, "namespace") + "/" + str_of(t, "name"), 32},
                {or_dash(str_of(t, "templateRevision")), 34},
                {std::to_string(str_of(t, "body").size()), 12}, {or_dash(slots), 0}});
  }
  return out;
}

std::string pretty_json(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_discarded() ? body : j.dump(2);
}

std::string http_reason_line(const http_response& res) {
  std::string line = res.body.substr(0, res.body.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return "HTTP " + std::to_string(res.status) + ": " + (line.empty() ? "(no body)" : line);
}

}  // namespace ic::tools
