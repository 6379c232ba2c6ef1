// Cross-checks RenderTemplate output against Debian's python3-jinja2 (pd-templates.md §3.2
// point 5): for bodies without `{%`, `{#`, `\r` and the `.` alias, and string variables,
// our text equals Jinja2's with keep_trailing_newline=True. Skipped (with the reason) when
// /usr/bin/python3 or its jinja2 module is missing.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "templates/template_store.hpp"

namespace ic::templates {
namespace {

namespace fs = std::filesystem;

constexpr const char* python = "/usr/bin/python3";  // the pyenv python3 on PATH has no apt modules

constexpr const char* render_script = R"(import json, sys
import jinja2
env = jinja2.Environment(keep_trailing_newline=True, autoescape=False)
cases = json.load(open(sys.argv[1], encoding="utf-8"))
out = [env.from_string(c["body"]).render(**c["vars"]) for c in cases]
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
)";

struct crosscheck_case {
  std::string body;
  std::vector<std::string> stable, mutable_slots;
  std::vector<std::pair<std::string, std::string>> vars;
};

std::vector<crosscheck_case> cases() {
  return {
      {"You are a helpful support agent for {{ product }}.\nConversation so far:\n{{ history }}\n",
       {"product"}, {"history"}, {{"product", "Acme"}, {"history", "user: hi\nassistant: hello"}}},
      {"{{ q }} — answer briefly.", {}, {"q"}, {{"q", "warum? ünïcödé ✓"}}},
      {"A {{ x }} B {{ x }}", {"x"}, {}, {{"x", "1"}}},
      {"a {{ '{{' }} b {{\"{{\"}} c }} d }}}", {}, {}, {}},
      {"{{product}}|{{  product  }}|{{\tproduct\t}}\n\n", {"product"}, {}, {{"product", "P"}}},
      {"optional: [{{ maybe }}]\n", {}, {"maybe"}, {}},
      {"literal values: {{ v }}", {"v"}, {}, {{"v", "{{ v }} {% if %} {# c #}"}}},
      {"no placeholders at all\n", {}, {}, {}},
      {"{{ _a1 }}{{B_2}}", {"_a1"}, {"B_2"}, {{"_a1", "x"}, {"B_2", "y"}}},
      {"  leading and trailing spaces {{ s }}  \n\n\n", {"s"}, {}, {{"s", "\t tab "}}},
  };
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JinjaCrosscheck, RendersEqualJinja2ForLogicLessBodies) {
  if (!fs::exists(python)) GTEST_SKIP() << python << " not installed";
  if (std::system((std::string(python) + " -c 'import jinja2' >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "python3-jinja2 not installed (scripts/install_deps.sh installs it)";
  }
  const auto all = cases();
  template_set set;
  nlohmann::json input = nlohmann::json::array();
  for (std::size_t i = 0; i < all.size(); ++i) {
    template_def t;
    t.namespace_name = "serving";
    t.name = "c" + std::to_string(100 + i);  // sorted in case order
    t.body = all[i].body;
    for (const auto& s : all[i].stable) t.slots.push_back({s, slot_type::stable, false, ""});
    for (const auto& s : all[i].mutable_slots) t.slots.push_back({s, slot_type::mutable_, false, ""});
    set.templates.push_back(std::move(t));
    nlohmann::json vars = nlohmann::json::object();
    for (const auto& [k, v] : all[i].vars) vars[k] = v;
    input.push_back({{"body", all[i].body}, {"vars", vars}});
  }
  template_snapshot snap(std::move(set));

  const fs::path dir = fs::temp_directory_path() / ("ic_jinja_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "render.py") << render_script;
  std::ofstream(dir / "in.json") << input.dump();
  const std::string cmd = std::string(python) + " " + (dir / "render.py").string() + " " +
                          (dir / "in.json").string() + " " + (dir / "out.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto expected = nlohmann::json::parse(slurp(dir / "out.json"));
  fs::remove_all(dir);
  ASSERT_EQ(expected.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto r = render(snap, {"c" + std::to_string(100 + i), all[i].vars, "serving"});
    ASSERT_EQ(r.reason_code, "OK") << all[i].body;
    EXPECT_EQ(r.rendered_prompt, expected[i].get<std::string>()) << "case " << i << ": " << all[i].body;
  }
}

}  // namespace
}  // namespace ic::templates
