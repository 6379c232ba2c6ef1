// One model's prompt_text pipeline, and every model under a `--tokenizer-models-dir`.
//
//   registry_report report;
//   auto models = ic::tokenizer::model_registry::load("/models", report);  // eager, at startup
//   for (auto& [id, why] : report.failed) log(id, why);                  // those fail open
//   if (auto m = models.find("meta-llama/Llama-3.1-8B-Instruct"))
//     auto ids = m->tokenize("hello world");   // template(user message, add_generation_prompt)
//                                               // then encode without added special tokens
//
// A model folder holds `tokenizer.json` and `tokenizer_config.json` (its `chat_template`, a
// string or a list of {name, template} of which "default" is used, or a `chat_template.jinja`
// beside it); its id is the folder's path relative to the root, so ids may be nested
// ("org/name"). Lookups only ever search the loaded map: a request's model id is never
// joined onto a path. Loading checks everything it can (both files parse, the template is
// inside the supported subset and renders a probe message), so a model that loads does not
// fail at lookup time for reasons of its files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/chat_template.hpp"

namespace ic::tokenizer {

class prompt_tokenizer {
 public:
  /// Loads the model folder `dir`; `clock` is the local time `strftime_now` renders (the
  /// server and its engines must share a timezone: spec/tokenizer.md §5 pitfall 1).
  static result<std::shared_ptr<const prompt_tokenizer>> load_dir(
      const std::string& dir, local_clock clock = system_local_time);

  /// Renders `text` as one user message with add_generation_prompt=true (tools and
  /// documents undefined) and encodes it with add_special_tokens=false.
  result<std::vector<std::uint32_t>> tokenize(std::string_view text) const;

 private:
  prompt_tokenizer() = default;
  std::shared_ptr<const bpe_tokenizer> bpe_;
  std::shared_ptr<const chat_template> template_;
  std::map<std::string, std::string> strings_;  ///< bos_token, eos_token, ...
  local_clock clock_;
};

/// What `model_registry::load` did: one entry per model folder found.
struct registry_report {
  std::vector<std::string> loaded;
  std::vector<std::pair<std::string, std::string>> failed;  ///< (model id, reason)
  std::string root_error;  ///< set when the root itself cannot be read
};

class model_registry {
 public:
  model_registry() = default;
  /// Loads every model folder under `root` (nested folders allowed, directory symlinks
  /// followed up to 8 levels). A folder is a model folder when it holds tokenizer.json,
  /// tokenizer_config.json or a *.tiktoken file; those that do not load are reported.
  static model_registry load(const std::string& root, registry_report& report,
                             const local_clock& clock = system_local_time);

  /// Returns the model with exactly this id, or nullptr.
  std::shared_ptr<const prompt_tokenizer> find(const std::string& model_id) const;
  std::size_t size() const { return models_.size(); }
  /// Adds (or replaces) a model under `id` (tests, embedding).
  void add(std::string id, std::shared_ptr<const prompt_tokenizer> model) {
    models_[std::move(id)] = std::move(model);
  }

 private:
  std::map<std::string, std::shared_ptr<const prompt_tokenizer>, std::less<>> models_;
};

}  // namespace ic::tokenizer
