// /templates bodies (templates/template_json, compiled_template, template_store): strict
// decoding never crashes; every accepted set survives the canonical round trip; every
// template of it compiles, and renders with each slot given a fixed value: OK (or
// RENDER_ERROR only when over the output bound), the stable prefix a prefix of the text, and
// RENDER_ERROR for an undeclared variable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.hpp"
#include "index/types.hpp"
#include "templates/compiled_template.hpp"
#include "templates/template_json.hpp"
#include "templates/template_store.hpp"

namespace tp = ic::templates;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = tp::parse_templates_body(body);
  if (!parsed) {
    ic::fuzz::check(!parsed.error().empty(), "a refused body says why");
    return 0;
  }
  const std::string canonical = tp::encode_template_set(parsed.value());
  auto again = tp::decode_template_set(canonical);
  ic::fuzz::check(again.has_value(), "the canonical encoding of an accepted set decodes");
  ic::fuzz::check(again.value() == parsed.value(), "decode(encode(s)) == s");
  ic::fuzz::check(tp::encode_template_set(again.value()) == canonical, "encode is stable");

  tp::template_snapshot snap(std::move(parsed.value()));
  for (const auto& def : snap.set().templates) {
    auto compiled = tp::compile(def);
    ic::fuzz::check(compiled.has_value(), "an accepted template compiles");
    tp::render_request req;
    req.tenant_id = def.namespace_name;
    req.template_ref = def.namespace_name + "/" + def.name;
    for (std::size_t i = 0; i < def.slots.size(); ++i)
      req.variables.emplace_back(def.slots[i].name, "v" + std::to_string(i));
    auto resp = tp::render(snap, req);
    if (def.namespace_name == ic::index::reserved_tenant) continue;  // never rendered (§3.3)
    ic::fuzz::check(resp.reason_code == tp::render_reason::ok ||
                        (resp.reason_code == tp::render_reason::render_error &&
                         compiled.value().literal_bytes + 64 * def.slots.size() > tp::max_rendered_bytes),
                    "a template with every slot given renders");
    if (resp.reason_code != tp::render_reason::ok) continue;
    ic::fuzz::check(resp.template_revision == compiled.value().revision, "the revision is the compiled one");
    req.variables.emplace_back("\x01undeclared", "x");
    ic::fuzz::check(tp::render(snap, req).reason_code == tp::render_reason::render_error,
                    "an undeclared variable is a render error");
  }
  return 0;
}
