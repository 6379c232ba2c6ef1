// The `/topology` JSON codec: strict decoding and validation of pushes, canonical encoding.
//
// Decoding (pd-templates.md §2.2): the body is exactly one JSON object; an unknown key at
// any level, a wrong type, an integer written as `1.0` or `"1"`, `version` ≠ 1, or any
// semantic rule of §2.2 (names, uniqueness, pools, patterns, limits, ranges, a
// (prefill, decode) pool pair without a derivable transport when `transport` is unset) is
// an error: one line naming the field, e.g.
//   `decode topology: topologies[0].prefillPools[1]: unknown field "replica"`
//   `invalid topology: topologies[0].hashScheme: must not be empty`.
// The first problem in document order wins. A decoded set is normalised (see
// topology/topology.hpp), so `encode_topology_set` is canonical:
// `encode(decode(encode(s))) == encode(s)` byte for byte — it is the GET /topology body and
// the journal / snapshot payload.
//
//   auto set = ic::topology::parse_topology_body(http_body);
//   if (!set) return reply(400, set.error());
#pragma once

#include <string>
#include <string_view>

#include "policy/result.hpp"
#include "topology/topology.hpp"

namespace ic::topology {

/// Parses a pushed body (POST/PUT or `--topology-file`): refuses bodies over 1 MiB, then
/// decodes, validates and normalises.
policy::result<topology_set> parse_topology_body(std::string_view body);

/// Decodes like `parse_topology_body` without the size limit (journal replay).
policy::result<topology_set> decode_topology_set(std::string_view json_text);

/// Returns the canonical compact JSON of a normalised set (keys in declaration order of
/// §2.2, optional fields only when set, `selection` always complete).
std::string encode_topology_set(const topology_set& set);

}  // namespace ic::topology
