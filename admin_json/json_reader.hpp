// Strict JSON decoding for the admin stores `/topology` and `/templates` (pd-templates.md §2.2,
// §3.1), and the walk state `/policy`'s Go-compatible decoder shares.
//
// Both stores take one JSON object per push and refuse anything they do not understand with
// one line naming the field: an unknown key, a wrong type, an out-of-range integer, a
// trailing byte after the document. `reader` walks a parsed document and remembers the
// first problem in document order; each step returns `false` once anything failed (so a
// decoder stops at the first `false`), and `status()` is the walk's outcome. Keys match
// exactly here (these are our formats; `/policy` folds case like Go's decoder, and words its
// messages like Go, in `policy/policy_json.cpp`, on the same `reader` and parser).
//
//   auto doc = ic::admin_json::parse_document(body, "decode topology: ");
//   if (!doc) return reply(400, doc.error());
//   ic::admin_json::reader r("decode topology: ");
//   std::int64_t version = 0;
//   if (auto* v = r.field(*doc, "version")) r.integer(*v, "version", version, 0, 9);
//   if (auto st = r.status(); !st) return reply(400, st.error());
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/result.hpp"

namespace ic::admin_json {

/// The document type: insertion-ordered, so "first problem in document order" is defined.
using json = nlohmann::ordered_json;

/// Parses `text` as exactly one JSON value (whitespace around it allowed, nothing else);
/// errors are one line starting with `prefix` (`<prefix>empty body` for blank text).
policy::result<json> parse_document(std::string_view text, std::string_view prefix);

/// Parses the first JSON value of `text`; bytes after it are not examined (Go's
/// `json.Decoder.Decode`, for `/policy`). Errors as `parse_document`, `<prefix>EOF` for blank text.
policy::result<json> parse_first_value(std::string_view text, std::string_view prefix);

/// Returns nlohmann's message of a parse error without its "[json.exception.x.n] " tag.
std::string json_error_text(const std::exception& e);

/// Names a JSON value's kind for type errors, as Go's UnmarshalTypeError does
/// (`null`, `bool`, `string`, `array`, `object`, `number 1.5`).
std::string kind_of(const json& v);

/// Replaces line breaks and tabs by spaces (error texts may echo input).
std::string one_line(std::string s);

/// Quotes `s` for an error message (`"key"`), escaping quotes, backslashes and controls.
std::string quote(std::string_view s);

/// Returns the double nearest to the shortest decimal that reads back as `f` (canonical
/// encodings write float32 fields this way so they round-trip byte for byte).
double shortest_double(float f);

/// Walks a document; the first error wins and every later call returns false.
class reader {
 public:
  /// `prefix` starts every message (e.g. "decode topology: ").
  explicit reader(std::string prefix) : prefix_(std::move(prefix)) {}

  bool failed() const { return error_.has_value(); }
  /// Returns success, or the first error as one line (prefix included).
  policy::status status() const;

  /// Records `what` about the field at `path` (e.g. `topologies[0].name: must not be empty`);
  /// an empty `path` records `<prefix><what>`. Returns false.
  bool fail(const std::string& path, const std::string& what);

  /// Checks that `v` is an object whose keys are all in `known`.
  bool object(const json& v, const std::string& path, std::initializer_list<std::string_view> known);
  /// Returns the member `key` of object `v`, or nullptr when absent.
  static const json* field(const json& v, std::string_view key);

  bool string(const json& v, const std::string& path, std::string& out);
  bool boolean(const json& v, const std::string& path, bool& out);
  /// Reads a JSON integer (not `1.0`, not `"1"`) within [lo, hi].
  bool integer(const json& v, const std::string& path, std::int64_t& out, std::int64_t lo,
               std::int64_t hi);
  /// Reads any finite JSON number that fits a float32.
  bool float32(const json& v, const std::string& path, float& out);
  bool string_array(const json& v, const std::string& path, std::vector<std::string>& out);
  /// Reads an object of string values (labels); keys come out sorted.
  bool string_map(const json& v, const std::string& path, std::map<std::string, std::string>& out);
  /// Checks that `v` is an array (elements are the caller's).
  bool array(const json& v, const std::string& path);

  /// Returns `path` + "." + key, or key at the top level.
  static std::string member(const std::string& path, std::string_view key);
  /// Returns `path` + "[i]".
  static std::string element(const std::string& path, std::size_t i);

 private:
  bool type_error(const json& v, const std::string& path, std::string_view type);

  std::string prefix_;
  std::optional<std::string> error_;
};

/// Decodes the root `{"version": N, "<list_key>": [...]}` of an admin store push: refuses
/// other keys, requires `version == 1` (message `unsupported <what> version N (accepted 1)`)
/// and calls `element(value, path)` for each list element in order until one fails.
/// Returns `r.status()`: success, or the first error.
policy::status decode_versioned_list(
    reader& r, const json& doc, std::string_view list_key, std::string_view what,
    const std::function<bool(const json&, const std::string&)>& element);

}  // namespace ic::admin_json
