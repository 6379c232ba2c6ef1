#include "state/tenant_state.hpp"

#include <algorithm>
#include <set>

namespace ic::state {

index::index_options tenant_index_options(const state_options& o, index::shared_facts* shared) {
  index::index_options io;
  io.max_entries = o.max_entries;
  io.default_ttl = o.default_ttl;
  io.shared = shared;
  io.external_cap = true;
  return io;
}

policy::result<policy_ptr> apply_policy_record(const policy::policy_store& base,
                                               std::string_view canonical_json) {
  auto set = policy::policy_store::from_bytes(canonical_json);
  if (!set.has_value()) return policy::error{set.error()};
  auto next = std::make_shared<policy::policy_store>(base);
  next->apply(set.value());
  return policy_ptr(std::move(next));
}

std::int64_t max_growth(const index::cache_state_update& u) {
  std::int64_t n = 0;
  for (const auto& p : u.prefixes)
    n += 1 + static_cast<std::int64_t>(p.block_hashes.size());
  return n;
}

namespace {

index::route_options route_options_of(const state_options& o) {
  index::route_options r;
  r.block_size = o.block_size > 0 ? o.block_size : index::default_block_size;
  return r;
}

lookup_outcome decide_on(const index::tenant_index* idx, std::int64_t total_keys,
                         const index::route_options& ro,
                         const index::lookup_route_request& request, index::micros now_us,
                         const policy::policy_store& policies,
                         const std::function<bool()>& expired) {
  const policy::resolved_policy pol = policies.resolve(request.tenant_id);
  index::route_plan plan = index::plan_route(request, pol, ro);
  if (plan.early) return {std::move(*plan.early), {}};
  index::route_decision decision = index::decide_route(idx, total_keys, request, plan, pol, now_us);
  if (expired && expired()) return {index::timeout_response(plan), {}};
  return {std::move(decision.response), std::move(decision.credit)};
}

}  // namespace

// ----------------------------------------------------------------------------- tenant_state

tenant_state::tenant_state(std::string tenant, const state_options& options,
                           index::shared_facts* shared, policy_ptr policies)
    : tenant_state(std::move(tenant),
                   std::make_unique<index::tenant_index>(tenant, tenant_index_options(options, shared)),
                   options, std::move(policies)) {}

tenant_state::tenant_state(std::string tenant, std::unique_ptr<index::tenant_index> idx,
                           const state_options& options, policy_ptr policies)
    : tenant_(std::move(tenant)), index_(std::move(idx)), route_options_(route_options_of(options)) {
  set_policies(std::move(policies));
}

apply_outcome tenant_state::apply(const proto::decoded_record& record, index::micros at,
                                  index::change_log* changes) {
  apply_outcome out;
  out.cap_ts = at;
  if (const auto* u = std::get_if<index::cache_state_update>(&record.payload)) {
    out.ingest = ingest(*u, at, changes);
    out.cap_ts = index::effective_time(*u, at);
  } else if (const auto* e = std::get_if<index::cache_event>(&record.payload)) {
    out.event = apply_event(*e, at, changes);
  } else if (const auto* c = std::get_if<proto::credit_record>(&record.payload)) {
    for (const auto& credit : c->credits)
      if (credit.tenant == tenant_) index_->credit_named(credit.hit, credit.count);
  } else {
    out.ok = false;
    out.error = "not a per-tenant record";
  }
  return out;
}

index::ingest_result tenant_state::ingest(const index::cache_state_update& u, index::micros at,
                                          index::change_log* changes,
                                          index::input_origin origin) {
  return index_->ingest(u, at, changes, origin);
}

index::event_result tenant_state::apply_event(const index::cache_event& e, index::micros at,
                                              index::change_log* changes) {
  return index_->apply_event(e, at, changes);
}

bool tenant_state::sweep_step(index::micros at, index::tenant_index::sweep_cursor& cursor,
                              std::size_t max_keys, index::change_log* changes,
                              index::sweep_result& result) {
  return index_->sweep_step(at, cursor, max_keys, changes, result);
}

void tenant_state::set_policies(policy_ptr policies) {
  policies_ = std::move(policies);
  index_->set_policy(policies_->resolve(tenant_));
  index_->set_quota(policies_->quota(tenant_));
}

void tenant_state::credit(const std::vector<index::scored_replica>& hits) {
  if (!hits.empty()) index_->credit_lfu(hits);
}

void tenant_state::collect_credit(const std::vector<index::scored_replica>& hits,
                                  credit_batch& batch) const {
  batch.add_hits(tenant_, *index_, hits);
}

probe_outcome tenant_state::probe(const probe_request& request, index::micros now) {
  return run_probe(*index_, request, now);
}

lookup_outcome tenant_state::decide(const index::lookup_route_request& request,
                                    index::micros now_us,
                                    const std::function<bool()>& expired) const {
  return decide_on(index_.get(), index::total_keys_of(*index_), route_options_, request, now_us,
                   *policies_, expired);
}

index::cache_state_view tenant_state::cache_state(const std::string& model) const {
  return index_->get_cache_state(model);
}

topology::pd_route_response tenant_state::decide_pd(
    const topology::pd_route_request& request, const topology::topology_snapshot& topologies,
    const topology::clock& clock, std::optional<index::micros> deadline_us) const {
  const topology::index_pd_view view(index_.get(), index::total_keys_of(*index_));
  return topology::select_pd_route(request, topologies, policies_->resolve(tenant_), view, clock,
                                   deadline_us);
}

// ---------------------------------------------------------------------------- absent_tenant

absent_tenant::absent_tenant(const state_options& options, index::shared_facts* shared)
    : shared_(shared), route_options_(route_options_of(options)) {}

lookup_outcome absent_tenant::decide(const index::lookup_route_request& request,
                                     index::micros now_us,
                                     const policy::policy_store& policies) const {
  const std::int64_t total_keys =
      shared_ != nullptr ? shared_->total_keys.load(std::memory_order_acquire) : 0;
  return decide_on(nullptr, total_keys, route_options_, request, now_us, policies, {});
}

topology::pd_route_response absent_tenant::decide_pd(
    const topology::pd_route_request& request, const topology::topology_snapshot& topologies,
    const policy::policy_store& policies, const topology::clock& clock,
    std::optional<index::micros> deadline_us) const {
  const std::int64_t total_keys =
      shared_ != nullptr ? shared_->total_keys.load(std::memory_order_acquire) : 0;
  const topology::index_pd_view view(nullptr, total_keys);
  return topology::select_pd_route(request, topologies, policies.resolve(request.tenant_id), view,
                                   clock, deadline_us);
}

// -------------------------------------------------------------------------------- cap merge

std::int64_t cap_excess(const index::shared_facts& facts, std::int64_t max_entries) {
  if (max_entries <= 0) return 0;
  const auto over = facts.nonreserved_entries.load() - max_entries;
  return over > 0 ? over : 0;
}

void enforce_cap(const std::vector<tenant_state*>& tenants, const index::shared_facts& facts,
                 std::int64_t max_entries, index::micros ts, index::change_log* changes,
                 index::ingest_result& result) {
  std::vector<std::optional<index::cap_head>> heads(tenants.size());
  for (std::int64_t excess = cap_excess(facts, max_entries); excess > 0;
       excess = cap_excess(facts, max_entries)) {
    for (std::size_t i = 0; i < tenants.size(); ++i) heads[i] = tenants[i]->cap_victim();
    const index::cap_step step = index::pick_cap_step(heads);
    if (step.best == index::cap_step::none) return;
    if (tenants[step.best]->evict_cap(step.bound, excess, ts, changes, result) == 0) return;
  }
}

// --------------------------------------------------------------------------------- tenant_set

tenant_set::tenant_set(state_options options)
    : options_(options),
      facts_(std::make_shared<index::shared_facts>()),
      policies_(std::make_shared<policy::policy_store>(options.default_ttl)),
      stores_(std::make_shared<pushed_stores>()),
      absent_(options, facts_.get()) {}

tenant_state* tenant_set::find(const std::string& tenant) {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? nullptr : it->second.get();
}

tenant_state& tenant_set::get_or_create(const std::string& tenant) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end())
    it = tenants_
             .emplace(tenant, std::make_unique<tenant_state>(tenant, options_, facts_.get(),
                                                             policies_))
             .first;
  return *it->second;
}

void tenant_set::adopt(std::unique_ptr<tenant_state> t) {
  std::string name = t->tenant();
  t->set_policies(policies_);
  tenants_.insert_or_assign(std::move(name), std::move(t));
}

void tenant_set::set_policies(policy_ptr policies) {
  policies_ = std::move(policies);
  for (auto& [_, t] : tenants_) t->set_policies(policies_);
}

std::map<std::string, std::unique_ptr<tenant_state>> tenant_set::release() {
  return std::move(tenants_);
}

apply_outcome tenant_set::apply(const proto::decoded_record& record, index::change_log* changes) {
  apply_outcome out;
  const index::micros at = clock_.advance(record.applied_at_us);
  std::visit(
      [&](const auto& payload) {
        using T = std::decay_t<decltype(payload)>;
        if constexpr (std::is_same_v<T, index::cache_state_update>) {
          out = get_or_create(payload.tenant_id).apply(record, at, changes);
          if (cap_excess(*facts_, options_.max_entries) > 0) {
            std::vector<tenant_state*> all;
            for (auto& [_, x] : tenants_) all.push_back(x.get());
            enforce_cap(all, *facts_, options_.max_entries, out.cap_ts, changes, out.ingest);
          }
        } else if constexpr (std::is_same_v<T, index::cache_event>) {
          if (auto* t = find(payload.tenant_id)) {
            out = t->apply(record, at, changes);
          } else {
            out.event.applied = true;  // nothing of this tenant is held
          }
        } else if constexpr (std::is_same_v<T, proto::policy_record>) {
          auto next = apply_policy_record(*policies_, payload.canonical_json);
          if (!next.has_value()) {
            out.ok = false;
            out.error = next.error();
            return;
          }
          set_policies(std::move(next).value());
        } else if constexpr (std::is_same_v<T, proto::credit_record>) {
          for (const auto& [name, part] : credits_by_tenant(payload)) {
            if (auto* t = find(name)) t->apply(proto::decoded_record{at, part}, at, changes);
          }
        } else if constexpr (std::is_same_v<T, proto::topology_record> ||
                             std::is_same_v<T, proto::templates_record>) {
          out.ok = apply_store_record(*stores_, record, &out.error);
        } else {
          static_assert(std::is_same_v<T, proto::sweep_record>, "a record kind without a rule");
          for (auto& [_, t] : tenants_) {
            index::tenant_index::sweep_cursor cursor;
            while (!t->sweep_step(at, cursor, std::size_t{1} << 30, changes, out.sweep)) {
            }
          }
        }
      },
      record.payload);
  return out;
}

index::lookup_route_response tenant_set::lookup(const index::lookup_route_request& request,
                                                index::micros now_us,
                                                const std::function<bool()>& expired) {
  tenant_state* t = find(request.tenant_id);
  if (t == nullptr) return absent_.decide(request, now_us, *policies_).response;
  lookup_outcome out = t->decide(request, now_us, expired);
  t->credit(out.credit);
  return std::move(out.response);
}

namespace {
std::vector<const tenant_state*> all_of(
    const std::map<std::string, std::unique_ptr<tenant_state>>& m) {
  std::vector<const tenant_state*> v;
  for (const auto& [_, t] : m) v.push_back(t.get());
  return v;
}
}  // namespace

index::snapshot_view tenant_set::snapshot() const { return merge_snapshots(all_of(tenants_)); }

std::vector<std::string> tenant_set::canonical_dump() const {
  return merge_dumps(all_of(tenants_), *facts_);
}

// ------------------------------------------------------------------------------ merged views

index::snapshot_view merge_snapshots(const std::vector<const tenant_state*>& tenants) {
  index::snapshot_view out;
  for (const auto* t : tenants) out += t->index().snapshot();
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> merge_entries_by_model(
    const std::vector<const tenant_state*>& tenants) {
  std::map<std::string, std::int64_t> m;
  for (const auto* t : tenants)
    for (auto& [model, n] : t->index().entries_by_model()) m[model] += n;
  return {m.begin(), m.end()};
}

std::vector<std::string> merge_dumps(const std::vector<const tenant_state*>& tenants,
                                     const index::shared_facts& facts) {
  std::vector<const index::tenant_index*> indexes;
  for (const auto* t : tenants) indexes.push_back(&t->index());
  return index::merged_dump(indexes, index::index_facts{facts.total_entries.load(),
                                                        facts.reserved_entries.load(),
                                                        facts.total_keys.load()});
}

}  // namespace ic::state
