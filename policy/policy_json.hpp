// The `/policy` JSON codec: strict decoding of pushes, version back-fill, canonical encoding.
//
// Decoding follows the reference server (spec/operations.md §2.2, Go `encoding/json` with
// unknown fields disallowed):
//   - the body is one JSON object; bytes after the first JSON value are not examined;
//   - an unknown key at any level is an error; known keys match ASCII-case-insensitively
//     (as Go's decoder does); `null` leaves a plain field at its zero value and sets an
//     optional (Go pointer) field to nil;
//   - integers must be JSON integers within the Go type's range (int32/int64), booleans
//     booleans, strings strings; `routingFloorScore` is any JSON number within float32
//     range (`evictionTTL` is an int64 of nanoseconds on the wire, not a duration string);
//   - `version` must be 3..7; older versions get the §2.2 back-fill (`backfill`).
// The first problem in document order is reported, as one line starting
// `decode policy snapshot: ` (or `unsupported policy snapshot version ...`).
//
// The canonical encoding (`encode_policy_set`) writes keys in a fixed order, omits the
// fields Go omits when zero/nil, and writes floats in their shortest round-trip form; it is
// both the GET /policy body and the journal payload, and
// `decode_policy_set(encode_policy_set(s)) == s` for every set the decoder returns.
//
//   auto set = ic::policy::parse_policy_body(http_body);
//   if (!set) return reply(400, set.error());
#pragma once

#include <string>
#include <string_view>

#include "policy/policy_set.hpp"
#include "policy/result.hpp"

namespace ic::policy {

/// Parses a pushed `/policy` body (HTTP POST/PUT or `--policy-file`): refuses bodies over
/// `max_body_bytes`, then decodes strictly, checks the version and back-fills.
result<policy_set> parse_policy_body(std::string_view body);

/// Decodes a policy set exactly like `parse_policy_body` but without the body size limit
/// (journal replay of `encode_policy_set` output, which may be larger than the push).
result<policy_set> decode_policy_set(std::string_view json_text);

/// Fills the fields that schema versions before 7 lacked, where missing (§2.2 table):
/// v<4 `minimumMatchedTokens` 0 → 64; v<5 nil `routingFloorScore` → 0.1; v<6 nil
/// `strategy` or nested field → {true, false, true}; v<7 nil `affinityRouting` → true.
/// Idempotent; a no-op for version 7.
void backfill(policy_set& set);

/// Returns the canonical compact JSON of `set` (deterministic; see the header overview).
std::string encode_policy_set(const policy_set& set);

}  // namespace ic::policy
