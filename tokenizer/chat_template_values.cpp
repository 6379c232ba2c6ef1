// The Python-like values of the chat-template interpreter and their helpers (see
// chat_template_detail.hpp).
#include "tokenizer/chat_template_detail.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <variant>

#include <utf8proc.h>

namespace ic::tokenizer::chat_template_detail {

bool truthy(const value& v) {
  switch (v.k) {
    case value::undef: case value::none: return false;
    case value::boolean: return v.b;
    case value::integer: return v.i != 0;
    case value::real: return v.d != 0;
    case value::string: return !v.s->empty();
    case value::list: return !v.l->empty();
    case value::dict: return !v.m->empty();
    default: return true;
  }
}

/// Python's repr of a float (shortest round-trip; scientific below 1e-4 and from 1e16).
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // buf = d.ddde[+-]XX: rebuild Python's form
  std::string sci(buf);
  auto e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::atoi(sci.c_str() + e + 1);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  } else {
    auto ip = static_cast<std::size_t>(exp) + 1;
    if (digits.size() <= ip) out = digits + std::string(ip - digits.size(), '0') + ".0";
    else out = digits.substr(0, ip) + "." + digits.substr(ip);
  }
  return neg ? "-" + out : out;
}

std::string py_repr(const value& v);

/// Python's str().
std::string to_str(const value& v) {
  switch (v.k) {
    case value::undef: return "";
    case value::none: return "None";
    case value::boolean: return v.b ? "True" : "False";
    case value::integer: return std::to_string(v.i);
    case value::real: return float_repr(v.d);
    case value::string: return *v.s;
    case value::func: return "<function " + v.fn + ">";
    case value::ns: return "<Namespace>";
    default: return py_repr(v);
  }
}

std::string quote_repr(const std::string& s) {
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == q) { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", c); out += b; }
    else out += static_cast<char>(c);
  }
  return out + q;
}

std::string py_repr(const value& v) {
  switch (v.k) {
    case value::string: return quote_repr(*v.s);
    case value::list: {
      std::string out = "[";
      for (std::size_t n = 0; n < v.l->size(); ++n) out += (n ? ", " : "") + py_repr((*v.l)[n]);
      return out + "]";
    }
    case value::dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : *v.m) {
        out += (first ? "" : ", ") + quote_repr(k) + ": " + py_repr(x);
        first = false;
      }
      return out + "}";
    }
    default: return to_str(v);
  }
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:  // Python's json escapes only control characters below 0x20 here
        if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); out += b; }
        else out += static_cast<char>(c);
    }
  }
  out += '"';
}

/// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys) with Python's
/// default separators.
void to_json(const value& v, int indent, bool sort_keys, int depth, std::string& out) {
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.k) {
    case value::undef: throw render_error("tojson: Undefined is not JSON serializable");
    case value::none: out += "null"; return;
    case value::boolean: out += v.b ? "true" : "false"; return;
    case value::integer: out += std::to_string(v.i); return;
    case value::real:
      out += std::isnan(v.d) ? "NaN" : std::isinf(v.d) ? (v.d > 0 ? "Infinity" : "-Infinity") : float_repr(v.d);
      return;
    case value::string: json_string(*v.s, out); return;
    case value::list:
      if (v.l->empty()) { out += "[]"; return; }
      out += '[';
      for (std::size_t n = 0; n < v.l->size(); ++n) {
        if (n) out += item_sep;
        if (indent >= 0) newline(depth + 1);
        to_json((*v.l)[n], indent, sort_keys, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    case value::dict: case value::ns: {
      if (v.m->empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, value>*> items;
      for (const auto& p : *v.m) items.push_back(&p);
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (std::size_t n = 0; n < items.size(); ++n) {
        if (n) out += item_sep;
        if (indent >= 0) newline(depth + 1);
        json_string(items[n]->first, out);
        out += ": ";
        to_json(items[n]->second, indent, sort_keys, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    default: throw render_error("tojson: a function is not JSON serializable");
  }
}

bool equal(const value& a, const value& b) {
  if (a.is_num() && b.is_num()) return a.num() == b.num();
  if (a.k != b.k) return false;
  switch (a.k) {
    case value::undef: case value::none: return true;
    case value::string: return *a.s == *b.s;
    case value::list:
      if (a.l->size() != b.l->size()) return false;
      for (std::size_t n = 0; n < a.l->size(); ++n)
        if (!equal((*a.l)[n], (*b.l)[n])) return false;
      return true;
    case value::dict: case value::ns:
      if (a.m->size() != b.m->size()) return false;
      for (const auto& [k, x] : *a.m) {
        const value* y = b.get(k);
        if (!y || !equal(x, *y)) return false;
      }
      return true;
    case value::func: return a.fn == b.fn;
    default: return false;
  }
}

/// Python's iteration: lists, dict keys, string characters (UTF-8 code points).
list_t iterate(const value& v) {
  switch (v.k) {
    case value::list: return *v.l;
    case value::dict: {
      list_t out;
      for (const auto& [k, x] : *v.m) out.push_back(value::of_str(k));
      return out;
    }
    case value::string: {
      list_t out;
      const std::string& s = *v.s;
      for (std::size_t n = 0; n < s.size();) {
        std::size_t len = 1;
        while (n + len < s.size() && (static_cast<unsigned char>(s[n + len]) & 0xC0) == 0x80) ++len;
        out.push_back(value::of_str(s.substr(n, len)));
        n += len;
      }
      return out;
    }
    case value::undef: return {};
    default: throw render_error("value of type " + std::string(v.k == value::none ? "None" : "this type") + " is not iterable");
  }
}

std::int64_t length_of(const value& v) {
  switch (v.k) {
    case value::string: {  // code points: bytes that do not continue a sequence
      std::int64_t n = 0;
      for (unsigned char c : *v.s) n += (c & 0xC0) != 0x80;
      return n;
    }
    case value::list: return static_cast<std::int64_t>(v.l->size());
    case value::dict: return static_cast<std::int64_t>(v.m->size());
    case value::undef: return 0;
    default: throw render_error("object has no len()");
  }
}


/// Python's str.strip(chars) family; chars = nullptr strips whitespace.
std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto drop = [&](char c) { return chars ? chars->find(c) != std::string::npos : is_space(c); };
  std::size_t a = 0, b = s.size();
  if (left) while (a < b && drop(s[a])) ++a;
  if (right) while (b > a && drop(s[b - 1])) --b;
  return s.substr(a, b - a);
}

/// Maps every code point of `s` (valid UTF-8) through `f` (utf8proc's simple case mappings;
/// Python's full mappings such as "ß" -> "SS" are not applied).
template <class F>
std::string map_code_points(const std::string& s, F&& f) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  std::size_t n = 0;
  while (n < s.size()) {
    utf8proc_int32_t cp;
    auto len = utf8proc_iterate(p + n, static_cast<utf8proc_ssize_t>(s.size() - n), &cp);
    if (len <= 0) {  // not UTF-8: copy the byte
      out += s[n++];
      continue;
    }
    utf8proc_uint8_t buf[4];
    auto w = utf8proc_encode_char(f(cp), buf);
    out.append(reinterpret_cast<char*>(buf), static_cast<std::size_t>(w));
    n += static_cast<std::size_t>(len);
  }
  return out;
}

std::string lower(const std::string& s) { return map_code_points(s, utf8proc_tolower); }
std::string upper(const std::string& s) { return map_code_points(s, utf8proc_toupper); }
/// Python's str.title(): a cased character after an uncased one is upper-cased, others lowered.
std::string title(const std::string& s) {
  bool prev_cased = false;
  return map_code_points(s, [&](utf8proc_int32_t c) {
    const auto cat = utf8proc_category(c);
    const bool cased = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                       cat == UTF8PROC_CATEGORY_LT;
    auto r = cased ? (prev_cased ? utf8proc_tolower(c) : utf8proc_totitle(c)) : c;
    prev_cased = cased;
    return r;
  });
}

list_t split(const std::string& s, const value* sep, std::int64_t maxsplit) {
  list_t out;
  if (sep == nullptr || sep->k == value::none) {
    std::size_t n = 0;
    while (n < s.size()) {
      while (n < s.size() && is_space(s[n])) ++n;
      if (n >= s.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        out.push_back(value::of_str(strip(s.substr(n), nullptr, false, true)));
        return out;
      }
      std::size_t e = n;
      while (e < s.size() && !is_space(s[e])) ++e;
      out.push_back(value::of_str(s.substr(n, e - n)));
      n = e;
    }
    return out;
  }
  if (sep->k != value::string || sep->s->empty()) throw render_error("split: empty separator");
  const std::string& d = *sep->s;
  std::size_t start = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) break;
    auto p = s.find(d, start);
    if (p == std::string::npos) break;
    out.push_back(value::of_str(s.substr(start, p - start)));
    start = p + d.size();
  }
  out.push_back(value::of_str(s.substr(start)));
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) return s;
  // Built in one pass (in-place replace is quadratic on many matches), within max_render_bytes.
  std::string out;
  std::size_t start = 0;
  for (std::int64_t n = 0; count < 0 || n < count; ++n) {
    const std::size_t p = s.find(from, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += to;
    start = p + from.size();
    check_size(out.size() + (s.size() - start));
  }
  out.append(s, start, std::string::npos);
  return out;
}

/// Python slicing over a sequence of `n` items: the indices selected.
std::vector<std::int64_t> slice_indices(std::int64_t n, const value& a, const value& b, const value& c) {
  std::int64_t step = c.k == value::undef || c.k == value::none ? 1 : c.i;
  if (step == 0) throw render_error("slice step cannot be zero");
  auto norm = [&](const value& v, std::int64_t dflt, bool is_start) {
    if (v.k == value::undef || v.k == value::none) return dflt;
    std::int64_t x = v.i;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<std::int64_t>(x, 0, n);
    (void)is_start;
    return std::clamp<std::int64_t>(x, -1, n - 1);
  };
  std::vector<std::int64_t> out;
  if (step > 0) {
    for (auto x = norm(a, 0, true), e = norm(b, n, false); x < e; x += step) out.push_back(x);
  } else {
    for (auto x = norm(a, n - 1, true), e = norm(b, -1, false); x > e; x += step) out.push_back(x);
  }
  return out;
}

}  // namespace ic::tokenizer::chat_template_detail
