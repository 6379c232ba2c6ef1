// The controller-pushed stores on the admin port: /policy, /topology and /templates
// (spec/operations.md §2, pd-templates.md §2.2, §3.1), one push path for all three.
//
// Each store is a row of `store_routes()`: how a body decodes to its canonical journal
// payload, what is stored now, and the GET body. `push_store_body` is the one push rule
// (the HTTP route and the startup `--*-file` flag both call it): decode strictly (400 with
// the decoder's one line, nothing changes), skip a push equal to the stored set (the
// controller re-pushes every 30 s), else journal the payload and wait until it is applied
// (204 once visible; 503 when the journal refuses it or the index does not answer; 409
// when, in JetStream mode, another replica's policy push came first: spec/scaleout.md
// §3.4, the journal's compare-and-set on the policy subject).
//
//   const store_route& topo = store_route_of(actors::record_kind::topology);
//   push_outcome out = push_store_body(topo, body, runtime);     // {204|400|503, message}
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "actors/runtime.hpp"
#include "policy/result.hpp"

namespace ic::server {

/// One pushed store.
struct store_route {
  /// "policy" | "topology" | "templates" (path, log events and metric label).
  const char* name;
  /// The journal record kind of an accepted push.
  actors::record_kind kind;
  /// Largest accepted body.
  std::size_t max_body_bytes;
  /// The 400 line of a body over `max_body_bytes` (the HTTP server did not keep it).
  const char* too_large_message;
  /// The `Allow` header of a 405.
  const char* allow;
  /// Decodes a pushed body to its canonical journal payload, or the one-line error.
  std::function<policy::result<std::string>(const std::string& body)> canonical;
  /// The canonical payload in force (compared with a push to skip no-op pushes).
  std::function<std::string(const actors::runtime&)> stored;
  /// The GET body (canonical JSON, without the trailing newline).
  std::function<std::string(const actors::runtime&)> listing;
};

/// The three stores, in a fixed order (policy, topology, templates).
const std::vector<store_route>& store_routes();
/// Returns the row of `kind` (precondition: one of the three).
const store_route& store_route_of(actors::record_kind kind);

/// Outcome of one push.
struct push_outcome {
  int status;  ///< 204, 400, 409 or 503
  std::string message;
  /// Push metric label: "ok" | "invalid" | "conflict" | "journal_unavailable".
  const char* result() const {
    return status == 204   ? "ok"
           : status == 400 ? "invalid"
           : status == 409 ? "conflict"
                           : "journal_unavailable";
  }
};

/// Applies one pushed body (see the file comment); `rt` nullptr = still recovering (503).
push_outcome push_store_body(const store_route& store, const std::string& body,
                             actors::runtime* rt);

}  // namespace ic::server
