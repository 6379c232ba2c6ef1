// Lexing and parsing of chat templates into the syntax tree (see chat_template_detail.hpp).
#include "tokenizer/chat_template_detail.hpp"

#include <algorithm>
#include <cerrno>
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

namespace chat_template_detail {
namespace {

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

/// Template text quoted in an error: whole when short, else its first 40 bytes (cut back to
/// a UTF-8 character boundary) and "...", so a several-KB name or literal gives a short line.
std::string shown(std::string_view s) {
  constexpr std::size_t keep = 40;
  if (s.size() <= keep) return std::string(s);
  std::size_t n = keep;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
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
      else {
        // Python's ints have no bound; ours are 64-bit, and strtoll would clamp silently.
        errno = 0;
        t.i = std::strtoll(num.c_str(), nullptr, 10);
        if (errno == ERANGE) fail(line, "integer literal " + shown(num) + " is past the 64-bit range");
      }
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

}  // namespace

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

namespace {

/// Counts one level of nesting for its lifetime; refuses past max_nesting (deep nesting
/// would overflow the stack of the recursive parser and evaluator).
class nesting {
 public:
  nesting(int& depth, int line) : depth_(depth) {
    if (++depth_ > max_nesting) fail(line, "nested deeper than " + std::to_string(max_nesting) + " levels");
  }
  ~nesting() { --depth_; }
  nesting(const nesting&) = delete;
  nesting& operator=(const nesting&) = delete;

 private:
  int& depth_;
};

class expr_parser {
 public:
  expr_parser(const std::string& s, int line) : t_(tokenize_expr(s, line)), line_(line) {}

  expr_ptr parse_all() {
    auto e = parse_expr();
    if (peek().k != token::end) fail(line_, "unexpected '" + shown(peek().s) + "' in expression");
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
    if (!is_op(o)) fail(line_, std::string("expected '") + o + "', got '" + shown(peek().s) + "'");
    ++p_;
  }
  std::string expect_name() {
    if (peek().k != token::name) fail(line_, "expected a name, got '" + shown(peek().s) + "'");
    return t_[p_++].s;
  }

  expr_ptr parse_expr() {
    const nesting guard(depth_, line_);
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
      const nesting guard(depth_, line_);
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
      const nesting guard(depth_, line_);
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
        if (!known_tests().count(t->id)) fail(line_, "unsupported test '" + shown(t->id) + "'");
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
      if (!known_filters().count(f->id)) fail(line_, "unsupported filter '" + shown(f->id) + "'");
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
          if (!known_methods().count(a->id)) fail(line_, "unsupported method '" + shown(a->id) + "'");
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
          fail(line_, "unsupported function call" + (e->k == expr::name ? " '" + shown(e->id) + "'" : std::string()));
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
    fail(line_, "unexpected '" + shown(t.s) + "' in expression");
  }

  std::vector<token> t_;
  std::size_t p_ = 0;
  int line_;
  int depth_ = 0;

  friend class statement_parser;
};

// ---------------------------------------------------------------------------------------
// Statement parser over the lexed tags.

class statement_parser {
 public:
  explicit statement_parser(std::vector<tag> tags) : tags_(std::move(tags)) {}

  body parse_template() {
    body b = parse_body({});
    if (pos_ < tags_.size()) fail(tags_[pos_].line, "unexpected '" + shown(first_word(tags_[pos_])) + "'");
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
    const nesting guard(depth_, pos_ < tags_.size() ? tags_[pos_].line : 0);
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
      if (!p.at_end()) fail(line, "unexpected '" + shown(p.peek().s) + "' in for");
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
    fail(line, "unsupported tag '" + shown(w) + "'");
  }

  std::vector<tag> tags_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace
}  // namespace chat_template_detail

using namespace chat_template_detail;

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

}  // namespace ic::tokenizer
