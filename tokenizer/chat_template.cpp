#include "tokenizer/chat_template.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <variant>

#include <utf8proc.h>

namespace ic::tokenizer {

using ::ic::policy::error;
using ::ic::policy::result;

std::tm system_local_time() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  return tm;
}

namespace {

// ---------------------------------------------------------------------------------------
// Values: Python-like, as Jinja sees them.

struct value;
using list_t = std::vector<value>;
using dict_t = std::vector<std::pair<std::string, value>>;  // insertion order, like dict


struct value {
  enum kind { undef, none, boolean, integer, real, string, list, dict, ns, func };
  kind k = undef;
  bool b = false;
  std::int64_t i = 0;
  double d = 0;
  std::shared_ptr<const std::string> s;
  std::shared_ptr<list_t> l;
  std::shared_ptr<dict_t> m;  // dict and namespace (namespace is mutable)
  std::string fn;             // global function name

  static value of_bool(bool v) { value x; x.k = boolean; x.b = v; return x; }
  static value of_int(std::int64_t v) { value x; x.k = integer; x.i = v; return x; }
  static value of_real(double v) { value x; x.k = real; x.d = v; return x; }
  static value of_str(std::string v) {
    value x; x.k = string; x.s = std::make_shared<const std::string>(std::move(v)); return x;
  }
  static value of_list(list_t v) { value x; x.k = list; x.l = std::make_shared<list_t>(std::move(v)); return x; }
  static value of_dict(dict_t v) { value x; x.k = dict; x.m = std::make_shared<dict_t>(std::move(v)); return x; }
  static value of_none() { value x; x.k = none; return x; }
  static value of_fn(std::string name) { value x; x.k = func; x.fn = std::move(name); return x; }

  const std::string& str() const { return *s; }
  bool is_num() const { return k == integer || k == real || k == boolean; }
  double num() const { return k == real ? d : k == integer ? static_cast<double>(i) : (b ? 1 : 0); }
  const value* get(std::string_view key) const {
    if ((k != dict && k != ns) || !m) return nullptr;
    for (const auto& [kk, v] : *m)
      if (kk == key) return &v;
    return nullptr;
  }
};

/// A template-time failure (raise_exception, a type error): becomes the render's error.
struct render_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

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
  std::size_t p = 0;
  for (std::int64_t n = 0; count < 0 || n < count; ++n) {
    p = s.find(from, p);
    if (p == std::string::npos) break;
    s.replace(p, from.size(), to);
    p += to.size();
  }
  return s;
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

// ---------------------------------------------------------------------------------------
// Syntax tree.

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  enum kind {
    literal, name, list_lit, dict_lit, attr, subscript, slice, call, filter, test, unary_not,
    unary_neg, binary, logical_and, logical_or, compare_in, compare_not_in, ternary
  };
  kind k;
  int line = 0;
  value lit;              // literal
  std::string id;         // name / attr / filter / test / binary operator / call method
  std::vector<expr_ptr> args;   // operands and positional arguments
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  bool negated = false;  // `is not`
};

struct node;
using body = std::vector<std::unique_ptr<node>>;

struct node {
  enum kind { text, output, if_, for_, set, set_block, break_, continue_ };
  kind k;
  int line = 0;
  std::string text_value;
  expr_ptr e;                                   // output / set value / for iterable
  std::vector<std::pair<expr_ptr, body>> branches;  // if: (condition or null for else, body)
  std::vector<std::string> targets;             // for / set target names
  std::string ns_attr;                          // set ns.attr: targets[0] = ns
  expr_ptr loop_filter;                         // for ... if cond
  body inner, else_body;
};

// ---------------------------------------------------------------------------------------
// Lexing the template into text and tags, with Jinja's whitespace rules.

struct tag {
  enum kind { text, var, block, comment } k;
  std::string content;  // inside the delimiters, without whitespace-control marks
  int line;
};

struct syntax_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(int line, const std::string& what) {
  throw syntax_error("line " + std::to_string(line) + ": " + what);
}

/// Jinja's source preparation: newlines normalized to "\n", one trailing newline dropped
/// (keep_trailing_newline=False).
std::string prepare_source(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (std::size_t n = 0; n < in.size(); ++n) {
    if (in[n] == '\r') {
      s += '\n';
      if (n + 1 < in.size() && in[n + 1] == '\n') ++n;
    } else {
      s += in[n];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

/// Finds `close` at or after `from`; in expression tags a delimiter inside a string literal
/// does not count (`{{ '}}' }}`).
std::size_t find_tag_end(std::string_view src, std::size_t from, const char* close, bool strings) {
  for (std::size_t n = from; n + 1 < src.size(); ++n) {
    const char c = src[n];
    if (strings && (c == '\'' || c == '"')) {
      for (++n; n < src.size() && src[n] != c; ++n)
        if (src[n] == '\\') ++n;
      if (n >= src.size()) return std::string_view::npos;
      continue;
    }
    if (c == close[0] && src[n + 1] == close[1]) return n;
  }
  return std::string_view::npos;
}

std::vector<tag> lex(std::string_view src) {
  std::vector<tag> out;
  int line = 1;
  auto count_lines = [&](std::size_t a, std::size_t b) {
    line += static_cast<int>(std::count(src.begin() + static_cast<std::ptrdiff_t>(a),
                                        src.begin() + static_cast<std::ptrdiff_t>(b), '\n'));
  };
  std::size_t pos = 0;
  bool strip_next = false, trim_next_newline = false;
  while (pos <= src.size()) {
    std::size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string_view::npos && open + 1 >= src.size()) open = std::string_view::npos;
    std::string text(src.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos));
    // What the previous tag asked of this text.
    if (strip_next) {
      std::size_t a = 0;
      while (a < text.size() && is_space(text[a])) ++a;
      text.erase(0, a);
    } else if (trim_next_newline && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
    }
    strip_next = trim_next_newline = false;
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({tag::text, text, line});
      break;
    }
    const char kind = src[open + 1];
    std::size_t inner = open + 2;
    bool left_minus = false, left_plus = false;
    if (inner < src.size() && src[inner] == '-') { left_minus = true; ++inner; }
    else if (inner < src.size() && src[inner] == '+') { left_plus = true; ++inner; }
    // Whitespace before the tag: `-` strips all of it; lstrip_blocks strips spaces/tabs that
    // start the line of a block or comment tag.
    if (left_minus) {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (kind != '{' && !left_plus) {
      std::size_t b = text.size();
      while (b > 0 && (text[b - 1] == ' ' || text[b - 1] == '\t')) --b;
      std::size_t src_b = open - (text.size() - b);
      if (src_b == 0 || src[src_b - 1] == '\n') text.erase(b);
    }
    count_lines(pos, open);
    if (!text.empty()) out.push_back({tag::text, text, line});
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    std::size_t end = find_tag_end(src, inner, close, kind != '#');
    if (end == std::string_view::npos) fail(line, std::string("unclosed '{") + kind + "'");
    std::size_t content_end = end;
    bool right_minus = false;
    if (content_end > inner && src[content_end - 1] == '-') { right_minus = true; --content_end; }
    else if (content_end > inner && src[content_end - 1] == '+') { --content_end; }
    tag t{kind == '{' ? tag::var : kind == '%' ? tag::block : tag::comment,
          std::string(src.substr(inner, content_end - inner)), line};
    if (t.k != tag::comment) out.push_back(std::move(t));
    count_lines(open, end + 2);
    strip_next = right_minus;
    trim_next_newline = kind != '{';  // trim_blocks: block and comment tags
    pos = end + 2;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Expression tokens and parser.

struct token {
  enum kind { name, str, integer, real, op, end } k;
  std::string s;
  std::int64_t i = 0;
  double d = 0;
};

std::vector<token> tokenize_expr(const std::string& s, int line) {
  std::vector<token> out;
  std::size_t n = 0;
  while (n < s.size()) {
    char c = s[n];
    if (is_space(c)) { ++n; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t e = n;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      out.push_back({token::name, s.substr(n, e - n)});
      n = e;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t e = n;
      bool is_real = false;
      while (e < s.size() && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      if (e + 1 < s.size() && s[e] == '.' && std::isdigit(static_cast<unsigned char>(s[e + 1]))) {
        is_real = true;
        ++e;
        while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
      }
      if (e < s.size() && (s[e] == 'e' || s[e] == 'E')) {
        is_real = true;
        ++e;
        if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
        while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
      }
      std::string num = s.substr(n, e - n);
      num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
      token t{is_real ? token::real : token::integer, num};
      if (is_real) t.d = std::strtod(num.c_str(), nullptr);
      else t.i = std::strtoll(num.c_str(), nullptr, 10);
      out.push_back(t);
      n = e;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      std::size_t e = n + 1;
      for (; e < s.size() && s[e] != c; ++e) {
        if (s[e] != '\\' || e + 1 >= s.size()) { v += s[e]; continue; }
        char x = s[++e];
        switch (x) {
          case 'n': v += '\n'; break;
          case 't': v += '\t'; break;
          case 'r': v += '\r'; break;
          case '\\': v += '\\'; break;
          case '\'': v += '\''; break;
          case '"': v += '"'; break;
          case '0': v += '\0'; break;
          case '\n': break;
          case 'x': case 'u': case 'U': {  // \xNN, \uNNNN, \UNNNNNNNN (Python literals)
            const std::size_t digits = x == 'x' ? 2 : x == 'u' ? 4 : 8;
            if (e + digits >= s.size()) fail(line, "truncated escape in string literal");
            const std::string hex = s.substr(e + 1, digits);
            if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
              fail(line, "bad escape in string literal");
            utf8proc_uint8_t buf[4];
            auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(std::stoul(hex, nullptr, 16)), buf);
            v.append(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
            e += digits;
            break;
          }
          default: v += '\\'; v += x;
        }
      }
      if (e >= s.size()) fail(line, "unterminated string literal");
      out.push_back({token::str, v});
      n = e + 1;
      continue;
    }
    static const char* ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                "<", ">", "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "="};
    bool matched = false;
    for (const char* o : ops) {
      std::size_t len = std::strlen(o);
      if (s.compare(n, len, o) == 0) {
        out.push_back({token::op, o});
        n += len;
        matched = true;
        break;
      }
    }
    if (!matched) fail(line, std::string("unexpected character '") + c + "'");
  }
  out.push_back({token::end, ""});
  return out;
}

const std::set<std::string>& known_filters() {
  static const std::set<std::string> f = {
      "trim", "length", "count", "tojson", "join", "reject", "select", "rejectattr", "selectattr",
      "default", "d", "upper", "lower", "items", "list", "first", "last", "replace", "string",
      "int", "float", "abs", "capitalize", "title", "safe", "escape", "e", "map", "unique",
      "reverse", "round", "sum", "max", "min", "wordcount", "dictsort"};
  return f;
}
const std::set<std::string>& known_tests() {
  static const std::set<std::string> t = {
      "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number",
      "integer", "float", "boolean", "true", "false", "equalto", "eq", "sameas", "ne", "odd", "even",
      "divisibleby", "in", "lower", "upper", "callable", "gt", "lt", "ge", "le"};
  return t;
}
const std::set<std::string>& known_methods() {
  static const std::set<std::string> m = {
      "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "replace", "upper",
      "lower", "title", "capitalize", "find", "count", "join", "splitlines", "items", "keys",
      "values", "get", "format"};
  return m;
}
const std::set<std::string>& known_functions() {
  static const std::set<std::string> f = {"raise_exception", "strftime_now", "namespace", "range", "dict"};
  return f;
}

class expr_parser {
 public:
  expr_parser(const std::string& s, int line) : t_(tokenize_expr(s, line)), line_(line) {}

  expr_ptr parse_all() {
    auto e = parse_expr();
    if (peek().k != token::end) fail(line_, "unexpected '" + peek().s + "' in expression");
    return e;
  }
  bool at_end() const { return t_[p_].k == token::end; }
  const token& peek(std::size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  bool is_op(const char* o, std::size_t ahead = 0) const {
    return peek(ahead).k == token::op && peek(ahead).s == o;
  }
  bool is_name(const char* n, std::size_t ahead = 0) const {
    return peek(ahead).k == token::name && peek(ahead).s == n;
  }
  void expect_op(const char* o) {
    if (!is_op(o)) fail(line_, std::string("expected '") + o + "', got '" + peek().s + "'");
    ++p_;
  }
  std::string expect_name() {
    if (peek().k != token::name) fail(line_, "expected a name, got '" + peek().s + "'");
    return t_[p_++].s;
  }

  expr_ptr parse_expr() {
    auto e = parse_or();
    if (is_name("if")) {
      ++p_;
      auto cond = parse_or();
      expr_ptr other;
      if (is_name("else")) {
        ++p_;
        other = parse_expr();
      } else {
        other = make(expr::literal);
      }
      auto t = make(expr::ternary);
      t->args.push_back(std::move(cond));
      t->args.push_back(std::move(e));
      t->args.push_back(std::move(other));
      return t;
    }
    return e;
  }

  /// An expression without a trailing ternary (for `for x in y if cond`): `or` over `and`.
  expr_ptr parse_or(bool and_level = false) {
    const char* word = and_level ? "and" : "or";
    auto next = [&] { return and_level ? parse_not() : parse_or(true); };
    auto e = next();
    while (is_name(word)) {
      ++p_;
      e = bin(and_level ? expr::logical_and : expr::logical_or, word, std::move(e), next());
    }
    return e;
  }

 private:
  expr_ptr make(expr::kind k) {
    auto e = std::make_unique<expr>();
    e->k = k;
    e->line = line_;
    return e;
  }
  expr_ptr bin(expr::kind k, std::string op, expr_ptr a, expr_ptr b) {
    auto e = make(k);
    e->id = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  expr_ptr parse_not() {
    if (is_name("not")) {
      ++p_;
      auto e = make(expr::unary_not);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  expr_ptr parse_compare() {
    auto e = parse_math1();
    for (;;) {
      if (peek().k == token::op &&
          (peek().s == "==" || peek().s == "!=" || peek().s == "<" || peek().s == "<=" ||
           peek().s == ">" || peek().s == ">=")) {
        std::string op = t_[p_++].s;
        e = bin(expr::binary, op, std::move(e), parse_math1());
      } else if (is_name("in")) {
        ++p_;
        e = bin(expr::compare_in, "in", std::move(e), parse_math1());
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        e = bin(expr::compare_not_in, "not in", std::move(e), parse_math1());
      } else {
        return e;
      }
    }
  }
  /// Binary operators from the loosest level (+ -) to the tightest (**), as Jinja's
  /// parse_math1 → parse_concat → parse_math2 → parse_pow; all left-associative.
  expr_ptr parse_math1(std::size_t level = 0) {
    static const std::vector<std::vector<std::string>> levels = {
        {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
    if (level == levels.size()) return parse_unary();
    auto e = parse_math1(level + 1);
    for (;;) {
      const auto& ops = levels[level];
      if (peek().k != token::op || std::find(ops.begin(), ops.end(), peek().s) == ops.end()) return e;
      std::string op = t_[p_++].s;
      e = bin(expr::binary, op, std::move(e), parse_math1(level + 1));
    }
  }
  expr_ptr parse_unary() {
    if (is_op("-") || is_op("+")) {
      bool neg = is_op("-");
      ++p_;
      auto inner = parse_unary_nofilter();
      if (!neg) return parse_filters(std::move(inner));
      auto e = make(expr::unary_neg);
      e->args.push_back(std::move(inner));
      return parse_filters(std::move(e));
    }
    return parse_filters(parse_primary_postfix());
  }
  expr_ptr parse_unary_nofilter() {
    if (is_op("-")) {
      ++p_;
      auto e = make(expr::unary_neg);
      e->args.push_back(parse_unary_nofilter());
      return e;
    }
    return parse_primary_postfix();
  }
  /// Filters and tests bind tighter than every operator (Jinja's parse_filter_expr).
  expr_ptr parse_filters(expr_ptr e) {
    for (;;) {
      if (is_name("is")) {
        ++p_;
        auto t = make(expr::test);
        if (is_name("not")) {
          ++p_;
          t->negated = true;
        }
        t->id = expect_name();
        if (!known_tests().count(t->id)) fail(line_, "unsupported test '" + t->id + "'");
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(*t);
        } else if (peek().k == token::str || peek().k == token::integer || peek().k == token::real ||
                   is_op("[") || is_op("{") ||
                   (peek().k == token::name && !is_name("and") && !is_name("or") && !is_name("else"))) {
          t->args.push_back(parse_primary_postfix());
        }
        e = std::move(t);
        continue;
      }
      if (!is_op("|")) return e;
      ++p_;
      auto f = make(expr::filter);
      f->id = expect_name();
      if (!known_filters().count(f->id)) fail(line_, "unsupported filter '" + f->id + "'");
      f->args.push_back(std::move(e));
      if (is_op("(")) parse_call_args(*f);
      e = std::move(f);
    }
    return e;
  }
  void parse_call_args(expr& into) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().k == token::name && is_op("=", 1)) {
        std::string k = t_[p_].s;
        p_ += 2;
        into.kwargs.emplace_back(k, parse_expr());
      } else {
        into.args.push_back(parse_expr());
      }
      if (!is_op(")")) expect_op(",");
    }
    expect_op(")");
  }
  expr_ptr parse_primary_postfix() {
    auto e = parse_primary();
    for (;;) {
      if (is_op(".")) {
        ++p_;
        auto a = make(expr::attr);
        a->id = expect_name();
        a->args.push_back(std::move(e));
        if (is_op("(")) {
          if (!known_methods().count(a->id)) fail(line_, "unsupported method '" + a->id + "'");
          auto c = make(expr::call);
          c->id = a->id;
          c->args.push_back(std::move(a->args[0]));
          parse_call_args(*c);
          e = std::move(c);
        } else {
          e = std::move(a);
        }
      } else if (is_op("[")) {
        ++p_;
        expr_ptr parts[3];
        bool is_slice = false;
        for (int n = 0; n < 3; ++n) {
          if (!is_op(":") && !is_op("]")) parts[n] = parse_expr();
          if (is_op(":") && n < 2) {
            ++p_;
            is_slice = true;
          } else {
            break;
          }
        }
        expect_op("]");
        if (is_slice) {
          auto s = make(expr::slice);
          s->args.push_back(std::move(e));
          for (auto& x : parts) s->args.push_back(x ? std::move(x) : make(expr::literal));
          e = std::move(s);
        } else {
          if (!parts[0]) fail(line_, "empty subscript");
          auto s = make(expr::subscript);
          s->args.push_back(std::move(e));
          s->args.push_back(std::move(parts[0]));
          e = std::move(s);
        }
      } else if (is_op("(")) {
        if (e->k != expr::name || !known_functions().count(e->id))
          fail(line_, "unsupported function call" + (e->k == expr::name ? " '" + e->id + "'" : std::string()));
        auto c = make(expr::call);
        c->id = e->id;
        parse_call_args(*c);
        c->lit = value::of_fn(e->id);  // marks a global call (no receiver)
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  expr_ptr parse_primary() {
    const token& t = peek();
    if (t.k == token::str) {
      std::string s = t_[p_++].s;
      while (peek().k == token::str) s += t_[p_++].s;  // adjacent literals concatenate
      auto e = make(expr::literal);
      e->lit = value::of_str(s);
      return e;
    }
    if (t.k == token::integer) {
      auto e = make(expr::literal);
      e->lit = value::of_int(t_[p_++].i);
      return e;
    }
    if (t.k == token::real) {
      auto e = make(expr::literal);
      e->lit = value::of_real(t_[p_++].d);
      return e;
    }
    if (t.k == token::name) {
      std::string n = t_[p_++].s;
      auto e = make(expr::literal);
      if (n == "true" || n == "True") e->lit = value::of_bool(true);
      else if (n == "false" || n == "False") e->lit = value::of_bool(false);
      else if (n == "none" || n == "None") e->lit = value::of_none();
      else {
        e->k = expr::name;
        e->id = n;
      }
      return e;
    }
    if (is_op("(")) {
      ++p_;
      auto e = parse_expr();
      if (is_op(",")) {  // a tuple: treated as a list
        auto l = make(expr::list_lit);
        l->args.push_back(std::move(e));
        while (is_op(",")) {
          ++p_;
          if (is_op(")")) break;
          l->args.push_back(parse_expr());
        }
        e = std::move(l);
      }
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      ++p_;
      auto l = make(expr::list_lit);
      while (!is_op("]")) {
        l->args.push_back(parse_expr());
        if (!is_op("]")) expect_op(",");
      }
      expect_op("]");
      return l;
    }
    if (is_op("{")) {
      ++p_;
      auto d = make(expr::dict_lit);
      while (!is_op("}")) {
        d->args.push_back(parse_expr());
        expect_op(":");
        d->args.push_back(parse_expr());
        if (!is_op("}")) expect_op(",");
      }
      expect_op("}");
      return d;
    }
    fail(line_, "unexpected '" + t.s + "' in expression");
  }

  std::vector<token> t_;
  std::size_t p_ = 0;
  int line_;

  friend class statement_parser;
};

// ---------------------------------------------------------------------------------------
// Statement parser over the lexed tags.

class statement_parser {
 public:
  explicit statement_parser(std::vector<tag> tags) : tags_(std::move(tags)) {}

  body parse_template() {
    body b = parse_body({});
    if (pos_ < tags_.size()) fail(tags_[pos_].line, "unexpected '" + first_word(tags_[pos_]) + "'");
    return b;
  }

 private:
  static std::string first_word(const tag& t) {
    std::size_t a = 0;
    while (a < t.content.size() && is_space(t.content[a])) ++a;
    std::size_t b = a;
    while (b < t.content.size() && (std::isalnum(static_cast<unsigned char>(t.content[b])) || t.content[b] == '_')) ++b;
    return t.content.substr(a, b - a);
  }
  static std::string rest_after_word(const tag& t) {
    std::string w = first_word(t);
    auto p = t.content.find(w);
    return t.content.substr(p + w.size());
  }

  /// Parses nodes until a block tag whose first word is in `stops` (left unconsumed).
  body parse_body(const std::set<std::string>& stops) {
    body out;
    while (pos_ < tags_.size()) {
      const tag& t = tags_[pos_];
      if (t.k == tag::text) {
        auto n = std::make_unique<node>();
        n->k = node::text;
        n->text_value = t.content;
        out.push_back(std::move(n));
        ++pos_;
        continue;
      }
      if (t.k == tag::var) {
        auto n = std::make_unique<node>();
        n->k = node::output;
        n->line = t.line;
        n->e = expr_parser(t.content, t.line).parse_all();
        out.push_back(std::move(n));
        ++pos_;
        continue;
      }
      std::string w = first_word(t);
      if (stops.count(w)) return out;
      out.push_back(parse_statement(w, t));
    }
    if (!stops.empty()) fail(tags_.empty() ? 0 : tags_.back().line, "missing end tag (one of: " + join(stops) + ")");
    return out;
  }

  static std::string join(const std::set<std::string>& s) {
    std::string out;
    for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
    return out;
  }

  std::unique_ptr<node> parse_statement(const std::string& w, const tag& t) {
    auto n = std::make_unique<node>();
    n->line = t.line;
    const int line = t.line;
    if (w == "if") {
      n->k = node::if_;
      n->branches.emplace_back(expr_parser(rest_after_word(t), line).parse_all(), body{});
      ++pos_;
      for (;;) {
        n->branches.back().second = parse_body({"elif", "else", "endif"});
        const tag& s = tags_[pos_];
        std::string sw = first_word(s);
        ++pos_;
        if (sw == "elif") {
          n->branches.emplace_back(expr_parser(rest_after_word(s), s.line).parse_all(), body{});
        } else if (sw == "else") {
          n->branches.emplace_back(nullptr, body{});
        } else {
          break;
        }
      }
      return n;
    }
    if (w == "for") {
      n->k = node::for_;
      expr_parser p(rest_after_word(t), line);
      n->targets.push_back(p.expect_name());
      while (p.is_op(",")) {
        ++p.p_;
        n->targets.push_back(p.expect_name());
      }
      if (!p.is_name("in")) fail(line, "expected 'in' in for");
      ++p.p_;
      n->e = p.parse_or();
      if (p.is_name("if")) {
        ++p.p_;
        n->loop_filter = p.parse_or();
      }
      if (p.is_name("recursive")) fail(line, "unsupported: recursive for");
      if (!p.at_end()) fail(line, "unexpected '" + p.peek().s + "' in for");
      ++pos_;
      n->inner = parse_body({"else", "endfor"});
      if (first_word(tags_[pos_]) == "else") {
        ++pos_;
        n->else_body = parse_body({"endfor"});
      }
      ++pos_;
      return n;
    }
    if (w == "set") {
      expr_parser p(rest_after_word(t), line);
      n->targets.push_back(p.expect_name());
      if (p.is_op(".")) {
        ++p.p_;
        n->ns_attr = p.expect_name();
      } else {
        while (p.is_op(",")) {
          ++p.p_;
          n->targets.push_back(p.expect_name());
        }
      }
      ++pos_;
      if (p.at_end()) {  // block set
        if (!n->ns_attr.empty() || n->targets.size() != 1) fail(line, "unsupported block set target");
        n->k = node::set_block;
        n->inner = parse_body({"endset"});
        ++pos_;
        return n;
      }
      n->k = node::set;
      p.expect_op("=");
      n->e = p.parse_all();
      return n;
    }
    if (w == "break" || w == "continue") {
      n->k = w == "break" ? node::break_ : node::continue_;
      ++pos_;
      return n;
    }
    fail(line, "unsupported tag '" + w + "'");
  }

  std::vector<tag> tags_;
  std::size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------
// Evaluation.

enum class flow { normal, break_, continue_ };

class renderer {
 public:
  renderer(const local_clock& clock) : clock_(clock) { scopes_.emplace_back(); }

  void set_global(const std::string& k, value v) { scopes_.front()[k] = std::move(v); }

  flow run(const body& b, std::string& out) {
    for (const auto& n : b) {
      switch (n->k) {
        case node::text: out += n->text_value; break;
        case node::output: out += to_str(eval(*n->e)); break;
        case node::if_:
          for (const auto& [cond, inner] : n->branches)
            if (!cond || truthy(eval(*cond))) {
              auto f = run(inner, out);
              if (f != flow::normal) return f;
              break;
            }
          break;
        case node::for_: {
          auto f = run_for(*n, out);
          (void)f;
          break;
        }
        case node::set: {
          value v = eval(*n->e);
          assign(*n, std::move(v));
          break;
        }
        case node::set_block: {
          std::string captured;
          run(n->inner, captured);
          scopes_.back()[n->targets[0]] = value::of_str(captured);
          break;
        }
        case node::break_: return flow::break_;
        case node::continue_: return flow::continue_;
      }
    }
    return flow::normal;
  }

 private:
  void assign(const node& n, value v) {
    if (!n.ns_attr.empty()) {
      value* ns = lookup(n.targets[0]);
      if (!ns || ns->k != value::ns) throw render_error("cannot assign attribute on a non-namespace object");
      for (auto& [k, x] : *ns->m)
        if (k == n.ns_attr) {
          x = std::move(v);
          return;
        }
      ns->m->emplace_back(n.ns_attr, std::move(v));
      return;
    }
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = std::move(v);
      return;
    }
    auto items = iterate(v);
    if (items.size() != n.targets.size()) throw render_error("cannot unpack: wrong number of values");
    for (std::size_t k = 0; k < items.size(); ++k) scopes_.back()[n.targets[k]] = items[k];
  }

  flow run_for(const node& n, std::string& out) {
    value seq = eval(*n.e);
    list_t items;
    if (seq.k == value::dict) {
      for (const auto& [k, x] : *seq.m) items.push_back(value::of_str(k));
    } else {
      items = iterate(seq);
    }
    if (n.loop_filter) {
      list_t kept;
      for (auto& it : items) {
        scopes_.emplace_back();
        bind_targets(n, it);
        if (truthy(eval(*n.loop_filter))) kept.push_back(it);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      run(n.else_body, out);
      return flow::normal;
    }
    const auto len = static_cast<std::int64_t>(items.size());
    for (std::int64_t k = 0; k < len; ++k) {
      scopes_.emplace_back();
      dict_t loop = {
          {"index", value::of_int(k + 1)}, {"index0", value::of_int(k)},
          {"revindex", value::of_int(len - k)}, {"revindex0", value::of_int(len - k - 1)},
          {"first", value::of_bool(k == 0)}, {"last", value::of_bool(k == len - 1)},
          {"length", value::of_int(len)},
          {"previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : value{}},
          {"nextitem", k + 1 < len ? items[static_cast<std::size_t>(k + 1)] : value{}}};
      scopes_.back()["loop"] = value::of_dict(std::move(loop));
      bind_targets(n, items[static_cast<std::size_t>(k)]);
      auto f = run(n.inner, out);
      scopes_.pop_back();
      if (f == flow::break_) break;
    }
    return flow::normal;
  }

  void bind_targets(const node& n, const value& item) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = item;
      return;
    }
    auto parts = iterate(item);
    if (parts.size() != n.targets.size()) throw render_error("cannot unpack loop item");
    for (std::size_t k = 0; k < parts.size(); ++k) scopes_.back()[n.targets[k]] = parts[k];
  }

  value* lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  value eval(const expr& e) {
    switch (e.k) {
      case expr::literal: return e.lit;
      case expr::name: {
        if (value* v = lookup(e.id)) return *v;
        if (known_functions().count(e.id)) return value::of_fn(e.id);
        return value{};
      }
      case expr::list_lit: {
        list_t l;
        for (const auto& a : e.args) l.push_back(eval(*a));
        return value::of_list(std::move(l));
      }
      case expr::dict_lit: {
        dict_t d;
        for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
          value key = eval(*e.args[k]);
          value v = eval(*e.args[k + 1]);
          std::string ks = to_str(key);
          bool replaced = false;
          for (auto& [kk, x] : d)
            if (kk == ks) { x = v; replaced = true; }
          if (!replaced) d.emplace_back(ks, std::move(v));
        }
        return value::of_dict(std::move(d));
      }
      case expr::attr: {
        value obj = eval(*e.args[0]);
        if (const value* v = obj.get(e.id)) return *v;
        return value{};
      }
      case expr::subscript: return subscript(eval(*e.args[0]), eval(*e.args[1]));
      case expr::slice: {
        value obj = eval(*e.args[0]);
        value a = eval(*e.args[1]), b = eval(*e.args[2]), c = eval(*e.args[3]);
        if (obj.k == value::string) {
          auto chars = iterate(obj);
          std::string out;
          for (auto x : slice_indices(static_cast<std::int64_t>(chars.size()), a, b, c))
            out += *chars[static_cast<std::size_t>(x)].s;
          return value::of_str(out);
        }
        if (obj.k == value::list) {
          list_t out;
          for (auto x : slice_indices(static_cast<std::int64_t>(obj.l->size()), a, b, c))
            out.push_back((*obj.l)[static_cast<std::size_t>(x)]);
          return value::of_list(std::move(out));
        }
        throw render_error("object is not sliceable");
      }
      case expr::call: return call(e);
      case expr::filter: return filter(e);
      case expr::test: {
        bool r = test(e);
        return value::of_bool(e.negated ? !r : r);
      }
      case expr::unary_not: return value::of_bool(!truthy(eval(*e.args[0])));
      case expr::unary_neg: {
        value v = eval(*e.args[0]);
        if (v.k == value::integer) return value::of_int(-v.i);
        if (v.is_num()) return value::of_real(-v.num());
        throw render_error("bad operand type for unary -");
      }
      case expr::logical_and: {
        value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case expr::logical_or: {
        value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case expr::compare_in: return value::of_bool(contains(eval(*e.args[1]), eval(*e.args[0])));
      case expr::compare_not_in: return value::of_bool(!contains(eval(*e.args[1]), eval(*e.args[0])));
      case expr::ternary: return truthy(eval(*e.args[0])) ? eval(*e.args[1]) : eval(*e.args[2]);
      case expr::binary: return binary(e.id, eval(*e.args[0]), eval(*e.args[1]));
    }
    return value{};
  }

  static value subscript(const value& obj, const value& key) {
    if (obj.k == value::list || obj.k == value::string) {
      if (key.k != value::integer) throw render_error("indices must be integers");
      if (obj.k == value::string) {
        auto chars = iterate(obj);
        auto n = static_cast<std::int64_t>(chars.size());
        auto i = key.i < 0 ? key.i + n : key.i;
        if (i < 0 || i >= n) throw render_error("string index out of range");
        return chars[static_cast<std::size_t>(i)];
      }
      auto n = static_cast<std::int64_t>(obj.l->size());
      auto i = key.i < 0 ? key.i + n : key.i;
      if (i < 0 || i >= n) return value{};  // Jinja: undefined
      return (*obj.l)[static_cast<std::size_t>(i)];
    }
    if (obj.k == value::dict || obj.k == value::ns) {
      if (const value* v = obj.get(to_str(key))) return *v;
      return value{};
    }
    return value{};
  }

  static bool contains(const value& hay, const value& needle) {
    if (hay.k == value::string) {
      if (needle.k != value::string) throw render_error("'in <string>' requires string as left operand");
      return hay.s->find(*needle.s) != std::string::npos;
    }
    if (hay.k == value::list) {
      for (const auto& x : *hay.l)
        if (equal(x, needle)) return true;
      return false;
    }
    if (hay.k == value::dict) return hay.get(to_str(needle)) != nullptr;
    if (hay.k == value::undef) return false;
    throw render_error("argument of this type is not iterable");
  }

  static value percent_format(const std::string& fmt, const value& args) {
    list_t a = args.k == value::list ? *args.l : list_t{args};
    std::string out;
    std::size_t ai = 0;
    for (std::size_t n = 0; n < fmt.size(); ++n) {
      if (fmt[n] != '%' || n + 1 >= fmt.size()) { out += fmt[n]; continue; }
      char c = fmt[++n];
      if (c == '%') { out += '%'; continue; }
      if (ai >= a.size()) throw render_error("not enough arguments for format string");
      const value& v = a[ai++];
      if (c == 's') out += to_str(v);
      else if (c == 'd' || c == 'i') out += std::to_string(static_cast<std::int64_t>(v.num()));
      else if (c == 'r') out += py_repr(v);
      else throw render_error(std::string("unsupported format character '") + c + "'");
    }
    return value::of_str(out);
  }

  static value binary(const std::string& op, const value& a, const value& b) {
    if (op == "==") return value::of_bool(equal(a, b));
    if (op == "!=") return value::of_bool(!equal(a, b));
    if (op == "~") return value::of_str(to_str(a) + to_str(b));
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int c;
      if (a.is_num() && b.is_num()) c = a.num() < b.num() ? -1 : a.num() > b.num() ? 1 : 0;
      else if (a.k == value::string && b.k == value::string) c = a.s->compare(*b.s);
      else throw render_error("'" + op + "' not supported between these types");
      if (op == "<") return value::of_bool(c < 0);
      if (op == "<=") return value::of_bool(c <= 0);
      if (op == ">") return value::of_bool(c > 0);
      return value::of_bool(c >= 0);
    }
    if (op == "+") {
      if (a.k == value::string && b.k == value::string) return value::of_str(*a.s + *b.s);
      if (a.k == value::list && b.k == value::list) {
        list_t l = *a.l;
        l.insert(l.end(), b.l->begin(), b.l->end());
        return value::of_list(std::move(l));
      }
    }
    if (op == "%" && a.k == value::string) return percent_format(*a.s, b);
    if (op == "*" && a.k == value::string && b.k == value::integer) {
      std::string s;
      for (std::int64_t n = 0; n < b.i; ++n) s += *a.s;
      return value::of_str(s);
    }
    if (!a.is_num() || !b.is_num())
      throw render_error("unsupported operand types for " + op);
    const bool ints = a.k != value::real && b.k != value::real;
    const std::int64_t ai = a.k == value::boolean ? a.b : a.i, bi = b.k == value::boolean ? b.b : b.i;
    if (op == "/") {
      if (b.num() == 0) throw render_error("division by zero");
      return value::of_real(a.num() / b.num());
    }
    if (ints) {
      if (op == "+") return value::of_int(ai + bi);
      if (op == "-") return value::of_int(ai - bi);
      if (op == "*") return value::of_int(ai * bi);
      if (op == "**") {
        if (bi < 0) return value::of_real(std::pow(a.num(), b.num()));
        std::int64_t r = 1;
        for (std::int64_t n = 0; n < bi; ++n) r *= ai;
        return value::of_int(r);
      }
      if (bi == 0) throw render_error("integer division or modulo by zero");
      std::int64_t q = ai / bi, r = ai % bi;
      if (r != 0 && ((r < 0) != (bi < 0))) { --q; r += bi; }
      return value::of_int(op == "//" ? q : r);
    }
    double x = a.num(), y = b.num();
    if (op == "+") return value::of_real(x + y);
    if (op == "-") return value::of_real(x - y);
    if (op == "*") return value::of_real(x * y);
    if (op == "**") return value::of_real(std::pow(x, y));
    if (y == 0) throw render_error("float division or modulo by zero");
    if (op == "//") return value::of_real(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return value::of_real(m);
  }

  list_t eval_args(const expr& e, std::size_t skip) {
    list_t out;
    for (std::size_t k = skip; k < e.args.size(); ++k) out.push_back(eval(*e.args[k]));
    return out;
  }
  value kwarg(const expr& e, const char* name) {
    for (const auto& [k, x] : e.kwargs)
      if (k == name) return eval(*x);
    return value{};
  }

  value call(const expr& e) {
    if (e.lit.k == value::func) return call_global(e);
    value self = eval(*e.args[0]);
    list_t a = eval_args(e, 1);
    auto arg = [&](std::size_t n) -> const value* { return n < a.size() ? &a[n] : nullptr; };
    auto str_arg = [&](std::size_t n) -> const std::string* {
      const value* v = arg(n);
      if (!v || v->k == value::none) return nullptr;
      if (v->k != value::string) throw render_error(e.id + "() argument must be a string");
      return v->s.get();
    };
    const std::string& m = e.id;
    if (self.k == value::string) {
      const std::string& s = *self.s;
      if (m == "startswith" || m == "endswith") {
        const value* p = arg(0);
        list_t opts = p && p->k == value::list ? *p->l : list_t{p ? *p : value{}};
        for (const auto& o : opts) {
          if (o.k != value::string) throw render_error(m + "() argument must be a string");
          const std::string& x = *o.s;
          bool hit = m == "startswith" ? s.compare(0, x.size(), x) == 0
                                       : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
          if (hit) return value::of_bool(true);
        }
        return value::of_bool(false);
      }
      if (m == "split") return value::of_list(split(s, arg(0), arg(1) ? arg(1)->i : -1));
      if (m == "rsplit" && !arg(1)) return value::of_list(split(s, arg(0), -1));
      if (m == "strip") return value::of_str(strip(s, str_arg(0), true, true));
      if (m == "lstrip") return value::of_str(strip(s, str_arg(0), true, false));
      if (m == "rstrip") return value::of_str(strip(s, str_arg(0), false, true));
      if (m == "replace") {
        const std::string* from = str_arg(0);
        const std::string* to = str_arg(1);
        if (!from || !to) throw render_error("replace() takes two strings");
        return value::of_str(replace_all(s, *from, *to, arg(2) ? arg(2)->i : -1));
      }
      if (m == "upper") return value::of_str(upper(s));
      if (m == "lower") return value::of_str(lower(s));
      if (m == "title") return value::of_str(title(s));
      if (m == "capitalize") return value::of_str(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
      if (m == "find") {
        const std::string* x = str_arg(0);
        if (!x) throw render_error("find() takes a string");
        auto p = s.find(*x);
        return value::of_int(p == std::string::npos ? -1 : static_cast<std::int64_t>(p));
      }
      if (m == "count") {
        const std::string* x = str_arg(0);
        if (!x || x->empty()) throw render_error("count() takes a non-empty string");
        std::int64_t c = 0;
        for (auto p = s.find(*x); p != std::string::npos; p = s.find(*x, p + x->size())) ++c;
        return value::of_int(c);
      }
      if (m == "join") {
        std::string out;
        bool first = true;
        for (const auto& x : iterate(arg(0) ? *arg(0) : value{})) {
          out += (first ? "" : s) + to_str(x);
          first = false;
        }
        return value::of_str(out);
      }
      if (m == "splitlines") {
        list_t out;
        std::size_t start = 0;
        for (std::size_t n = 0; n < s.size(); ++n)
          if (s[n] == '\n' || s[n] == '\r') {
            out.push_back(value::of_str(s.substr(start, n - start)));
            if (s[n] == '\r' && n + 1 < s.size() && s[n + 1] == '\n') ++n;
            start = n + 1;
          }
        if (start < s.size()) out.push_back(value::of_str(s.substr(start)));
        return value::of_list(std::move(out));
      }
    }
    if (self.k == value::dict) {
      if (m == "items") {
        list_t out;
        for (const auto& [k, x] : *self.m) out.push_back(value::of_list({value::of_str(k), x}));
        return value::of_list(std::move(out));
      }
      if (m == "keys") return value::of_list(iterate(self));
      if (m == "values") {
        list_t out;
        for (const auto& [k, x] : *self.m) out.push_back(x);
        return value::of_list(std::move(out));
      }
      if (m == "get") {
        if (const value* v = self.get(arg(0) ? to_str(*arg(0)) : "")) return *v;
        return arg(1) ? *arg(1) : value::of_none();
      }
    }
    throw render_error("object has no method '" + m + "'");
  }

  value call_global(const expr& e) {
    list_t a = eval_args(e, 0);
    if (e.id == "raise_exception")
      throw render_error("raise_exception: " + (a.empty() ? std::string() : to_str(a[0])));
    if (e.id == "strftime_now") {
      if (a.empty() || a[0].k != value::string) throw render_error("strftime_now() takes a format string");
      std::tm tm = clock_();
      char buf[256];
      std::size_t n = std::strftime(buf, sizeof buf, a[0].s->c_str(), &tm);
      return value::of_str(std::string(buf, n));
    }
    if (e.id == "namespace" || e.id == "dict") {
      dict_t d;
      if (!a.empty() && a[0].k == value::dict) d = *a[0].m;
      for (const auto& [k, x] : e.kwargs) d.emplace_back(k, eval(*x));
      value v = value::of_dict(std::move(d));
      if (e.id == "namespace") v.k = value::ns;
      return v;
    }
    if (e.id == "range") {
      std::int64_t start = 0, stop = 0, step = 1;
      if (a.size() == 1) stop = a[0].i;
      else if (a.size() >= 2) { start = a[0].i; stop = a[1].i; if (a.size() > 2) step = a[2].i; }
      if (step == 0) throw render_error("range() step must not be zero");
      list_t out;
      for (auto x = start; step > 0 ? x < stop : x > stop; x += step) {
        out.push_back(value::of_int(x));
        if (out.size() > 100000) throw render_error("range() too large");
      }
      return value::of_list(std::move(out));
    }
    throw render_error("unknown function " + e.id);
  }

  bool test(const expr& e) {
    value v = eval(*e.args[0]);
    list_t a = eval_args(e, 1);
    const std::string& t = e.id;
    if (t == "defined") return v.k != value::undef;
    if (t == "undefined") return v.k == value::undef;
    if (t == "none") return v.k == value::none;
    if (t == "string") return v.k == value::string;
    if (t == "mapping") return v.k == value::dict;
    if (t == "iterable") return v.k == value::string || v.k == value::list || v.k == value::dict;
    if (t == "sequence") return v.k == value::string || v.k == value::list || v.k == value::dict;
    if (t == "number") return v.is_num();
    if (t == "integer") return v.k == value::integer;
    if (t == "float") return v.k == value::real;
    if (t == "boolean") return v.k == value::boolean;
    if (t == "true") return v.k == value::boolean && v.b;
    if (t == "false") return v.k == value::boolean && !v.b;
    if (t == "callable") return v.k == value::func;
    if (t == "lower") return v.k == value::string && lower(*v.s) == *v.s;
    if (t == "upper") return v.k == value::string && upper(*v.s) == *v.s;
    if (t == "odd" || t == "even") {
      if (v.k != value::integer) throw render_error("odd/even needs an integer");
      return ((v.i % 2) != 0) == (t == "odd");
    }
    if (a.empty()) throw render_error("test '" + t + "' needs an argument");
    if (t == "equalto" || t == "eq") return equal(v, a[0]);
    if (t == "ne") return !equal(v, a[0]);
    if (t == "sameas") return v.k == a[0].k && equal(v, a[0]);
    if (t == "in") return contains(a[0], v);
    if (t == "divisibleby") return a[0].i != 0 && v.k == value::integer && v.i % a[0].i == 0;
    if (t == "gt") return truthy(binary(">", v, a[0]));
    if (t == "lt") return truthy(binary("<", v, a[0]));
    if (t == "ge") return truthy(binary(">=", v, a[0]));
    if (t == "le") return truthy(binary("<=", v, a[0]));
    throw render_error("unknown test " + t);
  }

  /// Applies the test named by a select/reject filter's arguments to `item`.
  bool apply_named_test(const std::string& name, const value& item, const list_t& extra) {
    expr fake;
    fake.k = expr::test;
    fake.id = name;
    auto lit = std::make_unique<expr>();
    lit->k = expr::literal;
    lit->lit = item;
    fake.args.push_back(std::move(lit));
    for (const auto& x : extra) {
      auto l = std::make_unique<expr>();
      l->k = expr::literal;
      l->lit = x;
      fake.args.push_back(std::move(l));
    }
    return test(fake);
  }

  value filter(const expr& e) {
    value v = eval(*e.args[0]);
    list_t a = eval_args(e, 1);
    const std::string& f = e.id;
    auto need_str = [&]() -> const std::string& {
      if (v.k != value::string) throw render_error("filter '" + f + "' needs a string");
      return *v.s;
    };
    if (f == "trim") return value::of_str(strip(to_str(v), a.empty() ? nullptr : a[0].s.get(), true, true));
    if (f == "length" || f == "count") return value::of_int(length_of(v));
    if (f == "tojson") {
      value ind = a.empty() ? kwarg(e, "indent") : a[0];
      value sk = kwarg(e, "sort_keys");
      std::string out;
      to_json(v, ind.k == value::integer ? static_cast<int>(ind.i) : -1, truthy(sk), 0, out);
      return value::of_str(out);
    }
    if (f == "join") {
      std::string sep = a.empty() ? (kwarg(e, "d").k == value::string ? to_str(kwarg(e, "d")) : "") : to_str(a[0]);
      value attr = a.size() > 1 ? a[1] : kwarg(e, "attribute");
      std::string out;
      bool first = true;
      for (const auto& x : iterate(v)) {
        value item = x;
        if (attr.k == value::string) {
          const value* g = x.get(*attr.s);
          item = g ? *g : value{};
        }
        out += (first ? "" : sep) + to_str(item);
        first = false;
      }
      return value::of_str(out);
    }
    if (f == "reject" || f == "select") {
      list_t out;
      for (const auto& x : iterate(v)) {
        bool r = a.empty() ? truthy(x) : apply_named_test(to_str(a[0]), x, list_t(a.begin() + 1, a.end()));
        if (r == (f == "select")) out.push_back(x);
      }
      return value::of_list(std::move(out));
    }
    if (f == "rejectattr" || f == "selectattr") {
      if (a.empty()) throw render_error(f + " needs an attribute name");
      list_t out;
      for (const auto& x : iterate(v)) {
        const value* g = x.get(to_str(a[0]));
        value item = g ? *g : value{};
        bool r = a.size() < 2 ? truthy(item) : apply_named_test(to_str(a[1]), item, list_t(a.begin() + 2, a.end()));
        if (r == (f == "selectattr")) out.push_back(x);
      }
      return value::of_list(std::move(out));
    }
    if (f == "map") {
      value attr = kwarg(e, "attribute");
      list_t out;
      for (const auto& x : iterate(v)) {
        if (attr.k == value::string) {
          const value* g = x.get(*attr.s);
          out.push_back(g ? *g : kwarg(e, "default"));
        } else if (!a.empty() && a[0].k == value::string) {
          if (*a[0].s == "upper") out.push_back(value::of_str(upper(to_str(x))));
          else if (*a[0].s == "lower") out.push_back(value::of_str(lower(to_str(x))));
          else if (*a[0].s == "string") out.push_back(value::of_str(to_str(x)));
          else if (*a[0].s == "trim") out.push_back(value::of_str(strip(to_str(x), nullptr, true, true)));
          else throw render_error("map('" + *a[0].s + "') is not supported");
        } else {
          throw render_error("map needs attribute= or a filter name");
        }
      }
      return value::of_list(std::move(out));
    }
    if (f == "default" || f == "d") {
      bool boolean = a.size() > 1 ? truthy(a[1]) : truthy(kwarg(e, "boolean"));
      if (v.k == value::undef || (boolean && !truthy(v))) return a.empty() ? value::of_str("") : a[0];
      return v;
    }
    if (f == "upper") return value::of_str(upper(to_str(v)));
    if (f == "lower") return value::of_str(lower(to_str(v)));
    if (f == "title") return value::of_str(title(to_str(v)));
    if (f == "capitalize") {
      std::string s = to_str(v);
      return value::of_str(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
    }
    if (f == "items") {
      if (v.k != value::dict) throw render_error("items needs a mapping");
      list_t out;
      for (const auto& [k, x] : *v.m) out.push_back(value::of_list({value::of_str(k), x}));
      return value::of_list(std::move(out));
    }
    if (f == "dictsort") {
      if (v.k != value::dict) throw render_error("dictsort needs a mapping");
      list_t out;
      dict_t d = *v.m;
      std::stable_sort(d.begin(), d.end(), [](const auto& x, const auto& y) { return lower(x.first) < lower(y.first); });
      for (const auto& [k, x] : d) out.push_back(value::of_list({value::of_str(k), x}));
      return value::of_list(std::move(out));
    }
    if (f == "list") return value::of_list(iterate(v));
    if (f == "first" || f == "last") {
      auto items = iterate(v);
      if (items.empty()) return value{};
      return f == "first" ? items.front() : items.back();
    }
    if (f == "reverse") {
      auto items = iterate(v);
      std::reverse(items.begin(), items.end());
      if (v.k == value::string) {
        std::string s;
        for (const auto& x : items) s += *x.s;
        return value::of_str(s);
      }
      return value::of_list(std::move(items));
    }
    if (f == "unique") {
      list_t out;
      for (const auto& x : iterate(v))
        if (std::none_of(out.begin(), out.end(), [&](const value& y) { return equal(x, y); })) out.push_back(x);
      return value::of_list(std::move(out));
    }
    if (f == "replace") {
      if (a.size() < 2) throw render_error("replace needs two arguments");
      return value::of_str(replace_all(to_str(v), to_str(a[0]), to_str(a[1]), a.size() > 2 ? a[2].i : -1));
    }
    if (f == "string") return value::of_str(to_str(v));
    if (f == "safe") return v;
    if (f == "escape" || f == "e") {
      std::string out;
      for (char c : to_str(v)) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out += c;
        }
      }
      return value::of_str(out);
    }
    if (f == "int") {
      if (v.k == value::string) {
        char* end = nullptr;
        auto x = std::strtoll(strip(*v.s, nullptr, true, true).c_str(), &end, 10);
        return value::of_int(end && *end == '\0' ? x : (a.empty() ? 0 : a[0].i));
      }
      return value::of_int(v.is_num() ? static_cast<std::int64_t>(v.num()) : 0);
    }
    if (f == "float") {
      if (v.k == value::string) return value::of_real(std::strtod(v.s->c_str(), nullptr));
      return value::of_real(v.is_num() ? v.num() : 0.0);
    }
    if (f == "abs") {
      if (v.k == value::integer) return value::of_int(v.i < 0 ? -v.i : v.i);
      return value::of_real(std::fabs(v.num()));
    }
    if (f == "round") {
      int prec = a.empty() ? 0 : static_cast<int>(a[0].i);
      double p = std::pow(10.0, prec);
      return value::of_real(std::nearbyint(v.num() * p) / p);
    }
    if (f == "sum" || f == "max" || f == "min") {
      auto items = iterate(v);
      if (f == "sum") {
        value acc = value::of_int(0);
        for (const auto& x : items) acc = binary("+", acc, x);
        return acc;
      }
      if (items.empty()) return value{};
      value best = items[0];
      for (const auto& x : items)
        if (truthy(binary(f == "max" ? ">" : "<", x, best))) best = x;
      return best;
    }
    if (f == "wordcount") return value::of_int(static_cast<std::int64_t>(split(need_str(), nullptr, -1).size()));
    throw render_error("unknown filter " + f);
  }

  std::vector<std::map<std::string, value>> scopes_;
  const local_clock& clock_;
};

}  // namespace

struct chat_template::impl {
  body root;
};

result<std::shared_ptr<const chat_template>> chat_template::parse(std::string_view source) {
  auto p = std::make_unique<impl>();
  try {
    p->root = statement_parser(lex(prepare_source(source))).parse_template();
  } catch (const syntax_error& e) {
    return error{std::string("chat template: ") + e.what()};
  }
  return std::shared_ptr<const chat_template>(new chat_template(std::move(p)));
}

chat_template::chat_template(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
chat_template::~chat_template() = default;

result<std::string> chat_template::render(const std::vector<chat_message>& messages,
                                          const std::map<std::string, std::string>& strings,
                                          bool add_generation_prompt, const local_clock& clock) const {
  renderer r(clock);
  list_t msgs;
  for (const auto& m : messages)
    msgs.push_back(value::of_dict({{"role", value::of_str(m.role)}, {"content", value::of_str(m.content)}}));
  r.set_global("messages", value::of_list(std::move(msgs)));
  r.set_global("add_generation_prompt", value::of_bool(add_generation_prompt));
  for (const auto& [k, v] : strings) r.set_global(k, value::of_str(v));
  std::string out;
  try {
    r.run(impl_->root, out);
  } catch (const render_error& e) {
    return error{std::string("chat template: ") + e.what()};
  }
  return out;
}

}  // namespace ic::tokenizer
