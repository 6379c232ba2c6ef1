// inferencecache: the command-line client for an InferenceCache server.
//
// Verbs: lookup, pd-route, render, report, evict, clear, state, watch, metrics,
// policy push|get, topology push|show, templates push|show, health (tools/cli/verbs.hpp).
// Exit codes: 0 ok, 1 RPC or server error, 2 usage error, 3 no hint (only with
// --fail-on-no-hint). Errors are one line on stderr. See tools/README.md for examples.
#include "tools/cli/verbs.hpp"

int main(int argc, char** argv) { return ic::tools::run_cli(argc, argv); }
