// Push-time compilation of a template body and its revision (pd-templates.md §3.2, §3.4).
//
// Syntax: a placeholder is `{{`, optional spaces/tabs, an optional single `.` (the
// kubebuilder `{{.name}}` alias), an identifier `[A-Za-z_][A-Za-z0-9_]*`, optional
// spaces/tabs, `}}`. The only escape is the Jinja literal `{{ '{{' }}` (or `{{ "{{" }}`),
// which emits `{{`. Anything else after `{{` is an error; `}}`, `{%`, `{#` outside a
// placeholder are literal text. With no conditionals every slot position is static, so the
// body compiles to segments (literal | slot index) and the stable-prefix boundary (the first
// Mutable placeholder) is known at push time; rendering is then O(output).
//
//   auto c = ic::templates::compile(def);           // error: one line (byte offset, reason)
//   c->revision;                                     // 32 lower-case hex chars
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/result.hpp"
#include "templates/template_set.hpp"

namespace ic::templates {

/// One piece of a compiled body.
struct segment {
  /// Literal text (escapes already resolved) when `slot < 0`.
  std::string literal;
  /// Index into `template_def::slots`, or -1 for a literal.
  int slot = -1;
};

/// A template ready to render. Points at its definition (owned by the snapshot).
struct compiled_template {
  const template_def* def = nullptr;
  std::vector<segment> segments;
  /// Index of the first segment that is a Mutable slot; `segments.size()` when none.
  std::size_t first_mutable = 0;
  /// Sum of the literal segments' sizes.
  std::size_t literal_bytes = 0;
  /// Slot indexes sorted by slot name (render-time lookup of variable keys).
  std::vector<int> slots_by_name;
  /// §3.4 template_revision.
  std::string revision;
};

/// Compiles `def.body` against `def.slots`. Errors: malformed placeholder, undeclared slot
/// (message: `body: <reason> at byte <offset>`); slot rules are the decoder's.
policy::result<compiled_template> compile(const template_def& def);

/// Returns the §3.4 revision: lower-case hex of the first 16 bytes of SHA-256 over
/// "inferencecache.io/template-revision/v1\n" ‖ u32be(len body) ‖ body ‖ u32be(#slots) ‖
/// per slot in bytewise name order u32be(len name) ‖ name ‖ ('S' | 'M').
std::string template_revision(const template_def& def);

}  // namespace ic::templates
