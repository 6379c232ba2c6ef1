// Bearer-token auth for the admin port (/snapshot, /policy, /probe).
//
// The expected token comes from `--admin-token-file`; `--insecure-disable-auth` turns the
// check off. The comparison takes the same time whatever the token's content, so it leaks
// nothing about how much of a guess was right.
#pragma once

#include <string>

namespace ic::server {

/// The outcome of one check, as counted in `inferencecache_*_auth_total{result}`.
enum class auth_result { ok, unauth };

/// Checks `Authorization` headers against a fixed bearer token. Thread-safe (immutable).
class admin_auth {
 public:
  /// An authenticator expecting `token`; an empty token with `disabled` lets all through.
  admin_auth(std::string token, bool disabled) : token_(std::move(token)), disabled_(disabled) {}

  /// Returns ok when auth is disabled or the header is "Bearer <token>" (scheme compared
  /// case-insensitively, token trimmed); unauth otherwise.
  auth_result check(const std::string& authorization_header) const;

  bool disabled() const { return disabled_; }

 private:
  std::string token_;
  bool disabled_;
};

/// Compares two strings in time that depends only on their lengths.
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace ic::server
