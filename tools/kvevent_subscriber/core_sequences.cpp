// kv_core, part 2: per-source sequence tracking and the replay state machine (A4–A7).
// The rest of the core (lifecycle, applying batches, the reverse map and residency, the
// operation stream) is in core.cpp; both halves are members of one class, core.hpp.
#include "tools/kvevent_subscriber/core.hpp"

#include <algorithm>

namespace ic::kvevent {

// --- sequences and replay (A4–A7) ------------------------------------------------------------

void kv_core::on_live(std::size_t s, raw_message m, std::int64_t now_ms) {
  if (s >= sources_.size()) return;
  now_ms_ = now_ms;
  metrics_.zmq_messages.add(s);
  metrics_.last_message_ms.set(s, static_cast<std::uint64_t>(now_ms));
  if (opts_.topic_exact && m.topic != opts_.topic) {
    metrics_.drop_batch(s, batch_drop::topic);
    return;
  }
  if (!m.sequenced) {
    apply_payload(s, m.payload);
    return;
  }
  if (sources_[s].recovering) {
    hold(s, m.seq, std::move(m.payload), now_ms);
    return;
  }
  process(s, m.seq, std::move(m.payload), now_ms);
}

void kv_core::hold(std::size_t s, std::uint64_t seq, std::string payload, std::int64_t now_ms) {
  auto& st = sources_[s];
  if (st.held.size() >= opts_.max_held) {
    // A4: the held buffer overflowed; the gap is unrecoverable. The message that did not
    // fit is processed after the held ones (it may open a new gap).
    if (logger_) logger_->warn("replay hold buffer overflowed; gap is unrecoverable", {{"source", std::to_string(s)}});
    unrecoverable(s, now_ms);
    if (st.recovering) st.held.push_back({seq, std::move(payload)});
    else process(s, seq, std::move(payload), now_ms);
    return;
  }
  st.held.push_back({seq, std::move(payload)});
}

void kv_core::process(std::size_t s, std::uint64_t q, std::string payload, std::int64_t now_ms) {
  auto& st = sources_[s];
  if (!st.expected || q == *st.expected) {  // late join is not a gap
    st.expected = q + 1;
    // The SUB delivers in order: once a live message follows on, no later one can repeat
    // a replayed batch, so a lower seq from now on means a restart.
    st.replayed.reset();
    apply_payload(s, payload);
    return;
  }
  if (q > *st.expected) {
    metrics_.seq_gaps.add(s);
    metrics_.seq_missed.add(s, q - *st.expected);
    if (logger_) {
      logger_->warn("sequence gap", {{"source", std::to_string(s)}, {"expected", std::to_string(*st.expected)},
                                     {"got", std::to_string(q)}});
    }
    st.held.push_front({q, std::move(payload)});
    start_recovery(s, *st.expected, now_ms);
    return;
  }
  if (st.replayed && q >= st.replayed->first && q <= st.replayed->second) return;  // duplicate
  // A6: the sequence went back: a new engine process.
  metrics_.engine_restarts.add(s);
  if (logger_) logger_->warn("engine restart detected", {{"source", std::to_string(s)}, {"seq", std::to_string(q)}});
  if (st.recovering) replay_->cancel_replay(s);
  st.recovering = false;
  clear_source(s, 0);
  st.incarnation++;
  st.replayed.reset();
  st.groups.clear();
  st.expected = q + 1;
  apply_payload(s, payload);
}

void kv_core::start_recovery(std::size_t s, std::uint64_t from, std::int64_t now_ms) {
  auto& st = sources_[s];
  if (!opts_.replay) {
    metrics_.replay(s, replay_result::unavailable);
    unrecoverable(s, now_ms);
    return;
  }
  st.recovering = true;
  st.next_needed = st.round_start = from;
  st.round_seen = st.round_broken = false;
  st.rounds = 1;
  st.deadline_ms = now_ms + opts_.replay_timeout_ms;
  replay_->request_replay(s, from);
}

void kv_core::on_replay(std::size_t s, std::uint64_t seq, std::string_view payload, std::int64_t now_ms) {
  if (s >= sources_.size()) return;
  auto& st = sources_[s];
  if (!st.recovering) return;
  now_ms_ = now_ms;
  st.deadline_ms = now_ms + opts_.replay_timeout_ms;
  if (st.round_broken) return;  // ignore the rest of a round with a hole; END or timeout re-asks
  if (!st.round_seen) {
    st.round_seen = true;
    if (seq > st.round_start) {
      if (st.startup && !st.expected) {
        st.next_needed = seq;  // at startup the ring simply begins later
      } else {
        metrics_.replay(s, replay_result::truncated);
        unrecoverable(s, now_ms);
        return;
      }
    }
  }
  if (seq < st.next_needed) return;
  if (seq > st.next_needed) {
    st.round_broken = true;  // a hole: the ROUTER dropped replies past its HWM
    return;
  }
  apply_payload(s, payload);
  if (!st.replayed) st.replayed = std::make_pair(seq, seq);
  st.replayed->first = std::min(st.replayed->first, seq);
  st.replayed->second = std::max(st.replayed->second, seq);
  st.next_needed = seq + 1;
  st.expected = seq + 1;
  if (!st.held.empty() && st.next_needed >= st.held.front().seq) complete_recovery(s, now_ms);
}

void kv_core::on_replay_end(std::size_t s, std::int64_t now_ms) {
  if (s >= sources_.size() || !sources_[s].recovering) return;
  finish_round(s, false, now_ms);
}

void kv_core::finish_round(std::size_t s, bool timed_out, std::int64_t now_ms) {
  auto& st = sources_[s];
  if (!st.recovering) return;
  bool closed = st.held.empty() ? (!timed_out && !st.round_broken) : st.next_needed >= st.held.front().seq;
  if (closed) {
    complete_recovery(s, now_ms);
    return;
  }
  metrics_.replay(s, timed_out ? replay_result::timeout : replay_result::partial);
  if (st.startup && !st.round_seen) {
    // Nothing answered at startup (no ROUTER yet): go on without the ring.
    if (logger_) logger_->warn("startup replay got no answer; continuing without it", {{"source", std::to_string(s)}});
    unrecoverable(s, now_ms);
    return;
  }
  if (st.rounds >= opts_.replay_max_rounds) {
    unrecoverable(s, now_ms);
    return;
  }
  st.rounds++;
  st.round_start = st.next_needed;
  st.round_seen = st.round_broken = false;
  st.deadline_ms = now_ms + opts_.replay_timeout_ms;
  replay_->request_replay(s, st.next_needed);
}

void kv_core::complete_recovery(std::size_t s, std::int64_t now_ms) {
  auto& st = sources_[s];
  replay_->cancel_replay(s);
  st.recovering = false;
  metrics_.replay(s, replay_result::ok);
  if (st.startup) finish_startup(s, now_ms);
  else drain_held(s, now_ms);
}

void kv_core::unrecoverable(std::size_t s, std::int64_t now_ms) {
  auto& st = sources_[s];
  if (st.recovering && replay_) replay_->cancel_replay(s);
  st.recovering = false;
  if (st.startup) {
    finish_startup(s, now_ms);
    return;
  }
  if (logger_) {
    logger_->warn("unrecoverable sequence gap", {{"source", std::to_string(s)},
                                                 {"action", opts_.gap_clear ? "clear" : "keep"}});
  }
  if (opts_.gap_clear) clear_source(s, 0);
  if (st.held.empty()) st.expected.reset();
  else st.expected = st.held.front().seq;
  drain_held(s, now_ms);
}

void kv_core::drain_held(std::size_t s, std::int64_t now_ms) {
  auto& st = sources_[s];
  while (!st.recovering && !st.held.empty() && startup_left_ == 0) {
    held_msg m = std::move(st.held.front());
    st.held.pop_front();
    process(s, m.seq, std::move(m.payload), now_ms);
  }
}

void kv_core::finish_startup(std::size_t s, std::int64_t now_ms) {
  auto& st = sources_[s];
  if (!st.startup) return;
  st.startup = false;
  st.recovering = false;
  if (startup_left_ > 0 && --startup_left_ > 0) return;
  suppress_ops_ = false;
  pending_.clear();
  std::vector<op> ops;
  if (opts_.clear_on_start) {
    ops.emplace_back();
    ops.back().type = op_type::clear;
    metrics_.resyncs.add(static_cast<std::size_t>(resync_reason::start));
  }
  full_report(ops);
  for (auto& o : ops) queue(std::move(o));
  for (std::size_t k = 0; k < sources_.size(); ++k) {
    auto& other = sources_[k];
    if (!other.held.empty() && !other.expected) other.expected = other.held.front().seq;
    drain_held(k, now_ms);
  }
}

source_status kv_core::status(std::size_t s) const {
  source_status out;
  if (s >= sources_.size()) return out;
  const auto& st = sources_[s];
  out.expected = st.expected;
  out.incarnation = st.incarnation;
  out.recovering = st.recovering;
  out.startup = st.startup;
  out.rounds = st.rounds;
  out.held = st.held.size();
  return out;
}

}  // namespace ic::kvevent
