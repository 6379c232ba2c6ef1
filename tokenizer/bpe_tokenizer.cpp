#include "tokenizer/bpe_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <limits>
#include <optional>
#include <queue>
#include <sstream>

#include <absl/container/flat_hash_map.h>
#include <nlohmann/json.hpp>

namespace ic::tokenizer {

namespace {

using json = nlohmann::json;

/// Returns the byte length of the UTF-8 sequence starting with `lead` (1 for invalid leads;
/// the text is validated before it is walked).
std::size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

/// Returns true when `s` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0 || cp < 0) return false;
    i += static_cast<std::size_t>(n);
  }
  return true;
}

/// Decodes the code point at `s[i]` (valid UTF-8) and its length.
std::pair<utf8proc_int32_t, std::size_t> code_point_at(std::string_view s, std::size_t i) {
  utf8proc_int32_t cp = 0;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                            static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  return {cp, n > 0 ? static_cast<std::size_t>(n) : 1};
}

/// Returns the start of the code point that ends at `end` (exclusive).
std::size_t prev_start(std::string_view s, std::size_t end) {
  std::size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

/// Rust's char::is_whitespace (Unicode White_Space).
bool is_white_space(utf8proc_int32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85) return true;
  if (c < 0x80) return false;
  auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
         cat == UTF8PROC_CATEGORY_ZP;
}

/// A word character for `single_word` (alphanumeric or underscore).
bool is_word_char(utf8proc_int32_t c) {
  if (c == '_') return true;
  auto cat = utf8proc_category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

/// GPT-2's bytes_to_unicode: printable bytes map to themselves, the other 68 in order to
/// U+0100 + n; each entry is the UTF-8 of the mapped character.
std::array<std::string, 256> byte_level_alphabet() {
  std::array<std::string, 256> out;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    utf8proc_int32_t cp = keep ? b : 0x100 + n++;
    utf8proc_uint8_t buf[4];
    auto len = utf8proc_encode_char(cp, buf);
    out[static_cast<std::size_t>(b)].assign(reinterpret_cast<char*>(buf), static_cast<std::size_t>(len));
  }
  return out;
}

const std::array<std::string, 256>& alphabet() {
  static const auto a = byte_level_alphabet();
  return a;
}

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// A compiled PCRE2 pattern (UTF + UCP, JIT when available), owned.
class regex {
 public:
  static result<std::unique_ptr<regex>> compile(const std::string& pattern, bool literal) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    std::uint32_t flags = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    auto* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), flags,
                             &code, &offset, nullptr);
    if (re == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(code, msg, sizeof msg);
      return error{"pre_tokenizer regex does not compile at offset " + std::to_string(offset) +
                   ": " + reinterpret_cast<char*>(msg)};
    }
    auto r = std::unique_ptr<regex>(new regex(re));
    r->jit_ = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    return r;
  }
  ~regex() { pcre2_code_free(re_); }

  /// Finds the next match in `s` at or after `from`: {start, end}, or start = npos. A
  /// negative PCRE2 error code is returned through `err`.
  std::pair<std::size_t, std::size_t> find(std::string_view s, std::size_t from, int& err) const {
    auto& t = thread_state::get();
    int rc = jit_ ? pcre2_jit_match(re_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), from,
                                    PCRE2_NO_UTF_CHECK, t.md, t.mc)
                  : pcre2_match(re_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), from,
                                PCRE2_NO_UTF_CHECK, t.md, t.mc);
    if (rc == PCRE2_ERROR_NOMATCH) return {std::string_view::npos, 0};
    if (rc < 0) {
      err = rc;
      return {std::string_view::npos, 0};
    }
    auto* ov = pcre2_get_ovector_pointer(t.md);
    return {ov[0], ov[1]};
  }

 private:
  /// Match data, match context and JIT stack of the calling thread (PCRE2 needs one per
  /// concurrent match).
  struct thread_state {
    pcre2_match_data* md;
    pcre2_match_context* mc;
    pcre2_jit_stack* js;
    thread_state()
        : md(pcre2_match_data_create(1, nullptr)),
          mc(pcre2_match_context_create(nullptr)),
          js(pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr)) {
      pcre2_jit_stack_assign(mc, nullptr, js);
    }
    ~thread_state() {
      pcre2_jit_stack_free(js);
      pcre2_match_context_free(mc);
      pcre2_match_data_free(md);
    }
    static thread_state& get() {
      thread_local thread_state t;
      return t;
    }
  };
  explicit regex(pcre2_code* re) : re_(re) {}
  pcre2_code* re_;
  bool jit_ = false;
};

enum class norm_form { nfc, nfd, nfkc, nfkd };

/// Added tokens indexed by first byte, longest first (leftmost-longest matching).
struct added_matcher {
  std::vector<const added_token*> by_first[256];
  bool empty = true;
  void add(const added_token* t) {
    if (t->content.empty()) return;
    by_first[static_cast<unsigned char>(t->content[0])].push_back(t);
    empty = false;
  }
  void finish() {
    for (auto& v : by_first)
      std::stable_sort(v.begin(), v.end(), [](const added_token* a, const added_token* b) {
        return a->content.size() > b->content.size();
      });
  }
};

struct merge_info {
  std::uint32_t rank;
  std::uint32_t id;
};

/// Debian's Abseil keeps its own string_view type in C++17.
absl::string_view av(std::string_view s) { return {s.data(), s.size()}; }

std::uint64_t pair_key(std::uint32_t a, std::uint32_t b) {
  return (static_cast<std::uint64_t>(a) << 32) | b;
}

}  // namespace

const std::string& byte_level_char(unsigned char b) { return alphabet()[b]; }

struct bpe_tokenizer::impl {
  std::vector<added_token> added;
  added_matcher raw_tokens;         ///< normalized:false (matched on the raw text)
  added_matcher normalized_tokens;  ///< normalized:true (matched after normalization)
  std::vector<norm_form> normalizers;
  std::vector<std::unique_ptr<regex>> splits;  ///< Split(Isolated) steps, in order
  bool byte_level = false;
  absl::flat_hash_map<std::string, std::uint32_t> vocab;
  absl::flat_hash_map<std::string, std::uint32_t> added_ids;
  absl::flat_hash_map<std::uint64_t, merge_info> merges;
  std::array<std::int64_t, 256> byte_ids{};
  std::array<std::int64_t, 256> fallback_ids{};
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::int64_t unk_id = -1;

  using sink = std::vector<std::uint32_t>;

  /// Splits `text` on `m`'s tokens; gaps go to `gap`, matches to `out`.
  template <class Gap>
  status split_added(std::string_view text, const added_matcher& m, sink& out,
                           Gap&& gap) const {
    if (m.empty) return gap(text);
    std::size_t gap_start = 0, i = 0;
    while (i < text.size()) {
      const added_token* hit = nullptr;
      for (const auto* t : m.by_first[static_cast<unsigned char>(text[i])]) {
        if (text.compare(i, t->content.size(), t->content) != 0) continue;
        if (t->single_word) {
          const std::size_t stop = i + t->content.size();
          if (i > 0 && is_word_char(code_point_at(text, prev_start(text, i)).first)) continue;
          if (stop < text.size() && is_word_char(code_point_at(text, stop).first)) continue;
        }
        hit = t;
        break;
      }
      if (hit == nullptr) {
        ++i;
        continue;
      }
      std::size_t s = i, e = i + hit->content.size();
      if (hit->lstrip)
        while (s > gap_start) {
          auto p = prev_start(text, s);
          if (!is_white_space(code_point_at(text, p).first)) break;
          s = p;
        }
      if (hit->rstrip)
        while (e < text.size()) {
          auto [cp, n] = code_point_at(text, e);
          if (!is_white_space(cp)) break;
          e += n;
        }
      if (s > gap_start) {
        auto r = gap(text.substr(gap_start, s - gap_start));
        if (!r) return r;
      }
      out.push_back(hit->id);
      gap_start = i = e;
    }
    if (gap_start < text.size()) return gap(text.substr(gap_start));
    return {};
  }

  /// Applies the normalizers to `text` (valid UTF-8).
  std::string normalize(std::string_view text) const {
    std::string s(text);
    if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
      return s;  // every normalization form leaves ASCII unchanged
    for (auto f : normalizers) {
      int opt = UTF8PROC_STABLE;
      switch (f) {
        case norm_form::nfc: opt |= UTF8PROC_COMPOSE; break;
        case norm_form::nfd: opt |= UTF8PROC_DECOMPOSE; break;
        case norm_form::nfkc: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        case norm_form::nfkd: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
      }
      utf8proc_uint8_t* buf = nullptr;
      auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                            static_cast<utf8proc_ssize_t>(s.size()), &buf,
                            static_cast<utf8proc_option_t>(opt));
      if (n >= 0) s.assign(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
      std::free(buf);
    }
    return s;
  }

  /// Runs split step `level` and the ones after it on `piece`, then BPE on each result.
  status pre_tokenize(std::string_view piece, std::size_t level, sink& out) const {
    if (level == splits.size()) return bpe(piece, out);
    std::size_t pos = 0, from = 0;
    int err = 0;
    while (from < piece.size()) {
      auto [s, e] = splits[level]->find(piece, from, err);
      if (err != 0) return error{"regex match failed (PCRE2 error " + std::to_string(err) + ")"};
      if (s == std::string_view::npos) break;
      if (e == s) {  // an empty match cuts nothing: search again one character later
        from = s + utf8_len(static_cast<unsigned char>(piece[s]));
        continue;
      }
      if (s > pos) {  // Isolated: the gap before a match is a piece of its own
        auto r = pre_tokenize(piece.substr(pos, s - pos), level + 1, out);
        if (!r) return r;
      }
      auto r = pre_tokenize(piece.substr(s, e - s), level + 1, out);
      if (!r) return r;
      pos = from = e;
    }
    if (pos < piece.size()) return pre_tokenize(piece.substr(pos), level + 1, out);
    return {};
  }

  /// Runs the BPE model on one pre-tokenized piece.
  status bpe(std::string_view piece, sink& out) const {
    if (piece.empty()) return {};
    thread_local std::string mapped;
    thread_local std::vector<std::uint32_t> syms;
    std::string_view word = piece;
    if (byte_level) {
      mapped.clear();
      for (unsigned char b : piece) mapped += alphabet()[b];
      word = mapped;
    }
    if (ignore_merges) {
      auto it = vocab.find(av(word));
      if (it != vocab.end()) {
        out.push_back(it->second);
        return {};
      }
    }
    syms.clear();
    if (byte_level) {
      for (unsigned char b : piece) syms.push_back(static_cast<std::uint32_t>(byte_ids[b]));
    } else {
      bool last_unk = false;
      for (std::size_t i = 0; i < word.size();) {
        std::size_t n = utf8_len(static_cast<unsigned char>(word[i]));
        auto it = vocab.find(av(word.substr(i, n)));
        if (it != vocab.end()) {
          syms.push_back(it->second);
          last_unk = false;
        } else if (byte_fallback &&
                   std::all_of(word.begin() + static_cast<std::ptrdiff_t>(i),
                               word.begin() + static_cast<std::ptrdiff_t>(i + n),
                               [&](char c) { return fallback_ids[static_cast<unsigned char>(c)] >= 0; })) {
          for (std::size_t k = i; k < i + n; ++k)
            syms.push_back(static_cast<std::uint32_t>(fallback_ids[static_cast<unsigned char>(word[k])]));
          last_unk = false;
        } else if (unk_id >= 0) {
          if (!(fuse_unk && last_unk)) syms.push_back(static_cast<std::uint32_t>(unk_id));
          last_unk = true;
        } else {
          return error{"a character has no token (no unk_token, no byte_fallback)"};
        }
        i += n;
      }
    }
    if (syms.size() <= 48) merge_short(syms);
    else merge_long(syms);
    out.insert(out.end(), syms.begin(), syms.end());
    return {};
  }

  /// Finds the merge of (a, b), or nullptr.
  const merge_info* merge_of(std::uint32_t a, std::uint32_t b) const {
    auto it = merges.find(pair_key(a, b));
    return it == merges.end() ? nullptr : &it->second;
  }

  /// Repeatedly merges the lowest-ranked adjacent pair (ties: leftmost); quadratic, for
  /// short pieces.
  void merge_short(std::vector<std::uint32_t>& s) const {
    while (s.size() > 1) {
      std::uint32_t best_rank = UINT32_MAX, best_id = 0;
      std::size_t best = 0;
      for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        const auto* m = merge_of(s[i], s[i + 1]);
        if (m != nullptr && m->rank < best_rank) {
          best_rank = m->rank;
          best_id = m->id;
          best = i;
        }
      }
      if (best_rank == UINT32_MAX) return;
      s[best] = best_id;
      s.erase(s.begin() + static_cast<std::ptrdiff_t>(best + 1));
    }
  }

  /// The same merges with a rank heap over a linked list of symbols, for long pieces
  /// (HF's word.merge_all): O(n log n).
  void merge_long(std::vector<std::uint32_t>& s) const {
    const std::size_t n = s.size();
    std::vector<std::int64_t> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (std::size_t i = 0; i < n; ++i) {
      prev[i] = static_cast<std::int64_t>(i) - 1;
      next[i] = i + 1 < n ? static_cast<std::int64_t>(i + 1) : -1;
    }
    struct cand {
      std::uint32_t rank;
      std::size_t pos;
      std::uint32_t left, right;
      bool operator>(const cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<cand, std::vector<cand>, std::greater<cand>> heap;
    for (std::size_t i = 0; i + 1 < n; ++i)
      if (const auto* m = merge_of(s[i], s[i + 1])) heap.push({m->rank, i, s[i], s[i + 1]});
    while (!heap.empty()) {
      auto c = heap.top();
      heap.pop();
      if (!alive[c.pos] || s[c.pos] != c.left || next[c.pos] < 0) continue;
      auto r = static_cast<std::size_t>(next[c.pos]);
      if (s[r] != c.right) continue;
      const auto* m = merge_of(c.left, c.right);
      s[c.pos] = m->id;
      alive[r] = false;
      next[c.pos] = next[r];
      if (next[r] >= 0) prev[static_cast<std::size_t>(next[r])] = static_cast<std::int64_t>(c.pos);
      if (prev[c.pos] >= 0) {
        auto p = static_cast<std::size_t>(prev[c.pos]);
        if (const auto* pm = merge_of(s[p], s[c.pos])) heap.push({pm->rank, p, s[p], s[c.pos]});
      }
      if (next[c.pos] >= 0) {
        auto q = static_cast<std::size_t>(next[c.pos]);
        if (const auto* qm = merge_of(s[c.pos], s[q])) heap.push({qm->rank, c.pos, s[c.pos], s[q]});
      }
    }
    std::size_t w = 0;
    for (std::int64_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)]) s[w++] = s[static_cast<std::size_t>(i)];
    s.resize(w);
  }
};

namespace {

using impl_ptr = std::unique_ptr<bpe_tokenizer::impl>;

/// A token id: a JSON integer in [0, 2^32), else nullopt. nlohmann's get<std::uint32_t>()
/// casts any number, and a float out of range (2.7e55) is undefined behaviour (found by
/// fuzz_tokenizer_json).
std::optional<std::uint32_t> token_id(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= std::numeric_limits<std::uint32_t>::max()) return static_cast<std::uint32_t>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i >= 0 && i <= std::int64_t{std::numeric_limits<std::uint32_t>::max()})
      return static_cast<std::uint32_t>(i);
  }
  return std::nullopt;
}

/// Returns `j[key]` when present and not null.
const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

status load_normalizer(const json& n, bpe_tokenizer::impl& t) {
  const std::string type = n.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : n.at("normalizers")) {
      auto r = load_normalizer(sub, t);
      if (!r) return r;
    }
    return {};
  }
  if (type == "NFC") t.normalizers.push_back(norm_form::nfc);
  else if (type == "NFD") t.normalizers.push_back(norm_form::nfd);
  else if (type == "NFKC") t.normalizers.push_back(norm_form::nfkc);
  else if (type == "NFKD") t.normalizers.push_back(norm_form::nfkd);
  else return error{"normalizer.type \"" + type + "\" is not supported"};
  return {};
}

status load_pre_tokenizer(const json& p, bpe_tokenizer::impl& t) {
  const std::string type = p.value("type", "");
  if (t.byte_level) return error{"pre_tokenizer steps after ByteLevel are not supported"};
  if (type == "Sequence") {
    for (const auto& sub : p.at("pretokenizers")) {
      auto r = load_pre_tokenizer(sub, t);
      if (!r) return r;
    }
    return {};
  }
  if (type == "Split") {
    if (p.value("behavior", "") != "Isolated")
      return error{"pre_tokenizer Split behavior \"" + p.value("behavior", "") + "\" is not supported"};
    if (p.value("invert", false)) return error{"pre_tokenizer Split invert:true is not supported"};
    const auto& pat = p.at("pattern");
    const bool literal = pat.contains("String");
    auto re = regex::compile(pat.at(literal ? "String" : "Regex").get<std::string>(), literal);
    if (!re) return error{re.error()};
    t.splits.push_back(std::move(*re));
    return {};
  }
  if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false))
      return error{"pre_tokenizer ByteLevel add_prefix_space:true is not supported"};
    if (p.value("use_regex", true)) {
      auto re = regex::compile(kGpt2Pattern, false);
      if (!re) return error{re.error()};
      t.splits.push_back(std::move(*re));
    }
    t.byte_level = true;
    return {};
  }
  return error{"pre_tokenizer.type \"" + type + "\" is not supported"};
}

status load_model(const json& m, bpe_tokenizer::impl& t) {
  const std::string type = m.value("type", "BPE");
  if (type != "BPE") return error{"model.type \"" + type + "\" is not supported"};
  if (const auto* d = field(m, "dropout"); d && d->get<double>() != 0.0)
    return error{"model.dropout is not supported"};
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const auto* v = field(m, k); v && !v->get<std::string>().empty())
      return error{std::string("model.") + k + " is not supported"};
  t.ignore_merges = m.value("ignore_merges", false);
  t.byte_fallback = m.value("byte_fallback", false);
  t.fuse_unk = m.value("fuse_unk", false);
  const auto& vocab = m.at("vocab");
  t.vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto id = token_id(it.value());
    if (!id) return error{"model.vocab id of \"" + it.key() + "\" is not an integer in [0, 2^32)"};
    t.vocab.emplace(it.key(), *id);
  }
  if (const auto* unk = field(m, "unk_token")) {
    auto it = t.vocab.find(unk->get<std::string>());
    if (it == t.vocab.end()) return error{"model.unk_token is not in the vocabulary"};
    t.unk_id = it->second;
  }
  const auto& merges = m.at("merges");
  t.merges.reserve(merges.size());
  std::string a, b;
  std::uint32_t rank = 0;
  for (const auto& e : merges) {
    if (e.is_string()) {
      const auto& s = e.get_ref<const std::string&>();
      auto sp = s.find(' ');
      if (sp == std::string::npos) return error{"model.merges entry without a space: " + s};
      a.assign(s, 0, sp);
      b.assign(s, sp + 1);
    } else {
      a = e.at(0).get<std::string>();
      b = e.at(1).get<std::string>();
    }
    auto ia = t.vocab.find(a), ib = t.vocab.find(b), im = t.vocab.find(a + b);
    if (ia == t.vocab.end() || ib == t.vocab.end() || im == t.vocab.end())
      return error{"model.merges entry \"" + a + " " + b + "\" is not in the vocabulary"};
    t.merges.try_emplace(pair_key(ia->second, ib->second), merge_info{rank, im->second});
    ++rank;
  }
  return {};
}

}  // namespace

result<std::shared_ptr<const bpe_tokenizer>> bpe_tokenizer::load(std::string_view text) {
  auto t = std::make_unique<impl>();
  try {
    const json doc = json::parse(text);
    if (!doc.is_object()) return error{"tokenizer.json is not a JSON object"};
    if (const auto* n = field(doc, "normalizer")) {
      auto r = load_normalizer(*n, *t);
      if (!r) return error{r.error()};
    }
    if (const auto* p = field(doc, "pre_tokenizer")) {
      auto r = load_pre_tokenizer(*p, *t);
      if (!r) return error{r.error()};
    }
    const auto* m = field(doc, "model");
    if (m == nullptr) return error{"tokenizer.json has no model"};
    auto r = load_model(*m, *t);
    if (!r) return error{r.error()};
    if (const auto* added = field(doc, "added_tokens"))
      for (const auto& a : *added) {
        added_token tok;
        const auto id = token_id(a.at("id"));
        if (!id) return error{"an added token's id is not an integer in [0, 2^32)"};
        tok.id = *id;
        tok.content = a.at("content").get<std::string>();
        tok.special = a.value("special", false);
        tok.normalized = a.value("normalized", !tok.special);
        tok.lstrip = a.value("lstrip", false);
        tok.rstrip = a.value("rstrip", false);
        tok.single_word = a.value("single_word", false);
        if (!valid_utf8(tok.content)) return error{"an added token is not valid UTF-8"};
        t->added.push_back(std::move(tok));
      }
  } catch (const std::exception& e) {
    return error{std::string("tokenizer.json: ") + e.what()};
  }
  for (const auto& a : t->added) {
    t->added_ids.emplace(a.content, a.id);
    // A normalizer-free tokenizer matches every added token on the raw text.
    (a.normalized && !t->normalizers.empty() ? t->normalized_tokens : t->raw_tokens).add(&a);
  }
  t->raw_tokens.finish();
  t->normalized_tokens.finish();
  for (int b = 0; b < 256; ++b) {
    auto it = t->vocab.find(alphabet()[static_cast<std::size_t>(b)]);
    t->byte_ids[static_cast<std::size_t>(b)] = it == t->vocab.end() ? -1 : it->second;
    if (t->byte_level && it == t->vocab.end())
      return error{"ByteLevel tokenizer whose vocabulary lacks byte " + std::to_string(b)};
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto fb = t->vocab.find(name);
    t->fallback_ids[static_cast<std::size_t>(b)] = fb == t->vocab.end() ? -1 : fb->second;
  }
  return std::shared_ptr<const bpe_tokenizer>(new bpe_tokenizer(std::move(t)));
}

result<std::shared_ptr<const bpe_tokenizer>> bpe_tokenizer::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{"cannot read " + path};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return load(text);
}

bpe_tokenizer::bpe_tokenizer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
bpe_tokenizer::~bpe_tokenizer() = default;

result<std::vector<std::uint32_t>> bpe_tokenizer::encode(std::string_view text) const {
  if (!valid_utf8(text)) return error{"text is not valid UTF-8"};
  std::vector<std::uint32_t> out;
  out.reserve(text.size() / 3 + 8);
  const impl& t = *impl_;
  auto r = t.split_added(text, t.raw_tokens, out, [&](std::string_view gap) -> status {
    if (t.normalizers.empty()) return t.pre_tokenize(gap, 0, out);
    const std::string norm = t.normalize(gap);
    return t.split_added(norm, t.normalized_tokens, out, [&](std::string_view g) {
      return t.pre_tokenize(g, 0, out);
    });
  });
  if (!r) return error{r.error()};
  return out;
}

std::int64_t bpe_tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_ids.find(av(token)); it != impl_->added_ids.end()) return it->second;
  if (auto it = impl_->vocab.find(av(token)); it != impl_->vocab.end()) return it->second;
  return -1;
}

const std::vector<added_token>& bpe_tokenizer::added_tokens() const { return impl_->added; }

std::size_t bpe_tokenizer::vocab_size() const { return impl_->vocab.size(); }

}  // namespace ic::tokenizer
