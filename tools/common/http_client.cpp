#include "tools/common/http_client.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ic::tools {
namespace {

using clock_type = std::chrono::steady_clock;

int remaining_ms(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

/// Connects to the first address of `target` that accepts, bounded by the deadline.
int connect_to(const host_port& target, clock_type::time_point deadline, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(target.port);
  int rc = ::getaddrinfo(target.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    *err = "cannot resolve " + target.host + ": " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, remaining_ms(deadline)) == 1) {
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error == 0) break;
        errno = so_error;
      } else {
        errno = ETIMEDOUT;
      }
    }
    *err = std::string("cannot connect to ") + target.host + ":" + port + ": " + std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  return fd;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Decodes a chunked body; returns false when it is incomplete.
bool dechunk(const std::string& in, std::string* out) {
  std::size_t pos = 0;
  out->clear();
  while (true) {
    std::size_t eol = in.find("\r\n", pos);
    if (eol == std::string::npos) return false;
    std::size_t size = std::strtoul(in.substr(pos, eol - pos).c_str(), nullptr, 16);
    pos = eol + 2;
    if (size == 0) return true;
    if (pos + size > in.size()) return false;
    out->append(in, pos, size);
    pos += size + 2;
  }
}

}  // namespace

http_response http_call(const host_port& target, const http_request& req, double timeout_s) {
  http_response out;
  const auto deadline =
      clock_type::now() + std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  int fd = connect_to(target, deadline, &out.error);
  if (fd < 0) return out;

  std::string wire = req.method + " " + req.path + " HTTP/1.1\r\nHost: " + target.host + ":" +
                     std::to_string(target.port) + "\r\nConnection: close\r\n";
  for (const auto& [k, v] : req.headers) wire += k + ": " + v + "\r\n";
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT")
    wire += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
  wire += "\r\n" + req.body;

  std::size_t sent = 0;
  while (sent < wire.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) != 1) {
      out.error = "timed out sending the request";
      ::close(fd);
      return out;
    }
    ssize_t n = ::send(fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      out.error = std::string("send failed: ") + std::strerror(errno);
      ::close(fd);
      return out;
    }
    if (n > 0) sent += static_cast<std::size_t>(n);
  }

  std::string raw;
  char buf[16384];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    int pr = ::poll(&p, 1, remaining_ms(deadline));
    if (pr != 1) {
      out.error = "timed out waiting for the answer";
      ::close(fd);
      return out;
    }
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    raw.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);

  std::size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) {
    out.error = "malformed HTTP answer";
    return out;
  }
  out.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  bool chunked = false;
  std::size_t line = raw.find("\r\n") + 2;
  while (line < head_end) {
    std::size_t eol = raw.find("\r\n", line);
    std::string h = raw.substr(line, eol - line);
    std::size_t colon = h.find(':');
    if (colon != std::string::npos) {
      std::string name = lower(h.substr(0, colon));
      std::string value = h.substr(colon + 1);
      while (!value.empty() && value[0] == ' ') value.erase(0, 1);
      if (name == "content-type") out.content_type = value;
      if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos)
        chunked = true;
    }
    line = eol + 2;
  }
  std::string body = raw.substr(head_end + 4);
  if (chunked) {
    if (!dechunk(body, &out.body)) out.error = "truncated chunked answer";
  } else {
    out.body = std::move(body);
  }
  return out;
}

bool read_token_file(const std::string& path, std::string* token, std::string* err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = "cannot read " + path;
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  const auto first = t.find_first_not_of(" \t\r\n\f\v");
  const auto last = t.find_last_not_of(" \t\r\n\f\v");
  *token = first == std::string::npos ? "" : t.substr(first, last - first + 1);
  return true;
}

void add_bearer(const std::string& token, http_request* req) {
  if (!token.empty()) req->headers.push_back({"Authorization", "Bearer " + token});
}

}  // namespace ic::tools
