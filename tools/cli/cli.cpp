#include <iostream>

#include "tools/cli/verbs.hpp"

namespace ic::tools {

int run_cli(int argc, char** argv) {
  CLI::App app{"inferencecache: command-line client for an InferenceCache server"};
  app.name("inferencecache");
  app.require_subcommand(1);
  app.fallthrough();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  global_options g;
  app.add_option("--addr", g.conn.addr, "gRPC address host:port")->capture_default_str();
  app.add_flag("--tls", g.conn.tls, "Use TLS for gRPC");
  app.add_option("--ca-file", g.conn.ca_file, "PEM root certificates for --tls");
  app.add_option("--timeout", g.timeout, "Per-call deadline (500ms, 5s, ...)")->capture_default_str();
  app.add_option("--admin-addr", g.admin_addr, "Admin HTTP address (policy, topology, templates)")
      ->capture_default_str();
  app.add_option("--token", g.token, "Admin bearer token");
  app.add_option("--token-file", g.token_file, "File holding the admin bearer token");

  verb_action action;
  add_query_verbs(app, &action);
  add_ingest_verbs(app, &action);
  add_stream_verbs(app, &action);
  add_admin_verbs(app, &action);

  if (auto code = parse_command_line(app, argc, argv, "inferencecache")) return *code;
  std::string err;
  if (!parse_seconds(g.timeout, &err)) {
    std::cerr << "inferencecache: --timeout: " << err << "\n";
    return exit_usage;
  }
  if (!parse_host_port(g.conn.addr, &err)) {
    std::cerr << "inferencecache: --addr: " << err << "\n";
    return exit_usage;
  }
  if (!action) {
    std::cerr << "inferencecache: no verb given (see --help)\n";
    return exit_usage;
  }
  verb_env env;
  env.g = &g;
  for (auto* sc : app.get_subcommands()) {
    env.verb = sc->get_name();
    for (auto* sub : sc->get_subcommands()) env.verb += " " + sub->get_name();
  }
  return action(env);
}

}  // namespace ic::tools
