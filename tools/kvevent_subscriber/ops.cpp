#include "tools/kvevent_subscriber/ops.hpp"

namespace ic::kvevent {

std::uint16_t adapter_registry::intern(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  if (names_.size() >= 0xffff) return 0;  // bounded: a runaway name source cannot grow it
  auto i = static_cast<std::uint16_t>(names_.size());
  names_.push_back(name);
  index_.emplace(name, i);
  return i;
}

std::string adapter_registry::name(std::uint16_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return i < names_.size() ? names_[i] : std::string();
}

bool op_log::push(op o) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (resync_needed_) {
      dropped_++;
      return false;
    }
    if (q_.size() >= max_ops_) {
      dropped_ += q_.size() + 1;
      q_.clear();
      resync_needed_ = true;
      return false;
    }
    q_.push_back(std::move(o));
  }
  cv_.notify_one();
  return true;
}

bool op_log::pop(op& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !q_.empty(); })) return false;
  out = std::move(q_.front());
  q_.pop_front();
  return true;
}

void op_log::replace(std::vector<op> ops) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    q_.clear();
    for (auto& o : ops) q_.push_back(std::move(o));
    resync_needed_ = false;
    generation_++;
  }
  cv_.notify_all();
}

void op_log::overflow() {
  std::lock_guard<std::mutex> lock(mu_);
  dropped_ += q_.size();
  q_.clear();
  resync_needed_ = true;
}

std::size_t op_log::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return q_.size();
}

void op_log::wake() { cv_.notify_all(); }

}  // namespace ic::kvevent
