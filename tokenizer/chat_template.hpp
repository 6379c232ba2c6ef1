// A chat-template renderer for the Jinja subset that the Llama-3.x and Qwen2/2.5/3 chat
// templates use, configured like transformers' (ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loopcontrols; `tojson` with ensure_ascii=False; globals
// `raise_exception`, `strftime_now` (local time), `namespace`, `range`).
//
//   auto t = ic::tokenizer::chat_template::parse(source);   // load time: unsupported syntax,
//   if (!t) { log(t.error()); return; }                      // filters, tests, methods fail here
//   chat_message m{"user", "hello world"};
//   auto text = t->render({m}, {{"bos_token", "<|begin_of_text|>"}}, /*add_generation_prompt=*/true);
//
// Supported: text with `{{ }}` / `{% %}` / `{# #}` and `-` whitespace control; statements
// if/elif/else, for (with `loop.*`, else, tuple targets), set (names, namespace attributes,
// block set), break/continue; expressions with literals, lists, dicts, attributes,
// subscripts, slices with step, calls, filters, tests, arithmetic, `~`, comparisons,
// `in`/`not in`, `and`/`or`/`not`, ternaries. Everything else (macros, includes, call
// blocks, unknown filters/tests/methods/functions) is refused by `parse` with the line it is
// on. `tools` and `documents` are left undefined (spec/tokenizer.md §5 pitfall 2).
//
// Thread-safety: a parsed template is immutable; `render` may run on many threads.
#pragma once

#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/result.hpp"

namespace ic::tokenizer {

/// One message of the conversation passed to the template.
struct chat_message {
  std::string role;
  std::string content;
};

/// Returns the local time `strftime_now` formats; the default reads the system clock.
using local_clock = std::function<std::tm()>;

/// Returns the current local time (localtime_r of the system clock).
std::tm system_local_time();

class chat_template {
 public:
  /// Parses a template; an error names the first unsupported construct and its line.
  static ::ic::policy::result<std::shared_ptr<const chat_template>> parse(std::string_view source);

  ~chat_template();
  chat_template(const chat_template&) = delete;
  chat_template& operator=(const chat_template&) = delete;

  /// Renders `messages` with `add_generation_prompt`; `strings` become top-level string
  /// variables (bos_token, eos_token, ...). Errors: `raise_exception` called, a type error.
  ::ic::policy::result<std::string> render(const std::vector<chat_message>& messages,
                                           const std::map<std::string, std::string>& strings,
                                           bool add_generation_prompt,
                                           const local_clock& clock = system_local_time) const;

  struct impl;

 private:
  explicit chat_template(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::tokenizer
