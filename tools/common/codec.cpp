#include "tools/common/codec.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace ic::tools {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::string to_hex(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHexDigits[c >> 4]);
    out.push_back(kHexDigits[c & 15]);
  }
  return out;
}

std::optional<std::string> from_hex(const std::string& text, std::string* err) {
  std::string t = text;
  if (t.size() >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t = t.substr(2);
  if (t.empty() || t.size() % 2 != 0) {
    *err = "hex value '" + text + "' must have an even, non-zero number of digits";
    return std::nullopt;
  }
  std::string out;
  out.reserve(t.size() / 2);
  for (std::size_t i = 0; i < t.size(); i += 2) {
    int hi = hex_value(t[i]), lo = hex_value(t[i + 1]);
    if (hi < 0 || lo < 0) {
      *err = "'" + text + "' is not valid hex";
      return std::nullopt;
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string to_base64(const std::string& bytes) {
  std::string out;
  std::size_t i = 0;
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(bytes[k]); };
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kB64[(v >> s) & 63]);
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    std::uint32_t v = at(i) << 16;
    out += {kB64[(v >> 18) & 63], kB64[(v >> 12) & 63], '=', '='};
  } else if (rest == 2) {
    std::uint32_t v = (at(i) << 16) | (at(i + 1) << 8);
    out += {kB64[(v >> 18) & 63], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], '='};
  }
  return out;
}

std::optional<std::string> from_base64(const std::string& text, std::string* err) {
  std::string t = text;
  while (!t.empty() && t.back() == '=') t.pop_back();
  if (t.empty() || t.size() % 4 == 1) {
    *err = "'" + text + "' is not valid base64";
    return std::nullopt;
  }
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : t) {
    int v = b64_value(c);
    if (v < 0) {
      *err = "'" + text + "' is not valid base64";
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::optional<std::string> decode_hash(const std::string& text, std::string* err) {
  const std::string t = trim(text);
  if (t.rfind("b64:", 0) == 0) return from_base64(t.substr(4), err);
  std::string hex_err;
  if (auto h = from_hex(t, &hex_err)) return h;
  std::string b64_err;
  if (auto b = from_base64(t, &b64_err)) return b;
  *err = "block hash '" + t + "' is neither hex nor base64";
  return std::nullopt;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = trim(text.substr(start, comma - start));
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

std::optional<std::vector<std::uint32_t>> parse_u32_list(const std::string& text,
                                                         std::string* err) {
  std::vector<std::uint32_t> out;
  for (const auto& item : split_list(text)) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item[0] == '-' || *end != '\0' || errno != 0 || v > 0xffffffffULL) {
      *err = "token '" + item + "' is not an unsigned 32-bit integer";
      return std::nullopt;
    }
    out.push_back(static_cast<std::uint32_t>(v));
  }
  return out;
}

std::string be64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

std::optional<host_port> parse_host_port(const std::string& text, std::string* err) {
  host_port hp;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    std::size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *err = "address '" + text + "' must be [host]:port";
      return std::nullopt;
    }
    hp.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    std::size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      *err = "address '" + text + "' must be host:port";
      return std::nullopt;
    }
    hp.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (hp.host.empty()) hp.host = "127.0.0.1";
  char* end = nullptr;
  long p = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || p <= 0 || p > 65535) {
    *err = "address '" + text + "' has no valid port";
    return std::nullopt;
  }
  hp.port = static_cast<int>(p);
  return hp;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::optional<double> parse_seconds(const std::string& text, std::string* err) {
  const std::string t = trim(text);
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  std::string unit = end ? std::string(end) : "";
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  if (t.empty() || end == t.c_str() || scale == 0 || v < 0) {
    *err = "duration '" + text + "' must look like 500ms, 2s, 1.5s or 3m";
    return std::nullopt;
  }
  return v * scale;
}

}  // namespace ic::tools
