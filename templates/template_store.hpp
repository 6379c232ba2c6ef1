// The current `/templates` store and RenderTemplate (pd-templates.md §3.1, §3.3–§3.6).
//
// `template_store` holds the last accepted push as an immutable `template_snapshot` behind
// a `shared_ptr` (pointer swap on `apply`, lock-free reads from any thread): every body is
// compiled at push time. `render` is a pure function of (snapshot, request): it resolves
// the ref, validates the variables, renders in O(output) and hashes the stable prefix. It
// never throws and never fails the RPC: every outcome is a `render_response` with a reason.
//
//   ic::templates::template_store store;
//   auto set = ic::templates::parse_templates_body(body);        // 400 on error; untouched
//   journal.append(ic::templates::encode_template_set(*set));      // 503 on failure; untouched
//   store.apply(std::move(*set));
//   auto resp = ic::templates::render(*store.current(), request);  // gRPC handler, no actor hop
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admin_json/snapshot_cell.hpp"
#include "policy/result.hpp"
#include "templates/compiled_template.hpp"
#include "templates/template_set.hpp"

namespace ic::templates {

/// `RenderTemplateRequest`; `variables` is the wire map (unique keys, any order).
struct render_request {
  std::string template_ref;
  std::vector<std::pair<std::string, std::string>> variables;
  std::string tenant_id;
};

/// `RenderTemplateResponse` (bytes fields as std::string).
struct render_response {
  std::string rendered_prompt;
  /// BE8(XXH3-64 seed 1337 of the stable text); empty when the stable text is empty.
  std::string stable_prefix_hash;
  std::string tenant_namespace;
  std::string reason_code;
  std::string template_revision;

  friend bool operator==(const render_response& a, const render_response& b) {
    return a.rendered_prompt == b.rendered_prompt && a.stable_prefix_hash == b.stable_prefix_hash &&
           a.tenant_namespace == b.tenant_namespace && a.reason_code == b.reason_code &&
           a.template_revision == b.template_revision;
  }
};

/// RenderTemplate reason codes (exact strings).
namespace render_reason {
inline constexpr std::string_view ok = "OK";
inline constexpr std::string_view render_error = "RENDER_ERROR";
inline constexpr std::string_view template_not_found = "TEMPLATE_NOT_FOUND";
}  // namespace render_reason

/// An immutable accepted push with every body compiled. Not copyable (points into itself).
class template_snapshot {
 public:
  explicit template_snapshot(template_set set);
  template_snapshot(const template_snapshot&) = delete;
  template_snapshot& operator=(const template_snapshot&) = delete;

  /// Returns the template `namespace/name`, or nullptr.
  const compiled_template* find(std::string_view namespace_name, std::string_view name) const;
  const template_set& set() const { return set_; }
  /// Returns the GET /templates body (with `templateRevision`s).
  const std::string& listing() const { return listing_; }

 private:
  template_set set_;
  std::vector<compiled_template> compiled_;  // same (sorted) order as set_.templates
  std::string listing_;
};

/// Holds the current snapshot; `apply` is replace-on-write.
class template_store {
 public:
  /// Creates a store holding the empty set (`{"version":1,"templates":[]}`).
  template_store();

  /// Replaces the whole store with `set` (a decoded, hence validated, set).
  void apply(template_set set);
  /// Returns the current snapshot (never null); safe from any thread.
  std::shared_ptr<const template_snapshot> current() const;
  bool has_pushed() const { return pushed_; }

  /// Returns the canonical bytes of the current set (journal / snapshot payload).
  std::string to_bytes() const;
  /// Decodes bytes written by `to_bytes()` (no size limit); errors are one line.
  static policy::result<template_set> from_bytes(std::string_view bytes);
  /// Returns the GET /templates body.
  std::string to_json() const { return current()->listing(); }

 private:
  admin_json::snapshot_cell<const template_snapshot> current_;
  bool pushed_ = false;
};

/// Renders per §3.3–§3.6: TEMPLATE_NOT_FOUND (bad or foreign ref, empty or reserved tenant;
/// all fields empty), RENDER_ERROR (missing required slot, undeclared variable, output over
/// 1 MiB; only the revision set), or OK (text, stable-prefix hash, namespace, revision).
render_response render(const template_snapshot& templates, const render_request& request);

/// Returns BE8(XXH3-64(seed 1337, text)), or "" for empty text (§3.5).
std::string stable_prefix_hash(std::string_view stable_text);

}  // namespace ic::templates
