#include "state/credit_batch.hpp"

#include <limits>

#include "index/tenant_index.hpp"

namespace ic::state {

namespace {
void add_saturating(std::uint32_t& counter, std::uint32_t count) {
  constexpr std::uint32_t max = std::numeric_limits<std::uint32_t>::max();
  counter = count > max - counter ? max : counter + count;
}
}  // namespace

std::uint32_t* credit_batch::add_locked(key k, std::uint32_t count) {
  auto it = counts_.find(k);
  if (it == counts_.end()) {
    if (counts_.size() >= max_) {
      ++dropped_;
      return nullptr;
    }
    return &counts_.emplace(std::move(k), count).first->second;
  }
  add_saturating(it->second, count);
  return &it->second;
}

void credit_batch::add(const std::string& tenant, index::named_hit hit, std::uint32_t count) {
  std::lock_guard<std::mutex> lk(mu_);
  add_locked(std::make_pair(tenant, std::move(hit)), count);
}

void credit_batch::add_hits(const std::string& tenant, const index::tenant_index& idx,
                            const std::vector<index::scored_replica>& hits) {
  std::lock_guard<std::mutex> lk(mu_);
  seen_refs& seen = seen_[tenant];
  if (seen.instance != idx.instance()) {  // refs of another index name other entries
    seen.counters.clear();
    seen.instance = idx.instance();
  }
  for (const auto& r : hits) {
    for (const auto& h : r.hits) {
      auto it = seen.counters.find(h);
      if (it != seen.counters.end()) {
        add_saturating(*it->second, 1);
        continue;
      }
      if (counts_.size() >= max_) {  // full: a new entry is dropped without naming it
        ++dropped_;
        continue;
      }
      auto named = idx.name_hit(h);
      if (!named) continue;  // stale: not remembered, it may name a live entry again
      // Not full: add_locked gives the counter (never nullptr).
      seen.counters.emplace(h, add_locked(std::make_pair(tenant, std::move(*named)), 1));
    }
  }
}

std::size_t credit_batch::ref_hash::operator()(const index::entry_ref& r) const noexcept {
  std::uint64_t h = r.key_hash;
  h ^= (static_cast<std::uint64_t>(r.key) << 32 | r.replica) * 0x9E3779B97F4A7C15ULL;
  h ^= static_cast<std::uint64_t>(r.key_part) * 0xC2B2AE3D27D4EB4FULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

bool credit_batch::ref_eq::operator()(const index::entry_ref& a,
                                      const index::entry_ref& b) const noexcept {
  return a.key == b.key && a.replica == b.replica && a.key_hash == b.key_hash &&
         a.key_part == b.key_part;
}

std::vector<proto::lfu_credit> credit_batch::take() {
  std::map<key, std::uint32_t> taken;
  {
    std::lock_guard<std::mutex> lk(mu_);
    taken.swap(counts_);
    seen_.clear();  // its counters pointed into what was taken
  }
  std::vector<proto::lfu_credit> out;
  out.reserve(taken.size());
  for (auto& [key, count] : taken) out.push_back(proto::lfu_credit{key.first, key.second, count});
  return out;
}

std::uint64_t credit_batch::dropped() const {
  std::lock_guard<std::mutex> lk(mu_);
  return dropped_;
}

std::map<std::string, proto::credit_record> credits_by_tenant(const proto::credit_record& r) {
  std::map<std::string, proto::credit_record> out;
  for (const auto& c : r.credits) out[c.tenant].credits.push_back(c);
  return out;
}

}  // namespace ic::state
