// References into the admin stores and the rules every store entry's (namespace, name) obeys.
//
// Both RPCs name an entry of their store as `ns/name`, or as a bare `name` meaning
// `tenant_id/name` (pd-templates.md §2.4 S4, §3.3); the caller then checks that the
// namespace equals the tenant. Entries are kept sorted by (namespace, name) and found by
// binary search; each part is non-empty, at most 253 bytes and has no '/' (§2.2, §3.3).
//
//   auto ref = ic::admin_json::resolve_ref("pd", "serving");   // {"serving", "pd"}
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "admin_json/json_reader.hpp"

namespace ic::admin_json {

/// Longest namespace or name of a store entry.
inline constexpr std::size_t max_ref_part_bytes = 253;

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

/// Checks one part of an entry's ref at push time (non-empty, ≤ 253 bytes, no '/').
inline bool check_ref_part(reader& r, const std::string& path, const std::string& value) {
  if (value.empty()) return r.fail(path, "must not be empty");
  if (value.size() > max_ref_part_bytes) return r.fail(path, "longer than 253 bytes");
  if (value.find('/') != std::string::npos) return r.fail(path, "must not contain '/'");
  return true;
}

/// Returns the element of `sorted` (sorted by `ref_of(e)` = (namespace, name)) with that
/// ref, or nullptr.
template <class T, class RefOf>
const T* find_by_ref(const std::vector<T>& sorted, std::string_view ns, std::string_view name,
                     RefOf ref_of) {
  const auto key = std::make_pair(ns, name);
  auto it = std::lower_bound(sorted.begin(), sorted.end(), key, [&](const T& e, const auto& k) {
    const auto [ens, ename] = ref_of(e);
    return std::tie(ens, ename) < std::tie(k.first, k.second);
  });
  if (it == sorted.end()) return nullptr;
  const auto [ens, ename] = ref_of(*it);
  return ens == ns && ename == name ? &*it : nullptr;
}

/// Sorts entries by (namespace, name) as `ref_of` returns them.
template <class T, class RefOf>
void sort_by_ref(std::vector<T>& entries, RefOf ref_of) {
  std::sort(entries.begin(), entries.end(), [&](const T& a, const T& b) {
    const auto [ans, aname] = ref_of(a);
    const auto [bns, bname] = ref_of(b);
    return std::tie(ans, aname) < std::tie(bns, bname);
  });
}

}  // namespace ic::admin_json
