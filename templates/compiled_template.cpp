#include "templates/compiled_template.hpp"

#include <algorithm>
#include <string_view>

#include <openssl/evp.h>

namespace ic::templates {
namespace {

bool ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

void skip_blanks(std::string_view s, std::size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

bool take(std::string_view s, std::size_t& i, std::string_view what) {
  if (s.substr(i, what.size()) != what) return false;
  i += what.size();
  return true;
}

policy::error at(std::size_t offset, const std::string& what) {
  return policy::error{"body: " + what + " at byte " + std::to_string(offset)};
}

void append_u32be(std::string& out, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(b, 4);
}

}  // namespace

std::string template_revision(const template_def& def) {
  std::string input = "inferencecache.io/template-revision/v1\n";
  append_u32be(input, static_cast<std::uint32_t>(def.body.size()));
  input += def.body;
  append_u32be(input, static_cast<std::uint32_t>(def.slots.size()));
  std::vector<const slot*> sorted;
  for (const auto& s : def.slots) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(), [](const slot* a, const slot* b) { return a->name < b->name; });
  for (const slot* s : sorted) {
    append_u32be(input, static_cast<std::uint32_t>(s->name.size()));
    input += s->name;
    input += s->type == slot_type::stable ? 'S' : 'M';
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

policy::result<compiled_template> compile(const template_def& def) {
  compiled_template c;
  c.def = &def;
  for (std::size_t i = 0; i < def.slots.size(); ++i) c.slots_by_name.push_back(static_cast<int>(i));
  std::sort(c.slots_by_name.begin(), c.slots_by_name.end(),
            [&](int a, int b) { return def.slots[a].name < def.slots[b].name; });
  const std::string_view body = def.body;
  std::string literal;
  const auto flush = [&] {
    if (literal.empty()) return;
    c.literal_bytes += literal.size();
    c.segments.push_back({std::move(literal), -1});
    literal.clear();
  };
  c.first_mutable = std::string::npos;
  std::size_t i = 0;
  while (i < body.size()) {
    const auto open = body.find("{{", i);
    if (open == std::string_view::npos) {
      literal.append(body.substr(i));
      break;
    }
    literal.append(body.substr(i, open - i));
    std::size_t j = open + 2;
    skip_blanks(body, j);
    if (j < body.size() && (body[j] == '\'' || body[j] == '"')) {
      // The only escape: {{ '{{' }} / {{ "{{" }}.
      const char q = body[j];
      if (!take(body, ++j, "{{") || j >= body.size() || body[j] != q) {
        return at(open, "only '{{' may be quoted inside {{ }}");
      }
      ++j;
      skip_blanks(body, j);
      if (!take(body, j, "}}")) return at(open, "unterminated escape");
      literal += "{{";
      i = j;
      continue;
    }
    if (j < body.size() && body[j] == '.') ++j;  // {{.name}} alias
    const std::size_t name_begin = j;
    if (j >= body.size() || !ident_start(body[j])) {
      return at(open, "malformed placeholder (expected an identifier after {{)");
    }
    while (j < body.size() && ident_char(body[j])) ++j;
    const std::string_view name = body.substr(name_begin, j - name_begin);
    skip_blanks(body, j);
    if (!take(body, j, "}}")) {
      return at(open, j >= body.size() ? "unterminated placeholder"
                                       : "malformed placeholder (expected }} after the name)");
    }
    auto it = std::lower_bound(c.slots_by_name.begin(), c.slots_by_name.end(), name,
                               [&](int s, std::string_view n) { return def.slots[s].name < n; });
    if (it == c.slots_by_name.end() || def.slots[*it].name != name) {
      return at(open, "placeholder names undeclared slot \"" + std::string(name) + "\"");
    }
    flush();
    if (def.slots[*it].type == slot_type::mutable_ && c.first_mutable == std::string::npos) {
      c.first_mutable = c.segments.size();
    }
    c.segments.push_back({{}, *it});
    i = j;
  }
  flush();
  if (c.first_mutable == std::string::npos) c.first_mutable = c.segments.size();
  c.revision = template_revision(def);
  return c;
}

}  // namespace ic::templates
