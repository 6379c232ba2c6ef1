#include "tokenizer/prompt_tokenizer.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace ic::tokenizer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool read_file(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

/// A special token in tokenizer_config.json: a string or an AddedToken object.
const std::string* token_text(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return nullptr;
  if (it->is_string()) return &it->get_ref<const std::string&>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return &c->get_ref<const std::string&>();
  }
  return nullptr;
}

bool has_tiktoken(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".tiktoken") return true;
  return false;
}

}  // namespace

result<std::shared_ptr<const prompt_tokenizer>> prompt_tokenizer::load_dir(const std::string& dir,
                                                                           local_clock clock) {
  const fs::path root(dir);
  if (!fs::exists(root / "tokenizer.json")) {
    if (has_tiktoken(root)) return error{"only a *.tiktoken file: tiktoken models are not supported"};
    return error{"no tokenizer.json"};
  }
  std::string cfg_text;
  if (!read_file(root / "tokenizer_config.json", cfg_text)) return error{"no tokenizer_config.json"};
  json cfg;
  try {
    cfg = json::parse(cfg_text);
  } catch (const std::exception& e) {
    return error{std::string("tokenizer_config.json: ") + e.what()};
  }
  if (!cfg.is_object()) return error{"tokenizer_config.json is not a JSON object"};
  std::string source;
  if (auto it = cfg.find("chat_template"); it != cfg.end() && it->is_string()) {
    source = it->get<std::string>();
  } else if (it != cfg.end() && it->is_array()) {
    for (const auto& t : *it)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
          t["template"].is_string())
        source = t["template"].get<std::string>();
    if (source.empty()) return error{"tokenizer_config.json chat_template has no \"default\" entry"};
  } else if (!read_file(root / "chat_template.jinja", source)) {
    return error{"no chat_template in tokenizer_config.json and no chat_template.jinja"};
  }
  auto tmpl = chat_template::parse(source);
  if (!tmpl) return error{tmpl.error()};
  auto bpe = bpe_tokenizer::load_file((root / "tokenizer.json").string());
  if (!bpe) return error{bpe.error()};
  std::shared_ptr<prompt_tokenizer> p(new prompt_tokenizer());
  p->bpe_ = *bpe;
  p->template_ = *tmpl;
  p->clock_ = std::move(clock);
  for (const char* k : {"bos_token", "eos_token", "unk_token", "pad_token"})
    if (const auto* s = token_text(cfg, k)) p->strings_[k] = *s;
  // A probe render: a template that raises or misbehaves on one user message fails now.
  auto probe = p->tokenize("hello");
  if (!probe) return error{"probe render failed: " + probe.error()};
  if (probe->empty()) return error{"probe render produced no tokens"};
  return std::shared_ptr<const prompt_tokenizer>(std::move(p));
}

result<std::vector<std::uint32_t>> prompt_tokenizer::tokenize(std::string_view text) const {
  auto rendered = template_->render({{"user", std::string(text)}}, strings_, true, clock_);
  if (!rendered) return error{rendered.error()};
  return bpe_->encode(*rendered);
}

model_registry model_registry::load(const std::string& root, registry_report& report,
                                    const local_clock& clock) {
  model_registry out;
  std::error_code ec;
  const fs::path base(root);
  if (!fs::is_directory(base, ec)) {
    report.root_error = "not a readable directory: " + root;
    return out;
  }
  auto it = fs::recursive_directory_iterator(
      base, fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    report.root_error = ec.message();
    return out;
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      report.root_error = ec.message();
      break;
    }
    if (it.depth() >= 8) it.disable_recursion_pending();
    if (!it->is_directory(ec)) continue;
    const fs::path dir = it->path();
    if (!fs::exists(dir / "tokenizer.json") && !fs::exists(dir / "tokenizer_config.json") &&
        !has_tiktoken(dir))
      continue;
    const std::string id = fs::relative(dir, base, ec).generic_string();
    auto m = prompt_tokenizer::load_dir(dir.string(), clock);
    if (m) {
      out.models_[id] = *m;
      report.loaded.push_back(id);
    } else {
      report.failed.emplace_back(id, m.error());
    }
  }
  return out;
}

std::shared_ptr<const prompt_tokenizer> model_registry::find(const std::string& model_id) const {
  auto it = models_.find(model_id);
  return it == models_.end() ? nullptr : it->second;
}

}  // namespace ic::tokenizer
