#include "server/probe_json.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace ic::server {
namespace {

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const char* go_type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::boolean: return "bool";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "number";
    default: return "value";
  }
}

}  // namespace

probe_parse_result parse_probe_body(const std::string& body) {
  const std::string prefix = "decode probe request: ";
  if (body.size() > probe_max_body_bytes)
    return probe_parse_result::failure(prefix + "http: request body too large");
  // Strict parse: anything but whitespace after the first value is an error.
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    if (body.find_first_not_of(" \t\r\n") == std::string::npos)
      return probe_parse_result::failure(prefix + "EOF");
    return probe_parse_result::failure(prefix + "invalid JSON or trailing data after the object");
  }
  if (!doc.is_object())
    return probe_parse_result::failure(prefix + "json: cannot unmarshal " + go_type_name(doc) +
                                       " into Go value of type controlplaneapi.ProbeRequest");

  struct field {
    const char* name;
    std::string state::probe_request::*member;
  };
  static const field fields[] = {{"backend", &state::probe_request::backend},
                                 {"model", &state::probe_request::model},
                                 {"hashScheme", &state::probe_request::hash_scheme},
                                 {"backendType", &state::probe_request::backend_type}};
  state::probe_request req;
  for (const auto& [key, value] : doc.items()) {
    const field* f = nullptr;
    for (const auto& candidate : fields) {
      if (iequals(key, candidate.name)) f = &candidate;
    }
    if (f == nullptr)
      return probe_parse_result::failure(prefix + "json: unknown field \"" + key + "\"");
    if (value.is_null()) continue;  // Go leaves the field unset
    if (!value.is_string())
      return probe_parse_result::failure(prefix + "json: cannot unmarshal " + go_type_name(value) +
                                         " into Go struct field ProbeRequest." + f->name +
                                         " of type string");
    req.*(f->member) = value.get<std::string>();
  }
  if (req.backend.empty()) return probe_parse_result::failure("backend is required");
  if (req.model.empty()) return probe_parse_result::failure("model is required");
  if (req.hash_scheme.empty()) return probe_parse_result::failure("hashScheme is required");
  return req;
}

std::string encode_probe_outcome(const state::probe_outcome& outcome) {
  nlohmann::ordered_json j;
  j["backend"] = outcome.backend;
  j["ingest"] = std::string(state::to_string(outcome.ingest));
  j["routing"] = std::string(state::to_string(outcome.routing));
  j["t2"] = std::string(state::to_string(outcome.t2));
  if (!outcome.errors.empty()) {
    auto errors = nlohmann::ordered_json::array();
    for (const auto& e : outcome.errors) {
      nlohmann::ordered_json row;
      row["stage"] = e.stage;
      row["message"] = e.message;
      errors.push_back(std::move(row));
    }
    j["errors"] = std::move(errors);
  }
  return j.dump();
}

}  // namespace ic::server
