// The gateway's hand-off to a tenant actor: an ask with a deadline (the timer is armed
// first) that may run an idle actor right on the asking gRPC thread (`gateway_unit`).
#pragma once

#include <chrono>
#include <memory>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/send.hpp>

#include "actors/deadline_timer.hpp"
#include "actors/protocol.hpp"
#include "index/types.hpp"

namespace ic::actors {

/// Returns the calling gateway thread's execution unit for `sys` (see gateway_ask.cpp): an
/// idle actor woken by an ask from this thread runs here for that one message.
caf::execution_unit* gateway_unit_of(caf::actor_system& sys);

/// Sends `xs` to `dest` from a gateway thread (see `gateway_unit_of`).
template <class Handle, class... Ts>
void ask_from_gateway(caf::actor_system& sys, const Handle& dest, Ts&&... xs) {
  auto* actor = caf::actor_cast<caf::abstract_actor*>(dest);
  actor->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(), {},
                                           std::forward<Ts>(xs)...),
                 gateway_unit_of(sys));
}

/// Asks a tenant actor with a deadline. `run_here` lets an idle actor answer on this thread
/// (gateway_unit); gRPC sends an answer given inside the handler only when the handler
/// returns, so only asks whose decision is certain to be short may run here — a long one
/// would hold its own answer past the deadline. An ask answered right here (the actor was
/// idle) never meets the timer; any other is armed once the message is queued (a call
/// claimed meanwhile is skipped by the timer, and one whose deadline already passed expires
/// at once), and the actor checks the deadline itself before and during its decision.
template <class Call, class Atom, class Question, class Done>
void ask_tenant(caf::actor_system& sys, deadline_timer& timer, const tenant_actor& actor, Atom atom,
                std::chrono::steady_clock::time_point deadline, Question question, Done done,
                bool run_here) {
  auto call = std::make_shared<Call>();
  call->deadline = deadline;
  call->question = std::move(question);
  call->done = std::move(done);
  if (!run_here) {
    timer.schedule(call);
    caf::anon_send(actor, atom, std::move(call));
    return;
  }
  ask_from_gateway(sys, actor, atom, call);
  if (!call->claimed.load()) timer.schedule(std::move(call));
}

/// Lookups small enough to decide on the gateway thread (well under a millisecond: a
/// 4096-block chain walk, or fingerprinting 64 Ki tokens).
inline bool short_decision(const index::lookup_route_request& r) {
  return r.block_hashes.size() <= 4096 && r.block_token_counts.size() <= 4096 &&
         r.token_ids.size() <= 65536;
}

}  // namespace ic::actors
