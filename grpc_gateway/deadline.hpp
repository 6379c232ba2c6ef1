// The gateway's deadline rule (design.md "Gateway"; spec/lookup.md H1, pd-templates.md S1):
// an ask is bounded by min(client deadline, start + the tenant's lookupTimeoutMs).
#pragma once

#include <chrono>
#include <optional>

#include <grpcpp/server_context.h>

#include "policy/resolved_policy.hpp"

namespace ic::grpc_gateway {

/// Converts the client's deadline (system clock; max() when none) to the steady clock.
inline std::optional<std::chrono::steady_clock::time_point> client_deadline(
    const grpc::CallbackServerContext* ctx) {
  auto dl = ctx->deadline();
  if (dl == std::chrono::system_clock::time_point::max()) return std::nullopt;
  auto left = dl - std::chrono::system_clock::now();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

/// Returns min(client deadline, start + `policy.lookup_timeout_ms` when > 0); nullopt when
/// neither bounds the call.
inline std::optional<std::chrono::steady_clock::time_point> lookup_deadline(
    const grpc::CallbackServerContext* ctx, std::chrono::steady_clock::time_point start,
    const policy::resolved_policy& policy) {
  auto deadline = client_deadline(ctx);
  if (policy.lookup_timeout_ms > 0) {
    auto budget = start + std::chrono::milliseconds(policy.lookup_timeout_ms);
    deadline = deadline ? std::min(*deadline, budget) : budget;
  }
  return deadline;
}

}  // namespace ic::grpc_gateway
