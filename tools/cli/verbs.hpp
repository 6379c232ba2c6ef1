// The CLI's verbs, grouped by concern; each group registers its subcommands on the app and,
// from the subcommand's callback, sets the action main runs (cli.cpp).
//
//   verbs_query.cpp   lookup, pd-route, render, state, health   (unary gRPC questions)
//   verbs_ingest.cpp  report, evict, clear                      (what replicas hold)
//   verbs_stream.cpp  watch, metrics                            (server streams)
//   verbs_admin.cpp   policy, topology, templates               (admin HTTP port stores)
#pragma once

#include <CLI/CLI.hpp>

#include "tools/cli/verb_env.hpp"

namespace ic::tools {

void add_query_verbs(CLI::App& app, verb_action* action);
void add_ingest_verbs(CLI::App& app, verb_action* action);
void add_stream_verbs(CLI::App& app, verb_action* action);
void add_admin_verbs(CLI::App& app, verb_action* action);

/// Parses the command line, runs the verb and returns the exit code (main's whole body).
int run_cli(int argc, char** argv);

}  // namespace ic::tools
