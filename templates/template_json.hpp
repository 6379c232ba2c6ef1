// The `/templates` JSON codec: strict decoding and validation of pushes, canonical encoding.
//
// Same mechanics as `/topology` (topology/topology_json.hpp): exactly one JSON object;
// unknown keys, wrong types, `version` ≠ 1 and every §3.3 push rule (names, uniqueness,
// non-empty body ≤ 1 MiB, slot names, types exactly `Stable`/`Mutable`, placeholders naming
// declared slots, malformed placeholders, ≤ 4096 templates, ≤ 64 slots) are refused with one
// line naming the field, e.g.
//   `invalid templates: templates[0].body: placeholder names undeclared slot "x" at byte 12`.
// A key `templateRevision` in a template is accepted and ignored (it is computed), so a GET
// body can be pushed back unchanged.
//
// Two canonical encodings: `encode_template_set` (journal / snapshot payload) and
// `encode_template_listing` (GET: the same plus each template's `templateRevision`). Both
// are byte-stable across decode → encode.
#pragma once

#include <string>
#include <string_view>

#include "policy/result.hpp"
#include "templates/template_set.hpp"

namespace ic::templates {

/// Parses a pushed body (POST/PUT or `--templates-file`): refuses bodies over 8 MiB, then
/// decodes, validates (compiling every body) and normalises.
policy::result<template_set> parse_templates_body(std::string_view body);

/// Decodes like `parse_templates_body` without the size limit (journal replay).
policy::result<template_set> decode_template_set(std::string_view json_text);

/// Returns the canonical compact JSON of a normalised set (journal payload).
std::string encode_template_set(const template_set& set);

/// Returns the GET /templates body: `encode_template_set` plus `templateRevision` per template.
std::string encode_template_listing(const template_set& set);

}  // namespace ic::templates
