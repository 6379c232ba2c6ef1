#include "journal/status.hpp"

namespace ic::journal {

std::string_view to_string(errc c) {
  switch (c) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::not_found: return "not_found";
    case errc::out_of_range: return "out_of_range";
    case errc::corruption: return "corruption";
    case errc::incompatible: return "incompatible";
    case errc::unavailable: return "unavailable";
    case errc::conflict: return "conflict";
    case errc::internal: return "internal";
  }
  return "unknown";
}

std::string status::to_string() const {
  if (ok()) return "ok";
  std::string s{journal::to_string(code_)};
  s += ": ";
  s += message_;
  return s;
}

}  // namespace ic::journal
