// The /probe wire format (spec/operations.md §2.5): strict decoding of the request body and
// the exact 200 body.
//
// Decoding follows the reference's Go decoder: one JSON object, keys matched
// case-insensitively, unknown fields, a non-string value, anything after the first JSON value,
// or a missing/empty `backend`, `model` or `hashScheme` is an error. The caller answers 400
// with the error text.
//
//   auto req = ic::server::parse_probe_body(body);
//   if (!req.ok()) return http_response{400, req.error() + "\n"};
//   std::string json = ic::server::encode_probe_outcome(outcome);
#pragma once

#include <cstddef>
#include <string>
#include <variant>

#include "state/probe.hpp"

namespace ic::server {

/// Largest /probe body read (4 KiB); a larger body is a decode error.
inline constexpr std::size_t probe_max_body_bytes = 4096;

/// A decoded request or the reason it was refused.
class probe_parse_result {
 public:
  probe_parse_result(state::probe_request r) : v_(std::move(r)) {}
  static probe_parse_result failure(std::string why) { return probe_parse_result(why, 0); }

  bool ok() const { return std::holds_alternative<state::probe_request>(v_); }
  const state::probe_request& value() const { return std::get<state::probe_request>(v_); }
  const std::string& error() const { return std::get<std::string>(v_); }

 private:
  probe_parse_result(std::string why, int) : v_(std::move(why)) {}
  std::variant<state::probe_request, std::string> v_;
};

/// Decodes a /probe body; errors read "decode probe request: ..." or name the missing field.
probe_parse_result parse_probe_body(const std::string& body);

/// Returns the 200 body: {"backend","ingest","routing","t2"[,"errors":[{"stage","message"}]]}
/// in that key order, `errors` omitted when empty.
std::string encode_probe_outcome(const state::probe_outcome& outcome);

}  // namespace ic::server
