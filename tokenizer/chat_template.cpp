#include "tokenizer/chat_template.hpp"
#include "tokenizer/chat_template_detail.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
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

namespace chat_template_detail {
namespace {

// ---------------------------------------------------------------------------------------
// Evaluation.

enum class flow { normal, break_, continue_ };

/// Python's ints do not overflow; ours are 64-bit, and past that the render fails.
void overflow_if(bool overflowed) {
  if (overflowed) throw render_error("integer overflow (64-bit)");
}
/// -i, or the render fails (-INT64_MIN does not fit).
std::int64_t negated(std::int64_t i) {
  overflow_if(i == std::numeric_limits<std::int64_t>::min());
  return -i;
}
/// Python's int(d) of a double: toward zero. Only a double inside the 64-bit range converts
/// (2^63 itself is outside it); past it, and for NaN, the render fails.
std::int64_t truncated(double d) {
  overflow_if(!(d >= -9223372036854775808.0 && d < 9223372036854775808.0));
  return static_cast<std::int64_t>(d);
}
/// Python's int(v) of a number: an int as it is, a float truncated (see truncated).
std::int64_t int_of(const value& v) { return v.k == value::integer ? v.i : truncated(v.num()); }

class renderer {
 public:
  renderer(const local_clock& clock) : clock_(clock) { scopes_.emplace_back(); }
  /// `{% set ns.a = ns %}` (or through a list or another namespace) makes a cycle of
  /// shared_ptrs; emptying every namespace made here that is still alive breaks them (no
  /// value outlives render).
  ~renderer() {
    for (const auto& w : namespaces_)
      if (auto m = w.lock()) m->clear();
  }
  renderer(const renderer&) = delete;
  renderer& operator=(const renderer&) = delete;

  void set_global(const std::string& k, value v) { scopes_.front()[k] = std::move(v); }

  flow run(const body& b, std::string& out) {
    for (const auto& n : b) {
      step();
      switch (n->k) {
        case node::text: out += n->text_value; check_size(out.size()); break;
        case node::output: out += to_str(eval(*n->e)); check_size(out.size()); break;
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
        step();
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
      step();
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
        if (v.k == value::integer) return value::of_int(negated(v.i));
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
      else if (c == 'd' || c == 'i') {
        // As Python: an int prints exactly, a float is truncated, anything else is refused.
        if (!v.is_num()) throw render_error(std::string("%") + c + " format: a number is required");
        out += std::to_string(int_of(v));
      }
      else if (c == 'r') out += py_repr(v);
      else throw render_error(std::string("unsupported format character '") + c + "'");
    }
    return value::of_str(out);
  }

  static value binary(const std::string& op, const value& a, const value& b) {
    if (op == "==") return value::of_bool(equal(a, b));
    if (op == "!=") return value::of_bool(!equal(a, b));
    if (op == "~") {
      std::string s = to_str(a) + to_str(b);
      check_size(s.size());
      return value::of_str(std::move(s));
    }
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
      if (a.k == value::string && b.k == value::string) {
        check_size(a.s->size() + b.s->size());
        return value::of_str(*a.s + *b.s);
      }
      if (a.k == value::list && b.k == value::list) {
        check_size(a.l->size() + b.l->size());
        list_t l = *a.l;
        l.insert(l.end(), b.l->begin(), b.l->end());
        return value::of_list(std::move(l));
      }
    }
    if (op == "%" && a.k == value::string) return percent_format(*a.s, b);
    if (op == "*" && a.k == value::string && b.k == value::integer) {
      if (b.i > 0 && !a.s->empty())
        check_size(static_cast<std::uint64_t>(b.i) > max_render_bytes ? max_render_bytes + 1
                                                                        : a.s->size() * static_cast<std::size_t>(b.i));
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
      std::int64_t r = 0;
      if (op == "+" || op == "-" || op == "*") {
        overflow_if(op == "+"   ? __builtin_add_overflow(ai, bi, &r)
                    : op == "-" ? __builtin_sub_overflow(ai, bi, &r)
                                : __builtin_mul_overflow(ai, bi, &r));
        return value::of_int(r);
      }
      if (op == "**") {
        if (bi < 0) return value::of_real(std::pow(a.num(), b.num()));
        r = 1;  // by squaring: at most 63 rounds, whatever the exponent
        std::int64_t base = ai;
        for (std::int64_t e = bi; e > 0; e >>= 1) {
          if (e & 1) overflow_if(__builtin_mul_overflow(r, base, &r));
          if (e > 1) overflow_if(__builtin_mul_overflow(base, base, &base));
        }
        return value::of_int(r);
      }
      if (bi == 0) throw render_error("integer division or modulo by zero");
      if (bi == -1) {  // INT64_MIN / -1 overflows (and so does INT64_MIN % -1 in C++)
        return value::of_int(op == "//" ? negated(ai) : 0);
      }
      std::int64_t q = ai / bi;
      r = ai % bi;
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
      if (e.id == "namespace") {
        v.k = value::ns;
        namespaces_.push_back(v.m);
      }
      return v;
    }
    if (e.id == "range") {
      std::int64_t start = 0, stop = 0, step = 1;
      if (a.size() == 1) stop = a[0].i;
      else if (a.size() >= 2) { start = a[0].i; stop = a[1].i; if (a.size() > 2) step = a[2].i; }
      if (step == 0) throw render_error("range() step must not be zero");
      list_t out;
      for (auto x = start; step > 0 ? x < stop : x > stop;) {
        out.push_back(value::of_int(x));
        if (out.size() > 100000) throw render_error("range() too large");
        this->step();  // each element is work: nested ranges count against the bound
        if (__builtin_add_overflow(x, step, &x)) break;  // past the 64-bit end: past stop
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
      if (!v.is_num()) return value::of_int(0);
      return value::of_int(int_of(v));
    }
    if (f == "float") {
      if (v.k == value::string) return value::of_real(std::strtod(v.s->c_str(), nullptr));
      return value::of_real(v.is_num() ? v.num() : 0.0);
    }
    if (f == "abs") {
      if (v.k == value::integer) return value::of_int(v.i < 0 ? negated(v.i) : v.i);
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

  /// Counts one node or loop iteration against max_render_steps.
  void step() {
    if (++steps_ > max_render_steps) throw render_error("template runs over 200000 steps");
  }

  std::vector<std::map<std::string, value>> scopes_;
  // Every namespace() made, not kept alive by this: only those in a cycle remain at the end.
  std::vector<std::weak_ptr<dict_t>> namespaces_;
  const local_clock& clock_;
  std::uint64_t steps_ = 0;
};

}  // namespace
}  // namespace chat_template_detail

using namespace chat_template_detail;

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
