#include "tests/support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <sstream>

namespace ic::test {

int open_connection(int port, int timeout_seconds) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool closed_by_peer(int fd) {
  char buf[256];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

namespace {

/// Decodes an HTTP/1.1 chunked body (nats-server's monitoring port sends large answers so);
/// stops at the last chunk or at the first malformed size line.
std::string dechunk(const std::string& in) {
  std::string out;
  std::size_t at = 0;
  while (at < in.size()) {
    const auto eol = in.find("\r\n", at);
    if (eol == std::string::npos) break;
    std::size_t size = 0;
    try {
      size = std::stoul(in.substr(at, eol - at), nullptr, 16);
    } catch (...) {
      break;
    }
    if (size == 0 || eol + 2 + size > in.size()) break;
    out.append(in, eol + 2, size);
    at = eol + 2 + size + 2;  // the chunk's trailing CRLF
  }
  return out;
}

}  // namespace

http_result http_call(int port, const std::string& method, const std::string& path,
                      const std::map<std::string, std::string>& headers, const std::string& body) {
  http_result out;
  int fd = open_connection(port, 10);
  if (fd < 0) return out;
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT")
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  std::size_t sent = 0;
  while (sent < req.size()) {
    ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string raw;
  char buf[8192];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) raw.append(buf, static_cast<std::size_t>(n));
  ::close(fd);

  auto head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return out;
  std::istringstream head(raw.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  std::istringstream status_line(line);
  std::string version;
  status_line >> version >> out.status;
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    out.headers[name] = value;
  }
  out.body = raw.substr(head_end + 4);
  auto te = out.headers.find("transfer-encoding");
  if (te != out.headers.end() && te->second.find("chunked") != std::string::npos)
    out.body = dechunk(out.body);
  return out;
}

}  // namespace ic::test
