#include "state/probe.hpp"

#include <algorithm>

#include <openssl/evp.h>

namespace ic::state {
namespace {

constexpr std::string_view probe_marker = "inferencecache.io/probe/v1\n";

void append_field(std::string& out, std::string_view field) {
  const auto n = static_cast<std::uint32_t>(field.size());
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(field);
}

/// Removes the probe replica (entries and stats row) from the reserved tenant.
void clear_probe_replica(index::tenant_index& index, const probe_request& request,
                         const std::string& replica, index::micros now) {
  index::cache_event clear;
  clear.type = static_cast<std::int32_t>(index::event_type::all_cleared);
  clear.replica_id = replica;
  clear.model_id = request.model;
  clear.tenant_id = std::string(index::reserved_tenant);
  index.apply_event(clear, now, nullptr, index::input_origin::probe);
}

}  // namespace

std::string_view to_string(probe_stage_result r) {
  switch (r) {
    case probe_stage_result::ok: return "ok";
    case probe_stage_result::failed: return "failed";
    case probe_stage_result::skipped: return "skipped";
  }
  return "failed";
}

std::string probe_replica_id(std::string_view backend) {
  return "__probe-" + std::string(backend);
}

std::string probe_hash(const probe_request& request) {
  std::string input(probe_marker);
  append_field(input, request.hash_scheme);
  append_field(input, request.model);
  append_field(input, request.backend);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), len);
}

probe_outcome run_probe(index::tenant_index& index, const probe_request& request,
                        index::micros now) {
  probe_outcome out;
  out.backend = request.backend;
  const std::string replica = probe_replica_id(request.backend);
  const std::string hash = probe_hash(request);
  const std::string tenant(index::reserved_tenant);

  // Stage A: ingest one chain entry plus stats, then read the entry back.
  index::cache_state_update update;
  update.replica_id = replica;
  update.model_id = request.model;
  update.tenant_id = tenant;
  update.hash_scheme = request.hash_scheme;
  index::prefix_entry entry;
  entry.block_hashes = {hash};
  entry.block_token_counts = {probe_block_tokens};
  update.prefixes.push_back(std::move(entry));
  index::replica_stats stats;
  stats.replica_id = replica;
  stats.hit_rate = 1.0f;
  update.stats = stats;
  index.ingest(update, now, nullptr, index::input_origin::probe);

  if (!index.find_entry(request.model, request.hash_scheme, "", hash, replica)) {
    out.ingest = probe_stage_result::failed;
    out.errors.push_back({"ingest", "probe entry for replica " + replica +
                                        " not found in the index after ingest"});
    clear_probe_replica(index, request, replica, now);
    return out;
  }
  out.ingest = probe_stage_result::ok;

  // Stage B: the index's own route lookup on the same chain.
  index::index_lookup_request lookup;
  lookup.tenant = tenant;
  lookup.model = request.model;
  lookup.hash_scheme = request.hash_scheme;
  lookup.chain_hashes = {hash};
  lookup.chain_counts = {probe_block_tokens};
  const auto policy = policy::resolved_policy::no_policy(index.options().default_ttl);
  const auto result =
      index::lookup_tenant(&index, index::total_keys_of(index), lookup, policy, now);
  if (result.strategy != index::lookup_strategy::prefix_match) {
    out.routing = probe_stage_result::failed;
    out.errors.push_back({"routing", "lookup answered " +
                                         std::string(index::reason_code_of(result.strategy)) +
                                         ", want PREFIX_MATCH"});
  } else if (std::none_of(result.scores.begin(), result.scores.end(), [&](const auto& s) {
               return s.score.replica_id == replica;
             })) {
    out.routing = probe_stage_result::failed;
    out.errors.push_back(
        {"routing", "PREFIX_MATCH did not include the probe replica " + replica});
  } else {
    out.routing = probe_stage_result::ok;
  }

  // Stage C: no tier-2 prober is wired, so t2 is skipped whatever backendType says.
  out.t2 = probe_stage_result::skipped;

  clear_probe_replica(index, request, replica, now);
  return out;
}

}  // namespace ic::state
