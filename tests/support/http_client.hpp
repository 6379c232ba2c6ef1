// A tiny blocking HTTP/1.1 client for tests: one request per connection, loopback only.
#pragma once

#include <map>
#include <string>

namespace ic::test {

/// A parsed HTTP response; status 0 means the request could not be made.
struct http_result {
  int status = 0;
  std::map<std::string, std::string> headers;  ///< names lower-cased
  std::string body;
};

/// Connects to 127.0.0.1:`port` with send/receive timeouts; returns the fd or -1. The caller
/// closes it.
int open_connection(int port, int timeout_seconds = 10);

/// Blocks in recv on `fd` until the peer closes it; true for EOF or reset, false when the
/// socket's receive timeout (see open_connection) passed first. Discards what it reads.
bool closed_by_peer(int fd);

/// Sends `method path` to 127.0.0.1:`port` with optional extra headers and body.
http_result http_call(int port, const std::string& method, const std::string& path,
                      const std::map<std::string, std::string>& headers = {},
                      const std::string& body = "");

}  // namespace ic::test
