// Internal to tokenizer/: the pieces of the chat-template interpreter that its three
// translation units share. Not part of the public API (that is chat_template.hpp) and not to
// be included outside tokenizer/chat_template*.cpp. The interpreter is split along its seams:
// chat_template_values.cpp holds the Python-like values and their helpers (str/repr, JSON,
// equality, iteration, string methods, slicing); chat_template_parser.cpp lexes the source
// into tags, tokenizes expressions and parses them into the syntax tree below
// (`chat_template::parse`); chat_template.cpp evaluates that tree (filters, tests, methods,
// globals; `chat_template::render`).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_template.hpp"

namespace ic::tokenizer::chat_template_detail {

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

/// Bounds on what one template may do (fuzz_chat_template found templates of a few KB that
/// overflowed the stack or ran without end): nesting of blocks and of expressions at parse
/// time; the size of the output and of every string or list built, and the nodes and loop
/// iterations executed per render.
inline constexpr int max_nesting = 64;
inline constexpr std::size_t max_render_bytes = std::size_t{16} << 20;
inline constexpr std::uint64_t max_render_steps = 200'000;

/// Throws a render_error when something of `n` bytes (or items) exceeds max_render_bytes.
inline void check_size(std::size_t n) {
  if (n > max_render_bytes) throw render_error("template builds a value or output over 16 MiB");
}

bool truthy(const value& v);
std::string to_str(const value& v);
std::string py_repr(const value& v);
/// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys) with Python's
/// default separators.
void to_json(const value& v, int indent, bool sort_keys, int depth, std::string& out);
bool equal(const value& a, const value& b);
/// Python's iteration: lists, dict keys, string characters (UTF-8 code points).
list_t iterate(const value& v);
std::int64_t length_of(const value& v);
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
/// Python's str.strip(chars) family; chars = nullptr strips whitespace.
std::string strip(const std::string& s, const std::string* chars, bool left, bool right);
std::string lower(const std::string& s);
std::string upper(const std::string& s);
/// Python's str.title(): a cased character after an uncased one is upper-cased, others lowered.
std::string title(const std::string& s);
list_t split(const std::string& s, const value* sep, std::int64_t maxsplit);
std::string replace_all(std::string s, const std::string& from, const std::string& to, std::int64_t count);
/// Python slicing over a sequence of `n` items: the indices selected.
std::vector<std::int64_t> slice_indices(std::int64_t n, const value& a, const value& b, const value& c);

/// The global functions a template may call (checked at parse, dispatched at render).
const std::set<std::string>& known_functions();

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

}  // namespace ic::tokenizer::chat_template_detail

namespace ic::tokenizer {

struct chat_template::impl {
  chat_template_detail::body root;
};

}  // namespace ic::tokenizer
