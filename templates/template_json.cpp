#include "templates/template_json.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "admin_json/json_reader.hpp"
#include "admin_json/ref.hpp"
#include "templates/compiled_template.hpp"

namespace ic::templates {
namespace {

using admin_json::json;
using admin_json::reader;

constexpr const char* decode_prefix = "decode templates: ";
constexpr const char* invalid_prefix = "invalid templates: ";

bool identifier(std::string_view s) {
  if (s.empty()) return false;
  const auto start = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!start(s[0])) return false;
  for (char c : s) {
    if (!start(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool decode_slot(reader& r, const json& v, const std::string& path, slot& out) {
  if (!r.object(v, path, {"name", "type", "required", "description"})) return false;
  if (auto* f = reader::field(v, "name")) r.string(*f, reader::member(path, "name"), out.name);
  if (auto* f = reader::field(v, "type")) {
    std::string type;
    const std::string p = reader::member(path, "type");
    if (r.string(*f, p, type)) {
      if (type == "Stable") {
        out.type = slot_type::stable;
      } else if (type == "Mutable") {
        out.type = slot_type::mutable_;
      } else {
        r.fail(p, "must be \"Stable\" or \"Mutable\", got " + admin_json::quote(type));
      }
    }
  } else {
    r.fail(reader::member(path, "type"), "required");
  }
  if (auto* f = reader::field(v, "required")) r.boolean(*f, reader::member(path, "required"), out.required);
  if (auto* f = reader::field(v, "description")) {
    r.string(*f, reader::member(path, "description"), out.description);
  }
  return !r.failed();
}

bool decode_template(reader& r, const json& v, const std::string& path, template_def& out) {
  if (!r.object(v, path, {"namespace", "name", "body", "slots", "templateRevision"})) return false;
  if (auto* f = reader::field(v, "namespace")) {
    r.string(*f, reader::member(path, "namespace"), out.namespace_name);
  }
  if (auto* f = reader::field(v, "name")) r.string(*f, reader::member(path, "name"), out.name);
  if (auto* f = reader::field(v, "body")) r.string(*f, reader::member(path, "body"), out.body);
  if (auto* f = reader::field(v, "templateRevision")) {
    std::string ignored;
    r.string(*f, reader::member(path, "templateRevision"), ignored);
  }
  if (auto* f = reader::field(v, "slots")) {
    const std::string p = reader::member(path, "slots");
    if (r.array(*f, p)) {
      for (std::size_t i = 0; i < f->size() && !r.failed(); ++i) {
        out.slots.emplace_back();
        decode_slot(r, (*f)[i], reader::element(p, i), out.slots.back());
      }
    }
  }
  return !r.failed();
}

bool check_template(reader& r, const template_def& t, const std::string& path) {
  if (!admin_json::check_ref_part(r, reader::member(path, "namespace"), t.namespace_name)) return false;
  if (!admin_json::check_ref_part(r, reader::member(path, "name"), t.name)) return false;
  if (t.body.empty()) return r.fail(reader::member(path, "body"), "must not be empty");
  if (t.body.size() > max_template_body_bytes) {
    return r.fail(reader::member(path, "body"), "longer than 1048576 bytes");
  }
  if (t.slots.size() > max_slots) return r.fail(reader::member(path, "slots"), "more than 64 slots");
  std::set<std::string> names;
  for (std::size_t i = 0; i < t.slots.size(); ++i) {
    const std::string p = reader::member(reader::element(reader::member(path, "slots"), i), "name");
    if (!identifier(t.slots[i].name)) {
      return r.fail(p, "must match [A-Za-z_][A-Za-z0-9_]*, got " + admin_json::quote(t.slots[i].name));
    }
    if (!names.insert(t.slots[i].name).second) {
      return r.fail(p, "duplicate slot " + admin_json::quote(t.slots[i].name));
    }
  }
  auto compiled = compile(t);
  if (!compiled) return r.fail(path, compiled.error());
  return true;
}

json encode_template(const template_def& t) {
  json o = json::object();
  o["namespace"] = t.namespace_name;
  o["name"] = t.name;
  o["body"] = t.body;
  json slots = json::array();
  for (const auto& s : t.slots) {
    json e = json::object();
    e["name"] = s.name;
    e["type"] = s.type == slot_type::stable ? "Stable" : "Mutable";
    e["required"] = s.required;
    if (!s.description.empty()) e["description"] = s.description;
    slots.push_back(std::move(e));
  }
  o["slots"] = std::move(slots);
  return o;
}

std::string encode(const template_set& set, bool with_revisions) {
  json root = json::object();
  root["version"] = set.version;
  json list = json::array();
  for (const auto& t : set.templates) {
    json o = encode_template(t);
    if (with_revisions) o["templateRevision"] = template_revision(t);
    list.push_back(std::move(o));
  }
  root["templates"] = std::move(list);
  return root.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

policy::result<template_set> decode_template_set(std::string_view text) {
  auto doc = admin_json::parse_document(text, decode_prefix);
  if (!doc) return policy::error{doc.error()};
  reader r(decode_prefix);
  template_set set;
  const auto decoded = admin_json::decode_versioned_list(
      r, *doc, "templates", "templates", [&](const json& v, const std::string& path) {
        set.templates.emplace_back();
        return decode_template(r, v, path, set.templates.back());
      });
  if (!decoded) return policy::error{decoded.error()};
  reader v(invalid_prefix);
  if (set.templates.size() > max_templates) v.fail("templates", "more than 4096 templates");
  std::set<std::pair<std::string, std::string>> refs;
  for (std::size_t i = 0; i < set.templates.size() && !v.failed(); ++i) {
    const template_def& t = set.templates[i];
    const std::string path = reader::element("templates", i);
    if (!check_template(v, t, path)) break;
    if (!refs.emplace(t.namespace_name, t.name).second) {
      v.fail(path, "duplicate ref " + admin_json::quote(t.namespace_name + "/" + t.name));
    }
  }
  if (auto checked = v.status(); !checked) return policy::error{checked.error()};
  admin_json::sort_by_ref(set.templates, [](const template_def& t) {
    return std::tie(t.namespace_name, t.name);
  });
  return set;
}

policy::result<template_set> parse_templates_body(std::string_view body) {
  if (body.size() > max_templates_body_bytes) {
    return policy::error{std::string(decode_prefix) + "body larger than 8388608 bytes"};
  }
  return decode_template_set(body);
}

std::string encode_template_set(const template_set& set) { return encode(set, false); }

std::string encode_template_listing(const template_set& set) { return encode(set, true); }

}  // namespace ic::templates
