// The policy actor: applies a journaled policy push to the published set and broadcasts it
// to the tenant actors before the coordinator dispatches anything newer.
#include "actors/spawn.hpp"

#include <caf/all.hpp>

#include "actors/fail_fast.hpp"
#include "policy/policy_store.hpp"

namespace ic::actors {
namespace {

policy_actor::behavior_type policy_actor_impl(policy_actor::pointer self, runtime_shared* sh) {
  fail_fast_on_exceptions(self, "policy");
  return {
      [=](policy_atom, policy_change& change) -> policy_reply {
        policy_reply reply;
        auto next = state::apply_policy_record(*sh->policies.get(), change.canonical_json);
        if (!next.has_value()) {
          reply.ok = false;
          reply.error = next.error();
          reply.policies = sh->policies.get();
          return reply;
        }
        reply.policies = std::move(next).value();
        // Tenants hear of it before the coordinator dispatches anything newer (it waits for
        // this reply), so every tenant applies the change in journal order.
        for (auto& t : change.tenants) self->send(t, policy_atom::value, reply.policies);
        sh->policies.publish(reply.policies);
        return reply;
      },
  };
}

}  // namespace

policy_actor spawn_policy_actor(caf::actor_system& sys, runtime_shared* sh) {
  return sys.spawn(policy_actor_impl, sh);
}

}  // namespace ic::actors
