// What every CLI verb shares: the global options, the gRPC and admin-HTTP connections, and
// the one mapping of failures to exit codes and one-line messages.
//
//   int run_x(const verb_env& env, ...) {
//     if (bad) return env.usage("--x must be positive");   // exit 2, one line
//     auto stub = env.stub(); if (!stub) return exit_rpc;    // message already printed
//     grpc::ClientContext ctx; env.set_deadline(ctx);
//     if (!st.ok()) return env.rpc_fail(st);                 // exit 1, "CODE: message"
//   }
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tools/cli/grpc_connect.hpp"
#include "tools/common/cli_parse.hpp"
#include "tools/common/http_client.hpp"

namespace ic::tools {

inline constexpr int exit_ok = 0;
inline constexpr int exit_rpc = 1;      ///< RPC failed, server refused, HTTP 4xx/5xx, not SERVING
inline constexpr int exit_no_hint = 3;  ///< --fail-on-no-hint and the answer carried no hint

/// Options every verb shares (before or after the verb).
struct global_options {
  connect_options conn;
  std::string timeout = "5s";                 ///< per-call deadline; default 5s
  std::string admin_addr = "127.0.0.1:8081";  ///< admin HTTP port (/policy, /topology, /templates)
  std::string token;                          ///< admin bearer token; default none
  std::string token_file;                     ///< file holding the bearer token; default none
};

/// What a verb needs to run: the global options and the verb's name for messages.
struct verb_env {
  const global_options* g = nullptr;
  std::string verb;

  /// "inferencecache VERB: msg (see --help)" on stderr; returns exit 2.
  int usage(const std::string& msg) const;
  /// "inferencecache VERB: msg" on stderr; returns exit 1.
  int fail(const std::string& msg) const;
  /// fail() with the gRPC status as "CODE: message".
  int rpc_fail(const grpc::Status& st) const;
  /// The --timeout value in seconds (validated once before any verb runs).
  double timeout_s() const;
  void set_deadline(grpc::ClientContext& ctx) const;
  /// Opens the channel; nullptr after printing the error.
  std::unique_ptr<inferencecache::v1alpha1::InferenceCache::Stub> stub() const;
  /// Sends `req` to --admin-addr with the bearer token (--token / --token-file). Returns -1
  /// when an HTTP answer is in `*res` (any status), else the exit code after printing the
  /// error (2: bad --admin-addr or unreadable token file; 1: no answer).
  int admin_call(http_request* req, http_response* res) const;
};

/// The gRPC status code's name ("UNAVAILABLE", ...).
const char* status_code_name(grpc::StatusCode c);

/// A verb's action, chosen by the subcommand that parsed (set from its CLI11 callback).
using verb_action = std::function<int(const verb_env&)>;

}  // namespace ic::tools
