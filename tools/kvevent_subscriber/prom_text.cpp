#include "tools/kvevent_subscriber/prom_text.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace ic::kvevent {
namespace {

bool name_char(char c, bool first) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x80) return true;  // UTF-8 names
  if (std::isalpha(u) || c == '_' || c == ':') return true;
  return !first && std::isdigit(u);
}

bool parse_value(std::string_view s, double& out) {
  if (s == "NaN") out = std::numeric_limits<double>::quiet_NaN();
  else if (s == "+Inf" || s == "Inf") out = std::numeric_limits<double>::infinity();
  else if (s == "-Inf") out = -std::numeric_limits<double>::infinity();
  else {
    std::string tmp(s);
    char* end = nullptr;
    out = std::strtod(tmp.c_str(), &end);
    if (end == tmp.c_str() || *end != '\0') return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<prom_sample>> parse_prom_text(std::string_view body, std::string* err) {
  std::vector<prom_sample> out;
  std::size_t line_no = 0;
  while (!body.empty()) {
    auto nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    std::size_t p = 0;
    while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) ++p;
    line = line.substr(p);
    if (line.empty() || line[0] == '#') continue;  // HELP, TYPE, EOF and comments
    auto fail = [&](const char* what) {
      if (err) *err = "line " + std::to_string(line_no) + ": " + what;
      return std::nullopt;
    };
    prom_sample s;
    std::size_t i = 0;
    if (!name_char(line[0], true)) return fail("bad metric name");
    while (i < line.size() && name_char(line[i], i == 0)) ++i;
    s.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
        if (i >= line.size()) return fail("unterminated labels");
        if (line[i] == '}') {
          ++i;
          break;
        }
        std::size_t b = i;
        while (i < line.size() && line[i] != '=' && line[i] != ' ') ++i;
        std::string key(line.substr(b, i - b));
        while (i < line.size() && line[i] == ' ') ++i;
        if (i >= line.size() || line[i] != '=') return fail("label without '='");
        ++i;
        while (i < line.size() && line[i] == ' ') ++i;
        if (i >= line.size() || line[i] != '"') return fail("label value not quoted");
        ++i;
        std::string val;
        while (true) {
          if (i >= line.size()) return fail("unterminated label value");
          char c = line[i++];
          if (c == '"') break;
          if (c == '\\') {
            if (i >= line.size()) return fail("bad escape");
            char e = line[i++];
            val += e == 'n' ? '\n' : e;  // \\ and \" keep the escaped char
          } else {
            val += c;
          }
        }
        if (key.size() >= 2 && key.front() == '"' && key.back() == '"') key = key.substr(1, key.size() - 2);
        s.labels[key] = val;
      }
    }
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t vb = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (vb == i) return fail("missing value");
    if (!parse_value(line.substr(vb, i - vb), s.value)) return fail("bad value");
    // An optional integer timestamp may follow; it is not used.
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ic::kvevent
