// Renders the /snapshot body exactly as the reference controller expects it
// (spec/operations.md §3.3): field names, order, omitempty rules, float32 formatting and
// RFC 3339 times.
#pragma once

#include <string>

#include "index/types.hpp"

namespace ic::server {

/// Returns the JSON body of /snapshot for `view`.
std::string snapshot_json(const index::snapshot_view& view);

/// Formats a float32 the way Go's encoding/json does (shortest round-trip form).
std::string go_float32(float v);

/// Formats Unix microseconds as Go's RFC 3339 (nanosecond precision, trailing zeros cut, UTC);
/// nullopt is Go's zero time "0001-01-01T00:00:00Z".
std::string go_time(std::optional<index::micros> us);

}  // namespace ic::server
