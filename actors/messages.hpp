// CAF-free types that cross the boundary between the actors and their callers (the gRPC
// gateway, the HTTP endpoints, the composition root). Callers never see CAF: they use
// `actors::runtime` (actors/runtime.hpp) with these types.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "index/types.hpp"

namespace ic::actors {

/// Ack reason codes (spec/extensions.md §4) that the runtime itself produces.
namespace ack_reason {
inline constexpr const char* journal_unavailable = "JOURNAL_UNAVAILABLE";
inline constexpr const char* shutting_down = "SHUTTING_DOWN";
/// A policy push lost its compare-and-set in JetStream mode (another replica's push came
/// first, spec/scaleout.md §3.4); internal to the admin routes (HTTP 409), never a gRPC Ack.
inline constexpr const char* conflict = "CONFLICT";
}  // namespace ack_reason

/// The outcome of one journaled input, delivered after it was applied (or refused).
struct append_result {
  /// False only for JOURNAL_UNAVAILABLE and SHUTTING_DOWN (nothing was applied).
  bool accepted = true;
  /// "" when everything was applied; else the drop or refusal reason.
  std::string reason_code;
  /// Journal sequence number of the record (0 when refused).
  std::uint64_t seq = 0;
};

/// Receives append results, once per appended record; `slot` is the caller's own tag for
/// the record. Results arrive from the tenant actors (records of different tenants are
/// applied concurrently, each tenant's in append order) or, for refusals
/// (JOURNAL_UNAVAILABLE, SHUTTING_DOWN), from the journal actor or the caller's thread, and
/// may arrive concurrently: order them by `slot`, not by arrival.
class append_sink {
 public:
  virtual ~append_sink() = default;
  virtual void on_applied(std::size_t slot, const append_result& result) = 0;
};

/// Which changes a StreamCacheEvents subscriber wants (empty = any).
struct event_filter {
  std::string tenant_id;
  std::string model_id;
  std::vector<std::int32_t> types;

  /// Returns true when `c` passes every set criterion.
  bool matches(const index::cache_change& c) const {
    if (!tenant_id.empty() && c.tenant_id != tenant_id) return false;
    if (!model_id.empty() && c.model_id != model_id) return false;
    if (types.empty()) return true;
    for (auto t : types)
      if (t == static_cast<std::int32_t>(c.type)) return true;
    return false;
  }
};

/// An observer of index changes (one per StreamCacheEvents call).
class event_subscriber {
 public:
  explicit event_subscriber(event_filter filter) : filter_(std::move(filter)) {}
  virtual ~event_subscriber() = default;

  /// Takes one matching change; runs on the thread of the tenant actor that made it (several
  /// tenants may offer concurrently) and must not block.
  /// Returns false once the subscriber is gone (it is then dropped).
  virtual bool offer(const index::cache_change& change) = 0;

  /// False once the subscriber ended (client gone, stream closed): it is dropped even when
  /// no matching change arrives. Called on tenant actors' threads.
  virtual bool alive() const { return true; }

  /// True when it ended because it fell behind its buffer (counted in the metrics).
  virtual bool overflowed() const { return false; }

  /// Ends the subscription because the index was replaced as a whole (a reload from a
  /// shared snapshot after a stream gap): the changes in between were never applied here
  /// one by one, so the stream ends with `why` instead of going on silently.
  virtual void end(const std::string& /*why*/) {}

  const event_filter& filter() const { return filter_; }

 private:
  event_filter filter_;
};

/// A StreamCacheEvents subscriber as the runtime holds it.
using subscriber_ptr = std::shared_ptr<event_subscriber>;

/// Observes the runtime for metrics and logs (implemented by the composition root).
class runtime_probe {
 public:
  virtual ~runtime_probe() = default;
  /// One ReportCacheState message applied.
  virtual void on_ingest(const std::string& /*tenant*/, const index::ingest_result&) {}
  /// One TTL sweep applied, with the tenants' algorithms folded into the counts.
  virtual void on_sweep(const index::sweep_result&) {}
  /// One journal write of `records` records; `ok` false when it failed.
  virtual void on_journal_write(bool /*ok*/, std::size_t /*records*/) {}
  /// One StreamCacheEvents subscriber cut off for falling behind.
  virtual void on_subscriber_dropped() {}
};

}  // namespace ic::actors
