// Store references of the admin stores: `pd_topology_ref` and `template_ref`.
//
// Both RPCs name an entry of their store as `ns/name`, or as a bare `name` meaning
// `tenant_id/name` (pd-templates.md §2.4 S4, §3.3). The caller then checks that the
// namespace equals the tenant.
//
//   auto ref = ic::admin_json::resolve_ref("pd", "serving");   // {"serving", "pd"}
#pragma once

#include <optional>
#include <string_view>
#include <utility>

namespace ic::admin_json {

/// Splits `ref` into (namespace, name); nullopt when malformed (empty, an empty part, more
/// than one '/', or a bare name with an empty tenant).
inline std::optional<std::pair<std::string_view, std::string_view>> resolve_ref(
    std::string_view ref, std::string_view tenant) {
  const auto slash = ref.find('/');
  if (slash == std::string_view::npos) {
    if (ref.empty() || tenant.empty()) return std::nullopt;
    return std::make_pair(tenant, ref);
  }
  const auto ns = ref.substr(0, slash);
  const auto name = ref.substr(slash + 1);
  if (ns.empty() || name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  return std::make_pair(ns, name);
}

}  // namespace ic::admin_json
