#include "state/credit_batch.hpp"

#include <limits>

namespace ic::state {

void credit_batch::add(const std::string& tenant, index::named_hit hit, std::uint32_t count) {
  std::lock_guard<std::mutex> lk(mu_);
  auto key = std::make_pair(tenant, std::move(hit));
  auto it = counts_.find(key);
  if (it == counts_.end()) {
    if (counts_.size() >= max_) {
      ++dropped_;
      return;
    }
    counts_.emplace(std::move(key), count);
    return;
  }
  constexpr std::uint32_t max = std::numeric_limits<std::uint32_t>::max();
  it->second = count > max - it->second ? max : it->second + count;
}

std::vector<proto::lfu_credit> credit_batch::take() {
  std::map<std::pair<std::string, index::named_hit>, std::uint32_t> taken;
  {
    std::lock_guard<std::mutex> lk(mu_);
    taken.swap(counts_);
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
