#include "templates/template_store.hpp"

#include <algorithm>
#include <array>
#include <tuple>

#include <xxhash.h>

#include "admin_json/ref.hpp"
#include "index/fingerprint.hpp"
#include "index/types.hpp"
#include "templates/template_json.hpp"

namespace ic::templates {

template_snapshot::template_snapshot(template_set set) : set_(std::move(set)) {
  compiled_.reserve(set_.templates.size());
  for (const auto& t : set_.templates) {
    // Validation compiled every body already; a set built by hand that does not compile
    // keeps an empty entry that renders as RENDER_ERROR.
    auto c = compile(t);
    if (c) {
      compiled_.push_back(std::move(*c));
    } else {
      compiled_template broken;
      broken.def = &t;
      broken.revision = template_revision(t);
      compiled_.push_back(std::move(broken));
    }
  }
  listing_ = encode_template_listing(set_);
}

const compiled_template* template_snapshot::find(std::string_view ns, std::string_view name) const {
  return admin_json::find_by_ref(compiled_, ns, name, [](const compiled_template& c) {
    return std::tie(c.def->namespace_name, c.def->name);
  });
}

template_store::template_store()
    : current_(std::make_shared<const template_snapshot>(template_set{})) {}

void template_store::apply(template_set set) {
  current_.publish(std::make_shared<const template_snapshot>(std::move(set)));
  pushed_ = true;
}

std::shared_ptr<const template_snapshot> template_store::current() const { return current_.load(); }

std::string template_store::to_bytes() const { return encode_template_set(current()->set()); }

policy::result<template_set> template_store::from_bytes(std::string_view bytes) {
  return decode_template_set(bytes);
}

std::string stable_prefix_hash(std::string_view text) {
  if (text.empty()) return {};
  return index::to_wire(XXH3_64bits_withSeed(text.data(), text.size(), index::fingerprint_seed));
}

render_response render(const template_snapshot& templates, const render_request& r) {
  render_response out;
  const auto not_found = [&] {
    out.reason_code = std::string(render_reason::template_not_found);
    return out;
  };
  if (r.tenant_id.empty() || r.tenant_id == index::reserved_tenant) return not_found();
  const auto ref = admin_json::resolve_ref(r.template_ref, r.tenant_id);
  if (!ref || ref->first != r.tenant_id) return not_found();
  const compiled_template* t = templates.find(ref->first, ref->second);
  if (t == nullptr) return not_found();

  const auto error = [&] {
    out.reason_code = std::string(render_reason::render_error);
    out.template_revision = t->revision;
    return out;
  };
  const template_def& def = *t->def;
  if (t->segments.empty() && !def.body.empty()) return error();  // did not compile
  std::array<const std::string*, max_slots> values{};
  for (const auto& [key, value] : r.variables) {
    auto it = std::lower_bound(t->slots_by_name.begin(), t->slots_by_name.end(), key,
                               [&](int s, const std::string& k) { return def.slots[s].name < k; });
    if (it == t->slots_by_name.end() || def.slots[*it].name != key) return error();  // undeclared
    values[*it] = &value;
  }
  for (std::size_t i = 0; i < def.slots.size(); ++i) {
    if (def.slots[i].required && values[i] == nullptr) return error();
  }
  std::size_t size = t->literal_bytes;
  for (const auto& s : t->segments) {
    if (s.slot >= 0 && values[s.slot] != nullptr) size += values[s.slot]->size();
  }
  if (size > max_rendered_bytes) return error();

  std::string text;
  text.reserve(size);
  std::size_t stable_bytes = 0;
  for (std::size_t i = 0; i < t->segments.size(); ++i) {
    if (i == t->first_mutable) stable_bytes = text.size();
    const segment& s = t->segments[i];
    if (s.slot < 0) {
      text += s.literal;
    } else if (values[s.slot] != nullptr) {
      text += *values[s.slot];
    }
  }
  if (t->first_mutable >= t->segments.size()) stable_bytes = text.size();
  out.stable_prefix_hash = stable_prefix_hash(std::string_view(text).substr(0, stable_bytes));
  out.rendered_prompt = std::move(text);
  out.tenant_namespace = def.namespace_name;
  out.reason_code = std::string(render_reason::ok);
  out.template_revision = t->revision;
  return out;
}

}  // namespace ic::templates
