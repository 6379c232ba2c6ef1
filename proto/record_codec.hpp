// The journal record codec: what one journaled input looks like as bytes, and back.
//
// A record is `inferencecache.journal.v1.Record` (proto/inferencecache/journal/v1/
// journal.proto): the time it was first applied plus exactly one payload. The journal's
// record type tag says which payload (`record_kind`). Encoding embeds the producer's
// already-serialized message bytes, so the live path never re-encodes what it received;
// decoding yields the index's plain structs, which the tenant actors apply live and
// `tenant_set` applies on replay (state/tenant_state.hpp). Target `ic_journal_codec`
// (protobuf, no CAF): the journal inspector links it alone.
//
//   std::string bytes = encode_record(record_kind::update, now_us, update_proto_bytes);
//   auto rec = decode_record(record_kind::update, bytes);   // -> decoded_record or error
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "index/types.hpp"

namespace ic::proto {

/// Journal record type tags. Numbered forever: never renumber or reuse one.
enum class record_kind : std::uint32_t {
  update = 1,  ///< one ReportCacheState message (CacheStateUpdate)
  event = 2,   ///< one PublishEvent request (CacheEvent)
  policy = 3,  ///< one accepted /policy push (canonical JSON)
  sweep = 4,   ///< one periodic TTL sweep
  // Controller-pushed stores, numbered apart (pd-templates.md §2.2, §3.1).
  topology = 16,   ///< one accepted /topology push (canonical JSON)
  templates = 17,  ///< one accepted /templates push (canonical JSON)
  lfu_credits = 18,  ///< one replica's LFU credits of one interval (JetStream, LfuCredits)
};

/// A policy push as journaled: the canonical JSON of the accepted set.
struct policy_record {
  std::string canonical_json;
};

/// A TTL sweep as journaled (it carries only the record's time).
struct sweep_record {};

/// A /topology push as journaled: `encode_topology_set` of the accepted set.
struct topology_record {
  std::string canonical_json;
};

/// A /templates push as journaled: `encode_template_set` of the accepted set.
struct templates_record {
  std::string canonical_json;
};

/// LFU credits of one entry (journaled in batches, spec/scaleout.md §3.4).
struct lfu_credit {
  std::string tenant;
  index::named_hit hit;
  std::uint32_t count = 0;
};

/// One replica's LFU credits of one interval, as journaled.
struct credit_record {
  std::vector<lfu_credit> credits;
};

/// One decoded record: when it was applied and what it carried.
struct decoded_record {
  index::micros applied_at_us = 0;
  std::variant<index::cache_state_update, index::cache_event, policy_record, sweep_record,
               topology_record, templates_record, credit_record>
      payload;
};

/// Returns the LfuCredits message bytes of `credits` (the payload of encode_record for
/// record_kind::lfu_credits).
std::string encode_credits(const std::vector<lfu_credit>& credits);

/// Returns the record bytes for `kind` with an already-serialized payload message
/// (CacheStateUpdate / CacheEvent bytes; canonical policy / topology / templates JSON;
/// empty for a sweep; LfuCredits bytes, encode_credits).
std::string encode_record(record_kind kind, index::micros applied_at_us, std::string_view payload);

/// Returns the name of a record type tag ("update", "event", "policy", "sweep",
/// "topology", "templates"), or "unknown" for any other tag.
const char* kind_name(std::uint32_t kind);

/// Decodes one record; nullopt with `error` set when the bytes or the kind are not valid.
std::optional<decoded_record> decode_record(std::uint32_t kind, std::string_view bytes,
                                            std::string* error = nullptr);

}  // namespace ic::proto
