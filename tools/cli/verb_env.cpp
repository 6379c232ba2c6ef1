#include "tools/cli/verb_env.hpp"

#include <cctype>
#include <chrono>
#include <iostream>

namespace ic::tools {

namespace v1 = inferencecache::v1alpha1;

int verb_env::usage(const std::string& msg) const {
  std::cerr << "inferencecache " << verb << ": " << msg << " (see --help)\n";
  return exit_usage;
}

int verb_env::fail(const std::string& msg) const {
  std::cerr << "inferencecache " << verb << ": " << msg << "\n";
  return exit_rpc;
}

int verb_env::rpc_fail(const grpc::Status& st) const {
  return fail(std::string(status_code_name(st.error_code())) + ": " + st.error_message());
}

const char* status_code_name(grpc::StatusCode c) {
  static const char* names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                "UNAUTHENTICATED"};
  int i = static_cast<int>(c);
  return i >= 0 && i <= 16 ? names[i] : "UNKNOWN";
}

double verb_env::timeout_s() const {
  std::string err;
  return parse_seconds(g->timeout, &err).value_or(5.0);
}

void verb_env::set_deadline(grpc::ClientContext& ctx) const {
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<long>(timeout_s() * 1000)));
}

std::unique_ptr<v1::InferenceCache::Stub> verb_env::stub() const {
  std::string err;
  auto ch = make_channel(g->conn, &err);
  if (!ch) {
    fail(err);
    return nullptr;
  }
  return v1::InferenceCache::NewStub(ch);
}

int verb_env::admin_call(http_request* req, http_response* res) const {
  std::string err;
  auto target = parse_host_port(g->admin_addr, &err);
  if (!target) return usage("--admin-addr: " + err);
  std::string token = g->token;
  if (!g->token_file.empty() && !read_token_file(g->token_file, &token, &err)) return usage(err);
  add_bearer(token, req);
  *res = http_call(*target, *req, timeout_s());
  if (!res->error.empty()) return fail(g->admin_addr + ": " + res->error);
  return -1;
}

}  // namespace ic::tools
