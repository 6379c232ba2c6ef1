#include "server/admin_auth.hpp"

#include <cctype>

namespace ic::server {

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Walk the expected length always; fold the length difference into the result.
  unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (std::size_t i = 0; i < b.size(); ++i) {
    unsigned char ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff |= static_cast<unsigned char>(ca ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

auth_result admin_auth::check(const std::string& header) const {
  if (disabled_) return auth_result::ok;
  const std::string scheme = "bearer";
  if (header.size() <= scheme.size()) return auth_result::unauth;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i]) return auth_result::unauth;
  if (!std::isspace(static_cast<unsigned char>(header[scheme.size()]))) return auth_result::unauth;
  std::size_t b = scheme.size();
  std::size_t e = header.size();
  while (b < e && std::isspace(static_cast<unsigned char>(header[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(header[e - 1]))) --e;
  std::string presented = header.substr(b, e - b);
  if (presented.empty()) return auth_result::unauth;
  return constant_time_equal(presented, token_) ? auth_result::ok : auth_result::unauth;
}

}  // namespace ic::server
