#include "admin_json/json_reader.hpp"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>

namespace ic::admin_json {
namespace {

/// Runs `parse` on non-blank `text`; a blank text is `<prefix><blank>`, a parse error
/// `<prefix>` + nlohmann's message without its tag, on one line.
template <class Parse>
policy::result<json> parse_with(std::string_view text, std::string_view prefix, const char* blank,
                                Parse&& parse) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return policy::error{std::string(prefix) + blank};
  }
  try {
    return parse();
  } catch (const std::exception& e) {
    return policy::error{one_line(std::string(prefix) + json_error_text(e))};
  }
}

}  // namespace

policy::result<json> parse_document(std::string_view text, std::string_view prefix) {
  return parse_with(text, prefix, "empty body",
                    [&] { return json::parse(text.begin(), text.end()); });
}

policy::result<json> parse_first_value(std::string_view text, std::string_view prefix) {
  return parse_with(text, prefix, "EOF", [&] {
    std::istringstream in{std::string(text)};
    json j;
    in >> j;  // a stream read stops after the first value
    return j;
  });
}

std::string json_error_text(const std::exception& e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    const auto end = what.find("] ");
    if (end != std::string::npos) what.erase(0, end + 2);
  }
  return what;
}

std::string kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "bool";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "number " + v.dump();
    default: return "value";
  }
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[7];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

double shortest_double(float f) {
  for (int precision = 1; precision <= 9; ++precision) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    const double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == f && std::signbit(d) == std::signbit(f)) return d;
  }
  return static_cast<double>(f);
}

policy::status reader::status() const {
  if (error_) return policy::error{*error_};
  return {};
}

bool reader::fail(const std::string& path, const std::string& what) {
  if (!error_) error_ = one_line(prefix_ + (path.empty() ? "" : path + ": ") + what);
  return false;
}

bool reader::type_error(const json& v, const std::string& path, std::string_view type) {
  return fail(path, "expected " + std::string(type) + ", got " + kind_of(v));
}

std::string reader::member(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string reader::element(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

bool reader::object(const json& v, const std::string& path,
                    std::initializer_list<std::string_view> known) {
  if (failed()) return false;
  if (!v.is_object()) return type_error(v, path, "object");
  for (const auto& item : v.items()) {
    bool ok = false;
    for (auto k : known) ok = ok || item.key() == k;
    if (!ok) return fail(member(path, item.key()), "unknown field " + quote(item.key()));
  }
  return true;
}

const json* reader::field(const json& v, std::string_view key) {
  auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}

bool reader::string(const json& v, const std::string& path, std::string& out) {
  if (failed()) return false;
  if (!v.is_string()) return type_error(v, path, "string");
  out = v.get<std::string>();
  return true;
}

bool reader::boolean(const json& v, const std::string& path, bool& out) {
  if (failed()) return false;
  if (!v.is_boolean()) return type_error(v, path, "bool");
  out = v.get<bool>();
  return true;
}

bool reader::integer(const json& v, const std::string& path, std::int64_t& out, std::int64_t lo,
                     std::int64_t hi) {
  if (failed()) return false;
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (x > static_cast<std::uint64_t>(hi)) {
      return fail(path, "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    out = static_cast<std::int64_t>(x);
  } else if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else {
    return type_error(v, path, "integer");
  }
  if (out < lo || out > hi) {
    return fail(path, "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return true;
}

bool reader::float32(const json& v, const std::string& path, float& out) {
  if (failed()) return false;
  if (!v.is_number()) return type_error(v, path, "number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(FLT_MAX)) {
    return fail(path, "out of float32 range");
  }
  out = static_cast<float>(d);
  return true;
}

bool reader::array(const json& v, const std::string& path) {
  if (failed()) return false;
  if (!v.is_array()) return type_error(v, path, "array");
  return true;
}

bool reader::string_array(const json& v, const std::string& path, std::vector<std::string>& out) {
  if (!array(v, path)) return false;
  out.clear();
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.emplace_back();
    if (!string(v[i], element(path, i), out.back())) return false;
  }
  return true;
}

bool reader::string_map(const json& v, const std::string& path,
                        std::map<std::string, std::string>& out) {
  if (failed()) return false;
  if (!v.is_object()) return type_error(v, path, "object");
  out.clear();
  for (const auto& item : v.items()) {
    std::string value;
    if (!string(item.value(), member(path, item.key()), value)) return false;
    out[item.key()] = std::move(value);
  }
  return true;
}

policy::status decode_versioned_list(
    reader& r, const json& doc, std::string_view list_key, std::string_view what,
    const std::function<bool(const json&, const std::string&)>& element) {
  const std::string key(list_key);
  if (!r.object(doc, "", {"version", list_key})) return r.status();
  std::int64_t version = 0;
  if (auto* f = reader::field(doc, "version")) r.integer(*f, "version", version, INT32_MIN, INT32_MAX);
  if (!r.failed() && version != 1) {
    r.fail("version", "unsupported " + std::string(what) + " version " + std::to_string(version) +
                          " (accepted 1)");
  }
  if (auto* f = reader::field(doc, list_key); f != nullptr && r.array(*f, key)) {
    for (std::size_t i = 0; i < f->size() && !r.failed(); ++i) {
      if (!element((*f)[i], reader::element(key, i))) break;
    }
  }
  return r.status();
}

}  // namespace ic::admin_json
