#include "state/coordination.hpp"

namespace ic::state {

dispatch_action dispatch_machine::next(const std::optional<dispatch_item>& front, bool jobs_queued,
                                       const std::function<bool()>& drained,
                                       std::int64_t pending_growth, std::int64_t nonreserved) {
  if (phase_ != dispatch_phase::running) return dispatch_action::idle;
  // A quiescent job goes first: it sees every record dispatched before it was queued.
  if (jobs_queued) {
    if (!drained()) return enter(dispatch_phase::draining, dispatch_action::wait_drained);
    return enter(dispatch_phase::quiet, dispatch_action::start_job);
  }
  if (!front) return dispatch_action::idle;
  switch (front->what) {
    case dispatch_item::kind::update:
      // Alone (drain, then exclusive, then the cap merged over the tenants as the serial
      // replay does) unless no update in flight can trigger the cap.
      if (!must_apply_alone(cap_, pending_growth, nonreserved, front->growth))
        return dispatch_action::dispatch;
      if (!drained()) return enter(dispatch_phase::draining, dispatch_action::wait_drained);
      return enter(dispatch_phase::exclusive, dispatch_action::dispatch_alone);
    case dispatch_item::kind::policy:
      // Drain first: no tenant is then mid-sweep (which would defer the change), so every
      // tenant installs it from its mailbox before any lookup sent after the push's answer.
      if (!drained()) return enter(dispatch_phase::draining, dispatch_action::wait_drained);
      return enter(dispatch_phase::policy, dispatch_action::apply_policy);
    case dispatch_item::kind::reload:
      // Every record queued before it was applied to the old state; nothing is in flight.
      if (!drained()) return enter(dispatch_phase::draining, dispatch_action::wait_drained);
      return enter(dispatch_phase::quiet, dispatch_action::swap_state);
    case dispatch_item::kind::event:
    case dispatch_item::kind::sweep:
    case dispatch_item::kind::probe:
      return dispatch_action::dispatch;
  }
  return dispatch_action::idle;
}

bool dispatch_machine::drained() {
  if (phase_ != dispatch_phase::draining) return false;
  phase_ = dispatch_phase::running;
  return true;
}

bool cap_merge::start(const std::vector<std::string>& tenants) {
  heads_.clear();
  for (const auto& t : tenants) heads_.emplace(t, std::nullopt);
  pending_ = heads_.size();
  return pending_ > 0;
}

bool cap_merge::on_head(const std::string& tenant, std::optional<index::cap_head> head) {
  heads_[tenant] = std::move(head);
  return pending_ > 0 && --pending_ == 0;
}

std::optional<cap_merge::order> cap_merge::next(std::int64_t excess) const {
  if (excess <= 0) return std::nullopt;
  std::vector<std::optional<index::cap_head>> heads;
  std::vector<const std::string*> names;
  heads.reserve(heads_.size());
  names.reserve(heads_.size());
  for (const auto& [name, h] : heads_) {
    heads.push_back(h);
    names.push_back(&name);
  }
  const index::cap_step step = index::pick_cap_step(heads);
  if (step.best == index::cap_step::none) return std::nullopt;
  return order{*names[step.best], step.bound};
}

bool cap_merge::on_evicted(const std::string& tenant, std::int64_t evicted,
                           std::optional<index::cap_head> head) {
  heads_[tenant] = std::move(head);
  return evicted > 0;
}

}  // namespace ic::state
