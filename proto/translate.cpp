#include "proto/translate.hpp"

namespace ic::proto {

index::cache_state_update from_proto(const v1::CacheStateUpdate& m) {
  index::cache_state_update u;
  u.replica_id = m.replica_id();
  u.model_id = m.model_id();
  u.tenant_id = m.tenant_id();
  u.hash_scheme = m.hash_scheme();
  u.timestamp_us = m.timestamp_us();
  u.adapter_id = m.adapter_id();
  u.prefixes.reserve(static_cast<std::size_t>(m.prefixes_size()));
  for (const auto& p : m.prefixes()) {
    index::prefix_entry e;
    e.prefix_hash = p.prefix_hash();
    e.token_count = p.token_count();
    e.block_hashes.assign(p.block_hashes().begin(), p.block_hashes().end());
    e.block_token_counts.assign(p.block_token_counts().begin(), p.block_token_counts().end());
    e.tier = p.tier();
    e.adapter_id = p.adapter_id();
    u.prefixes.push_back(std::move(e));
  }
  if (m.has_stats()) {
    const auto& s = m.stats();
    index::replica_stats st;
    st.replica_id = s.replica_id();
    st.cache_memory_bytes = s.cache_memory_bytes();
    st.hit_rate = s.hit_rate();
    st.pressure = s.pressure();
    st.client_version = s.client_version();
    st.t2_hit_tokens = s.t2_hit_tokens();
    st.t2_query_tokens = s.t2_query_tokens();
    u.stats = std::move(st);
  }
  return u;
}

index::cache_event from_proto(const v1::CacheEvent& m) {
  index::cache_event e;
  e.type = m.type();
  e.replica_id = m.replica_id();
  e.model_id = m.model_id();
  e.tenant_id = m.tenant_id();
  e.prefix_hash = m.prefix_hash();
  e.timestamp_us = m.timestamp_us();
  e.adapter_id = m.adapter_id();
  return e;
}

index::lookup_route_request from_proto(const v1::LookupRouteRequest& m) {
  index::lookup_route_request r;
  r.model_id = m.model_id();
  r.tenant_id = m.tenant_id();
  r.prefix_hash = m.prefix_hash();
  r.prefix_token_count = m.prefix_token_count();
  r.hash_scheme = m.hash_scheme();
  if (m.has_slo()) r.slo_target = index::slo{m.slo().ttft_ms(), m.slo().tbt_ms()};
  r.block_hashes.assign(m.block_hashes().begin(), m.block_hashes().end());
  r.block_token_counts.assign(m.block_token_counts().begin(), m.block_token_counts().end());
  r.token_ids.assign(m.token_ids().begin(), m.token_ids().end());
  r.prompt_text = m.prompt_text();
  r.adapter_id = m.adapter_id();
  return r;
}

void to_proto(const index::lookup_route_response& r, v1::LookupRouteResponse* out) {
  out->mutable_replica_scores()->Reserve(static_cast<int>(r.replica_scores.size()));
  for (const auto& s : r.replica_scores) {
    auto* p = out->add_replica_scores();
    p->set_replica_id(s.replica_id);
    p->set_score(s.score);
    p->set_matched_tokens(s.matched_tokens);
    p->set_estimated_cache_hit_prob(s.estimated_cache_hit_prob);
    p->set_tier(static_cast<v1::CacheTier>(s.tier));
  }
  out->set_reason_code(r.reason_code);
  out->set_lookup_latency_us(r.lookup_latency_us);
  out->mutable_token_ids()->Add(r.token_ids.begin(), r.token_ids.end());
  out->set_adapter_id(r.adapter_id);
}

void to_proto(const index::cache_state_view& v, v1::GetCacheStateResponse* out) {
  for (const auto& s : v.replicas) {
    auto* p = out->add_replicas();
    p->set_replica_id(s.replica_id);
    p->set_cache_memory_bytes(s.cache_memory_bytes);
    p->set_hit_rate(s.hit_rate);
    p->set_pressure(s.pressure);
    p->set_t2_hit_tokens(s.t2_hit_tokens);
    p->set_t2_query_tokens(s.t2_query_tokens);
  }
  out->mutable_summary()->set_total_prefixes(v.total_prefixes);
  out->mutable_summary()->set_hot_prefixes(v.hot_prefixes);
}

void to_proto(const index::cache_change& c, v1::CacheEvent* out) {
  out->set_type(static_cast<v1::CacheEvent::Type>(c.type));
  out->set_replica_id(std::string(c.replica_id));
  out->set_model_id(std::string(c.model_id));
  out->set_tenant_id(std::string(c.tenant_id));
  out->set_prefix_hash(c.prefix_hash);
  out->set_timestamp_us(c.timestamp_us);
  out->set_adapter_id(std::string(c.adapter_id));
}

}  // namespace ic::proto
