// The `/templates` wire model: prompt templates as pushed (pd-templates.md §3.1–§3.3).
//
// A `template_set` mirrors the JSON body `{version, templates[]}` after decoding and
// normalisation (templates/template_json.hpp): templates sorted by (namespace, name), slots
// in declaration order. `description` and `required` are stored and echoed; `required` is
// enforced at render time, `description` never affects output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace ic::templates {

/// The only accepted `/templates` schema version.
inline constexpr std::int64_t templates_version = 1;
/// Limits of §3.1 / §3.3.
inline constexpr std::size_t max_templates_body_bytes = std::size_t{8} << 20;
inline constexpr std::size_t max_template_body_bytes = std::size_t{1} << 20;
inline constexpr std::size_t max_templates = 4096;
inline constexpr std::size_t max_slots = 64;
/// Largest rendered output (LookupRoute's MaxPromptTextBytes).
inline constexpr std::size_t max_rendered_bytes = 1'048'576;

/// `slots[].type`.
enum class slot_type : std::uint8_t { stable = 0, mutable_ = 1 };

/// `slots[]`.
struct slot {
  std::string name;
  slot_type type = slot_type::stable;
  /// Absent means false (the CRD field is `*bool`).
  bool required = false;
  std::string description;

  friend bool operator==(const slot& a, const slot& b) {
    return std::tie(a.name, a.type, a.required, a.description) ==
           std::tie(b.name, b.type, b.required, b.description);
  }
};

/// One `templates[]` entry; its ref is `namespace/name`.
struct template_def {
  std::string namespace_name;
  std::string name;
  /// As pushed (hashed as pushed by the revision).
  std::string body;
  std::vector<slot> slots;

  friend bool operator==(const template_def& a, const template_def& b) {
    return std::tie(a.namespace_name, a.name, a.body, a.slots) ==
           std::tie(b.namespace_name, b.name, b.body, b.slots);
  }
};

/// A whole `/templates` push.
struct template_set {
  std::int64_t version = templates_version;
  /// Sorted by (namespace, name), unique.
  std::vector<template_def> templates;

  friend bool operator==(const template_set& a, const template_set& b) {
    return a.version == b.version && a.templates == b.templates;
  }
};

}  // namespace ic::templates
