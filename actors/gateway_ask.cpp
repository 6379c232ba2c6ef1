#include "actors/gateway_ask.hpp"

#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

namespace ic::actors {
namespace {

/// Messages an idle actor processes on the asking thread before handing it back: only the
/// ask itself. The asker's own answer leaves only when its handler returns, so anything
/// queued behind the ask (an apply, a sweep slice) must run on a worker, not here.
constexpr std::size_t inline_throughput = 1;

/// The execution unit of a gateway thread that asks a tenant actor. When the ask wakes an
/// idle actor, CAF hands the actor to the sender's execution unit (`exec_later`); this unit
/// runs it right here for one message instead of waking a scheduler worker (a cross-core
/// wake-up costs 10+ µs on a small VM, several times the lookup itself). The actor's
/// mailbox stays exclusive (CAF lets exactly one thread resume it), so this changes which
/// thread runs the handler, never the actor semantics. Anything else that becomes runnable
/// meanwhile, and an actor with more mail, goes to the scheduler as usual.
class gateway_unit final : public caf::execution_unit {
 public:
  void exec_later(caf::resumable* job) override {
    if (running_) {
      system().scheduler().enqueue(job);
      return;
    }
    running_ = true;
    const auto res = job->resume(this, inline_throughput);
    running_ = false;
    switch (res) {
      case caf::resumable::resume_later:
        system().scheduler().enqueue(job);  // keeps the reference
        break;
      default:
        caf::intrusive_ptr_release(job);
        break;
    }
  }
  /// Returns this thread's unit for `sys`.
  static gateway_unit& of(caf::actor_system& sys) {
    thread_local gateway_unit unit;
    if (!unit.running_) unit.system_ = &sys;  // never retarget a unit that is running
    return unit;
  }

 private:
  bool running_ = false;
};

}  // namespace

caf::execution_unit* gateway_unit_of(caf::actor_system& sys) { return &gateway_unit::of(sys); }

}  // namespace ic::actors
