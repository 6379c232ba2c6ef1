// Go-style durations (`time.ParseDuration` / `Duration.String`) for flags and policy files.
//
// The grammar is Go's: an optional sign, then one or more `<number><unit>` terms where the
// number may have a fraction (`1.5h`, `.5s`) and the unit is one of `ns`, `us` (or `µs`,
// `μs`), `ms`, `s`, `m`, `h`; terms add up (`1h30m`). The lone string `0` (optionally
// signed) is zero; any other bare number is refused ("missing unit"), as spec/extensions.md
// §2 requires. The value is a signed 64-bit nanosecond count; overflow is an error.
//
//   auto ttl = ic::policy::parse_duration("30m");       // 1'800'000'000'000 ns
//   ic::policy::format_duration(*ttl);                  // "30m0s"
//
// Sign checks (e.g. "--default-ttl must be > 0") are the caller's business.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "policy/result.hpp"

namespace ic::policy {

/// Parses a Go duration string; errors name the input, e.g. `invalid duration "1x"`.
result<std::chrono::nanoseconds> parse_duration(std::string_view text);

/// Formats like Go's `Duration.String`: "1h30m0s", "500ms", "1.5µs", "0s".
std::string format_duration(std::chrono::nanoseconds d);

}  // namespace ic::policy
