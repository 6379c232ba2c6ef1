#include "server/store_routes.hpp"

#include <chrono>
#include <stdexcept>

#include "policy/policy_json.hpp"
#include "templates/template_json.hpp"
#include "topology/topology_json.hpp"

namespace ic::server {
namespace {

using namespace std::chrono_literals;

/// Wraps a strict decoder and a canonical encoder into a body -> payload function.
template <class Parse, class Encode>
std::function<policy::result<std::string>(const std::string&)> canonical_of(Parse parse,
                                                                           Encode encode) {
  return [parse, encode](const std::string& body) -> policy::result<std::string> {
    auto set = parse(body);
    if (!set.has_value()) return policy::error{set.error()};
    return encode(set.value());
  };
}

std::vector<store_route> make_routes() {
  std::vector<store_route> v;
  v.push_back({"policy", actors::record_kind::policy, policy::max_body_bytes,
               // The reference's wording (spec/operations.md §2).
               "decode policy snapshot: http: request body too large", "POST, PUT",
               canonical_of([](const std::string& b) { return policy::parse_policy_body(b); },
                            [](const auto& s) { return policy::encode_policy_set(s); }),
               [](const actors::runtime& rt) { return rt.policy_json(); },
               [](const actors::runtime& rt) { return rt.policy_json(); }});
  v.push_back({"topology", actors::record_kind::topology, topology::max_topology_body_bytes,
               "decode topology: body larger than 1048576 bytes", "GET, POST, PUT",
               canonical_of([](const std::string& b) { return topology::parse_topology_body(b); },
                            [](const auto& s) { return topology::encode_topology_set(s); }),
               [](const actors::runtime& rt) { return rt.topology_json(); },
               [](const actors::runtime& rt) { return rt.topology_json(); }});
  v.push_back({"templates", actors::record_kind::templates, templates::max_templates_body_bytes,
               "decode templates: body larger than 8388608 bytes", "GET, POST, PUT",
               canonical_of([](const std::string& b) { return templates::parse_templates_body(b); },
                            [](const auto& s) { return templates::encode_template_set(s); }),
               [](const actors::runtime& rt) { return rt.templates_payload(); },
               [](const actors::runtime& rt) { return rt.templates_json(); }});
  return v;
}

}  // namespace

const std::vector<store_route>& store_routes() {
  static const std::vector<store_route> routes = make_routes();
  return routes;
}

const store_route& store_route_of(actors::record_kind kind) {
  for (const auto& r : store_routes())
    if (r.kind == kind) return r;
  throw std::logic_error("store_route_of: not a pushed-store record kind");
}

push_outcome push_store_body(const store_route& store, const std::string& body,
                             actors::runtime* rt) {
  auto canonical = store.canonical(body);
  if (!canonical.has_value()) return {400, canonical.error()};
  if (!rt) return {503, "index is recovering"};
  // The controller re-pushes the same set every 30 s: journal only real changes.
  if (store.stored(*rt) == canonical.value()) return {204, ""};
  auto ack = rt->append_blocking(store.kind, std::move(canonical).value(), 10s);
  const std::string what = std::string(store.name) + " not applied: ";
  if (!ack) return {503, what + "the index did not answer in time"};
  if (!ack->accepted && ack->reason_code == actors::ack_reason::conflict)
    return {409, std::string(store.name) + " changed concurrently; GET and retry"};
  if (!ack->accepted) return {503, what + ack->reason_code};
  return {204, ""};
}

}  // namespace ic::server
