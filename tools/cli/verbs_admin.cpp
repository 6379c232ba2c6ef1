// policy, topology, templates: the admin port's replace-on-write stores, one set of rules.
//
// push FILE|-: the body must be JSON (else exit 2, nothing sent); POST (or --method PUT);
// 204/200 → "<store> applied"; any other status → exit 1 with "HTTP <status>: <the server's
// one-line reason>". show (policy: get): GET → a table (topology, templates) or the
// pretty-printed JSON (policy, or --json).
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "tools/cli/format.hpp"
#include "tools/cli/verbs.hpp"

namespace ic::tools {
namespace {

/// One store on the admin port.
struct admin_store {
  std::string name;  ///< "policy", "topology", "templates"
  std::string path;  ///< "/policy", ...
  std::string (*table)(const std::string& body) = nullptr;  ///< nullptr: JSON only
};

int refused(const verb_env& env, const admin_store& s, const http_response& res) {
  std::string line = http_reason_line(res);
  if (res.status == 404) line += " (this server has no " + s.path + " endpoint)";
  return env.fail(line);
}

struct push_options {
  std::string file;
  std::string method = "POST";
};

int run_push(const verb_env& env, const admin_store& s, const push_options& o) {
  http_request req;
  std::string err;
  if (!read_file(o.file, &req.body, &err)) return env.usage(err);
  if (nlohmann::json::parse(req.body, nullptr, false).is_discarded())
    return env.usage(o.file + " is not valid JSON");
  req.method = o.method;
  req.path = s.path;
  req.headers.push_back({"Content-Type", "application/json"});
  http_response res;
  if (int rc = env.admin_call(&req, &res); rc >= 0) return rc;
  if (res.status == 204 || res.status == 200) {
    std::cout << s.name << " applied (HTTP " << res.status << ")\n";
    return exit_ok;
  }
  return refused(env, s, res);
}

int run_show(const verb_env& env, const admin_store& s, bool json) {
  http_request req;
  req.path = s.path;
  http_response res;
  if (int rc = env.admin_call(&req, &res); rc >= 0) return rc;
  if (res.status != 200) return refused(env, s, res);
  std::string table = (!json && s.table) ? s.table(res.body) : "";
  std::cout << (table.empty() ? pretty_json(res.body) + "\n" : table);
  return exit_ok;
}

void add_store(CLI::App& app, verb_action* action, const admin_store& s, const std::string& help,
               const std::string& show_verb) {
  auto* store = app.add_subcommand(s.name, help);
  store->require_subcommand(1);
  auto po = std::make_shared<push_options>();
  auto* push = store->add_subcommand("push", "Replace the " + s.path + " store with FILE or - (stdin)");
  push->add_option("file", po->file, "JSON body, '-' for stdin")->required();
  push->add_option("--method", po->method, "POST or PUT")
      ->check(CLI::IsMember({"POST", "PUT"}))
      ->capture_default_str();
  push->callback([action, po, s] {
    *action = [po, s](const verb_env& e) { return run_push(e, s, *po); };
  });
  auto json = std::make_shared<bool>(false);
  auto* show = store->add_subcommand(show_verb, "Print the stored " + s.path + " body");
  if (s.table) show->add_flag("--json", *json, "Print the server's JSON instead of the table");
  show->callback([action, json, s] {
    *action = [json, s](const verb_env& e) { return run_show(e, s, *json); };
  });
}

}  // namespace

void add_admin_verbs(CLI::App& app, verb_action* action) {
  add_store(app, action, {"policy", "/policy", nullptr},
            "Push or show the routing policy (admin HTTP port)", "get");
  add_store(app, action, {"topology", "/topology", format_topology_table},
            "Push or show the prefill/decode topologies (admin HTTP port)", "show");
  add_store(app, action, {"templates", "/templates", format_templates_table},
            "Push or show the prompt templates (admin HTTP port)", "show");
}

}  // namespace ic::tools
