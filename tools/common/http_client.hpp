// A tiny blocking HTTP/1.1 client over a POSIX socket, for the admin port (/policy,
// /snapshot) and /readyz. One request per connection (`Connection: close`), plain HTTP,
// bounded by a timeout. It is not a general client: no TLS, no chunked request bodies, no
// redirects; it reads chunked or length-delimited responses.
//
//   http_request req{"POST", "/policy", body};
//   req.headers.push_back({"Authorization", "Bearer " + token});
//   auto res = http_call({"127.0.0.1", 8081}, req, 5.0);
//   if (!res.error.empty()) ...  // transport failure
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tools/common/codec.hpp"

namespace ic::tools {

/// One request: method, path (with query), body and extra headers.
struct http_request {
  std::string method = "GET";
  std::string path = "/";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

/// The answer; `error` is non-empty when no HTTP answer was received (status is then 0).
struct http_response {
  int status = 0;
  std::string body;
  std::string content_type;
  std::string error;
};

/// Sends `req` to `target` and reads the whole answer within `timeout_s` seconds.
http_response http_call(const host_port& target, const http_request& req, double timeout_s);

/// Reads an admin bearer token from `path` with surrounding whitespace trimmed, as the
/// server reads `--admin-token-file`; false and `*err` ("cannot read PATH") when unreadable.
bool read_token_file(const std::string& path, std::string* token, std::string* err);

/// Adds `Authorization: Bearer <token>` to `req` unless `token` is empty.
void add_bearer(const std::string& token, http_request* req);

}  // namespace ic::tools
