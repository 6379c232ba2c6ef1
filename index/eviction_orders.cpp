// tenant_index's eviction orders without re-sorting (§4.5 quota, §4.6 cap): lazy
// bucket maps of run-length key refs, prepared (expanded, filtered, sorted) on first use.
#include "index/tenant_index.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "index/partition_detail.hpp"

namespace ic::index {

using namespace partition_detail;

// ----------------------------------------------------------------------- eviction orders

bool tenant_index::key_less(std::uint32_t a, std::uint32_t b) const {
  const key_record& ka = records_[a];
  const key_record& kb = records_[b];
  const part_info& pa = parts_[part_id(ka)];
  const part_info& pb = parts_[part_id(kb)];
  if (pa.model != pb.model) return names_.name(pa.model) < names_.name(pb.model);
  if (pa.scheme != pb.scheme) return names_.name(pa.scheme) < names_.name(pb.scheme);
  if (pa.adapter != pb.adapter) return names_.name(pa.adapter) < names_.name(pb.adapter);
  if (!(ka.part & long_flag) && !(kb.part & long_flag)) return ka.hash < kb.hash;
  return key_bytes(ka) < key_bytes(kb);
}

void tenant_index::push_cap_ref(std::uint32_t key, std::uint32_t count, micros ts) {
  const std::pair<std::uint32_t, micros> bk{count, ts};
  if (last_cap_bucket_ == nullptr || last_cap_key_ != bk) {
    last_cap_bucket_ = &cap_order_[bk];
    last_cap_key_ = bk;
  }
  // A repeated key needs no second ref, but the bucket must still re-collect its candidates:
  // the key may have gained another replica entry in this bucket.
  last_cap_bucket_->dirty = true;
  if (add_run(last_cap_bucket_->refs, key)) ++cap_refs_;
}

void tenant_index::rebuild_cap_order() {
  cap_order_.clear();
  cap_refs_ = 0;
  last_cap_bucket_ = nullptr;
  if (!cap_tracked()) return;
  for (std::uint32_t kidx = 0; kidx < records_.size(); ++kidx) {
    const key_record& k = records_[kidx];
    if (is_free(k)) continue;
    const entry_span e = entries_of(k);
    for (std::uint32_t i = 0; i < size_of(k); ++i) {
      push_cap_ref(kidx, effective_count(e[i]), e[i].last_seen);
    }
  }
}

void tenant_index::prepare_cap_bucket(
    std::map<std::pair<std::uint32_t, micros>, order_bucket>::iterator it) {
  order_bucket& b = it->second;
  const auto [count, ts] = it->first;
  const std::size_t before = run_keys(b.refs);
  std::vector<std::uint32_t> keys = expand_runs(b.refs);
  b.candidates.clear();
  std::size_t kept = 0;
  for (std::uint32_t kidx : keys) {
    const key_record& k = records_[kidx];
    if (is_free(k)) continue;
    const entry_span e = entries_of(k);
    bool any = false;
    for (std::uint32_t i = 0; i < size_of(k); ++i) {
      if (e[i].last_seen == ts && effective_count(e[i]) == count) {
        b.candidates.emplace_back(kidx, e[i].replica());
        any = true;
      }
    }
    if (any) keys[kept++] = kidx;
  }
  cap_refs_ -= before - kept;
  keys.resize(kept);
  assign_runs(b.refs, keys);
  std::sort(b.candidates.begin(), b.candidates.end(), [this](const auto& x, const auto& y) {
    if (x.first != y.first) return key_less(x.first, y.first);
    return names_.name(x.second) < names_.name(y.second);
  });
  b.cursor = 0;
  b.dirty = false;
}

std::optional<cap_candidate> tenant_index::peek_cap_victim() {
  while (!cap_order_.empty()) {
    auto it = cap_order_.begin();
    order_bucket& b = it->second;
    if (b.dirty) prepare_cap_bucket(it);
    const auto [count, ts] = it->first;
    while (b.cursor < b.candidates.size()) {
      const auto [kidx, replica] = b.candidates[b.cursor];
      key_record& k = records_[kidx];
      if (!is_free(k)) {
        const std::uint32_t pos = find_replica(k, replica);
        if (pos != npos && entries_of(k)[pos].last_seen == ts &&
            effective_count(entries_of(k)[pos]) == count) {
          return cap_candidate{count, ts, kidx, replica};
        }
      }
      ++b.cursor;
    }
    cap_refs_ -= run_keys(b.refs);
    if (last_cap_bucket_ == &b) last_cap_bucket_ = nullptr;
    cap_order_.erase(it);
  }
  return std::nullopt;
}

void tenant_index::evict_cap_victim(const cap_candidate& v, micros ts, change_log* changes) {
  key_record& k = records_[v.key];
  const entry_span e = entries_of(k);
  for (std::uint32_t i = 0; i < size_of(k); ++i) {
    if (e[i].replica() == v.replica) {
      remove_entry(v.key, i, change_cause::cap, ts, changes);
      break;
    }
  }
  if (!cap_order_.empty()) ++cap_order_.begin()->second.cursor;
}

void tenant_index::push_quota_ref(std::uint32_t key) {
  order_bucket& b = quota_order_[key_age(records_[key])];
  b.dirty = true;
  if (add_run(b.refs, key)) ++quota_refs_;
}

void tenant_index::rebuild_quota_order() {
  quota_order_.clear();
  quota_refs_ = 0;
  if (!quota_) return;
  for (std::uint32_t kidx = 0; kidx < records_.size(); ++kidx) {
    if (!is_free(records_[kidx])) push_quota_ref(kidx);
  }
}

void tenant_index::enforce_quota(micros ts, change_log* changes, ingest_result& result) {
  if (!quota_) return;
  while (keys_ > *quota_ && !quota_order_.empty()) {
    auto it = quota_order_.begin();
    order_bucket& b = it->second;
    const micros age = it->first;
    if (b.dirty) {
      const std::size_t before = run_keys(b.refs);
      const std::vector<std::uint32_t> keys = expand_runs(b.refs);
      b.candidates.clear();
      for (std::uint32_t kidx : keys) {
        if (!is_free(records_[kidx]) && key_age(records_[kidx]) == age) {
          b.candidates.emplace_back(kidx, 0);
        }
      }
      quota_refs_ -= before - b.candidates.size();
      std::vector<std::uint32_t> live;
      for (auto& c : b.candidates) live.push_back(c.first);
      assign_runs(b.refs, live);
      std::sort(b.candidates.begin(), b.candidates.end(),
                [this](const auto& x, const auto& y) { return key_less(x.first, y.first); });
      b.cursor = 0;
      b.dirty = false;
    }
    bool evicted = false;
    while (b.cursor < b.candidates.size()) {
      const std::uint32_t kidx = b.candidates[b.cursor++].first;
      if (is_free(records_[kidx]) || key_age(records_[kidx]) != age) continue;
      // Remove the whole key: every replica.
      removing_key_ = true;
      while (!is_free(records_[kidx]) && size_of(records_[kidx]) > 0) {
        remove_entry(kidx, size_of(records_[kidx]) - 1, change_cause::quota, ts, changes);
      }
      removing_key_ = false;
      ++result.quota_evicted_keys;
      evicted = true;
      break;
    }
    if (!evicted) {
      quota_refs_ -= run_keys(b.refs);
      quota_order_.erase(it);
    }
  }
}

}  // namespace ic::index
