// The subscriber's core: engine messages in, ordered operations out (spec/adapter.md §4.3).
//
// One thread owns every piece of state here: per-source sequence tracking and the replay
// state machine (A4–A7), the reverse map `M` (engine hash → fingerprints, bounded and
// reference-counted, A10–A11), the residency table `R` (key → holders per tier, A12; only
// transitions of a key's reported tier become operations), LoRA resolution (A13), extra
// keys (A14), hybrid groups (A15), re-chunking to the routing block size (A20), the pending
// adds and their flush rules (A1), resync (A18) and refresh (A19). It never blocks and
// never touches a socket: replay requests go out through `replay_port`, operations into
// the `op_log`, time comes in as an argument. That makes it deterministic given its input,
// which is how the unit tests drive it.
//
//   kv_core core(opts, log, adapters, metrics, &replay, &logger);
//   core.start(now_ms);
//   core.on_live(0, {"kv-events", true, seq, payload}, now_ms);
//   core.tick(now_ms);   // window flush, replay timeouts, T2 expiry, refresh, resync
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tools/kvevent_subscriber/core_metrics.hpp"
#include "tools/kvevent_subscriber/events.hpp"
#include "tools/kvevent_subscriber/flat_table.hpp"
#include "tools/kvevent_subscriber/log.hpp"
#include "tools/kvevent_subscriber/ops.hpp"

namespace ic::kvevent {

/// Core settings, already validated by the composition root (flags of spec §3.2/§4.2).
struct core_options {
  std::size_t sources = 1;                      ///< --dp-size
  wire_dialect dialect = wire_dialect::vllm;    ///< from --hash-scheme
  std::string topic = "kv-events";              ///< --topic
  bool topic_exact = false;                     ///< --topic-match exact
  bool ignore_block_removed = false;            ///< L2 mode [REF]
  std::map<std::int64_t, std::string> lora_names;  ///< --lora-adapter-names
  bool lora_name_as_adapter = false;
  bool extra_keys_drop = true;                  ///< --extra-keys-policy drop
  std::vector<std::string> kv_spec_kinds{"full_attention"};
  std::vector<std::int64_t> kv_groups{0};
  int routing_block_size = 0;
  std::size_t max_tracked_blocks = 524288;
  std::int64_t t2_retention_ms = 30 * 60 * 1000;
  std::size_t max_batch_entries = 4096;
  std::int64_t window_ms = 100;
  std::int64_t refresh_interval_ms = 10 * 60 * 1000;  ///< 0 = off
  bool replay = false;                          ///< --replay-endpoint set
  bool startup_replay = true;
  std::int64_t replay_timeout_ms = 2000;
  int replay_max_rounds = 8;
  bool clear_on_start = true;
  bool gap_clear = true;                        ///< --on-unrecoverable-gap clear
  std::size_t max_held = 100000;                ///< live messages held during a recovery
};

/// Where the core asks the receiver to start or stop a replay for a source.
class replay_port {
 public:
  virtual ~replay_port() = default;
  /// Sends `["", BE8(start_seq)]` on a (new) DEALER to the source's replay endpoint.
  virtual void request_replay(std::size_t source, std::uint64_t start_seq) = 0;
  /// Closes the source's DEALER; later replies are not delivered.
  virtual void cancel_replay(std::size_t source) = 0;
};

/// One message as the receiver hands it over (frames already checked).
struct raw_message {
  std::string topic;
  bool sequenced = false;
  std::uint64_t seq = 0;
  std::string payload;
};

/// A source's state as /statusz shows it.
struct source_status {
  std::optional<std::uint64_t> expected;
  std::uint64_t incarnation = 0;
  bool recovering = false;
  bool startup = false;
  int rounds = 0;
  std::size_t held = 0;
};

class kv_core {
 public:
  kv_core(core_options opts, op_log& log, adapter_registry& adapters, core_metrics& metrics,
          replay_port* replay, logger* logger);

  /// Begins: startup replay (A7) or, without it, the clear-on-start CLEAR.
  void start(std::int64_t now_ms);

  /// A live message from the SUB of `source`.
  void on_live(std::size_t source, raw_message m, std::int64_t now_ms);
  /// One replayed batch from the DEALER of `source`.
  void on_replay(std::size_t source, std::uint64_t seq, std::string_view payload, std::int64_t now_ms);
  /// The END marker of a replay round.
  void on_replay_end(std::size_t source, std::int64_t now_ms);

  /// Periodic work: window flush, replay timeouts, T2 retention, refresh, requested resync.
  void tick(std::int64_t now_ms);

  /// Moves the pending adds into the log now (window tick, shutdown).
  void flush();

  /// Asks for a resync at the next tick (called from the sender thread).
  void request_resync(resync_reason r) { resync_request_.store(static_cast<int>(r) + 1); }

  // Introspection (tests, /statusz).
  std::size_t tracked_blocks() const { return m_.size(); }
  std::size_t residency_size() const { return r_.size(); }
  std::size_t pending_adds() const { return pending_.size(); }
  source_status status(std::size_t source) const;
  std::size_t table_bytes() const { return m_.bytes() + r_.bytes(); }
  /// The reported tier of (adapter name, fp); absent when unknown.
  tier reported(const std::string& adapter, std::uint64_t fp) const;
  /// Refcount of the reverse-map entry of (source, group 0, GPU, engine hash); 0 if none.
  std::uint32_t refcount(std::size_t source, std::uint64_t engine_hash) const;

 private:
  // --- tables --------------------------------------------------------------------------
  struct m_key {
    std::uint64_t hash;
    std::uint8_t source, group, mclass;
  };
  // Slots are packed (x86 and arm64 load unaligned words at full speed): 28 and 22 bytes
  // instead of 32 and 24 keep the tables within the sidecar's budget per tracked block.
  struct __attribute__((packed, aligned(4))) m_slot {  // 28 bytes
    std::uint64_t hash;
    std::uint64_t fp;        ///< last routing key of the block (chaining goes on from it)
    std::uint32_t tokens;    ///< cumulative tokens at the block's end
    std::uint32_t stamp;     ///< store order (LRU by store time, A10)
    std::uint16_t refcount;
    std::uint16_t adapter;
    std::uint8_t source, group, mclass, multi;  ///< multi: more keys in `multi_`
  };
  struct m_traits {
    static std::uint64_t hash(const m_key& k) {
      return mix64(k.hash ^ (std::uint64_t{k.source} << 56 | std::uint64_t{k.group} << 48 | std::uint64_t{k.mclass} << 40));
    }
    static std::uint64_t hash_of(const m_slot& s) { return hash(m_key{s.hash, s.source, s.group, s.mclass}); }
    static bool matches(const m_slot& s, const m_key& k) {
      return s.hash == k.hash && s.source == k.source && s.group == k.group && s.mclass == k.mclass;
    }
    static void assign(m_slot& s, const m_key& k) {
      s.hash = k.hash;
      s.source = k.source;
      s.group = k.group;
      s.mclass = k.mclass;
    }
  };
  struct r_key {
    std::uint64_t fp;
    std::uint16_t adapter;
  };
  struct __attribute__((packed, aligned(2))) r_slot {  // 22 bytes
    std::uint64_t fp;
    std::uint32_t tokens;
    std::uint16_t adapter;
    std::uint16_t holders[3];  ///< T1, T2, T3 holders
    tier reported;
    std::uint8_t inferred;     ///< inferred T2 (A12), its ts in `inferred_`
  };
  struct r_traits {
    static std::uint64_t hash(const r_key& k) { return mix64(k.fp ^ (std::uint64_t{k.adapter} << 48)); }
    static std::uint64_t hash_of(const r_slot& s) { return hash(r_key{s.fp, s.adapter}); }
    static bool matches(const r_slot& s, const r_key& k) { return s.fp == k.fp && s.adapter == k.adapter; }
    static void assign(r_slot& s, const r_key& k) {
      s.fp = k.fp;
      s.adapter = k.adapter;
    }
  };
  struct m_key_hash {
    std::size_t operator()(const m_key& k) const { return m_traits::hash(k); }
  };
  struct m_key_eq {
    bool operator()(const m_key& a, const m_key& b) const {
      return a.hash == b.hash && a.source == b.source && a.group == b.group && a.mclass == b.mclass;
    }
  };
  struct r_key_hash {
    std::size_t operator()(const r_key& k) const { return r_traits::hash(k); }
  };
  struct r_key_eq {
    bool operator()(const r_key& a, const r_key& b) const { return a.fp == b.fp && a.adapter == b.adapter; }
  };
  struct fifo_rec {  // 16 bytes: store order for LRU and T2 retention
    std::uint64_t hash;
    std::uint32_t stamp;
    std::uint8_t source, group, mclass, pad;
  };
  struct inferred_rec {
    std::int64_t ts_us;
    std::int64_t expire_ms;
  };
  struct key_tokens {
    std::uint64_t fp;
    std::uint32_t tokens;
  };

  // --- sources ---------------------------------------------------------------------------
  struct held_msg {
    std::uint64_t seq;
    std::string payload;
  };
  struct source_state {
    std::optional<std::uint64_t> expected;
    std::uint64_t incarnation = 0;
    bool recovering = false;
    bool startup = false;
    std::uint64_t next_needed = 0, round_start = 0;
    bool round_seen = false, round_broken = false;
    int rounds = 0;
    std::int64_t deadline_ms = 0;
    std::deque<held_msg> held;
    bool held_overflow = false;
    std::optional<std::pair<std::uint64_t, std::uint64_t>> replayed;  ///< [lo, hi]
    std::vector<std::int64_t> groups;  ///< distinct group_idx seen (hybrid after 2)
  };

  // How a holder removal reports a key that becomes absent.
  enum class absent_mode { evict, silent };

  void process(std::size_t s, std::uint64_t seq, std::string payload, std::int64_t now_ms);
  void apply_payload(std::size_t s, std::string_view payload);
  void apply_stored(std::size_t s, decoded_event& ev, std::int64_t ts_us);
  void apply_removed(std::size_t s, const decoded_event& ev, std::int64_t ts_us);
  void clear_source(std::size_t s, std::int64_t ts_us);
  void drop(drop_reason r);

  std::optional<std::uint16_t> resolve_adapter(const decoded_event& ev);
  bool kv_group_allowed(source_state& st, const decoded_event& ev);

  void store_block(const m_key& k, const key_tokens* keys, std::size_t n, std::uint16_t adapter,
                   tier t, std::int64_t ts_us);
  void release_entry(const m_slot& slot, absent_mode mode, bool infer_t2, std::int64_t ts_us,
                     std::vector<prefix_add>* t2_out);
  void add_holder(std::uint16_t adapter, std::uint64_t fp, std::uint32_t tokens, tier t, std::int64_t ts_us);
  void remove_holder(std::uint16_t adapter, std::uint64_t fp, tier t, absent_mode mode, bool infer_t2,
                     std::int64_t ts_us, std::vector<prefix_add>* t2_out);
  void on_transition(r_slot& e, tier before, absent_mode mode, bool inferred_now, std::int64_t ts_us,
                     std::vector<prefix_add>* t2_out);
  static tier reported_of(const r_slot& e);
  void erase_r_if_dead(std::uint16_t adapter, std::uint64_t fp);
  void enforce_cap();
  void expire(std::int64_t now_ms);
  void keys_of(const m_slot& slot, std::vector<key_tokens>& out) const;

  void queue(op o);
  void push_t2(std::vector<prefix_add>& entries, std::int64_t ts_us);
  void full_report(std::vector<op>& out);
  /// Cuts `entries` into ops of at most --max-batch-entries: appended to `out`, or queued.
  void chunked(op_type t, std::int64_t ts_us, const std::vector<prefix_add>& entries, std::vector<op>* out);
  bool forget_inferred(const r_key& k, std::int64_t expire_ms);
  bool forget_entry(const fifo_rec& rec);
  void do_resync(resync_reason r);
  void refresh_step(std::int64_t now_ms);

  void start_recovery(std::size_t s, std::uint64_t from, std::int64_t now_ms);
  void finish_round(std::size_t s, bool timed_out, std::int64_t now_ms);
  void unrecoverable(std::size_t s, std::int64_t now_ms);
  void drain_held(std::size_t s, std::int64_t now_ms);
  void complete_recovery(std::size_t s, std::int64_t now_ms);
  void hold(std::size_t s, std::uint64_t seq, std::string payload, std::int64_t now_ms);
  void finish_startup(std::size_t s, std::int64_t now_ms);
  void update_gauges();

  core_options opts_;
  op_log& log_;
  adapter_registry& adapters_;
  core_metrics& metrics_;
  replay_port* replay_;
  logger* logger_;

  flat_table<m_slot, m_key, m_traits> m_;
  flat_table<r_slot, r_key, r_traits> r_;
  std::unordered_map<m_key, std::vector<std::uint64_t>, m_key_hash, m_key_eq> multi_;  ///< keys 2..n
  std::unordered_map<r_key, inferred_rec, r_key_hash, r_key_eq> inferred_;
  std::deque<std::pair<r_key, std::int64_t>> inferred_fifo_;  ///< (key, expire_ms)
  std::deque<fifo_rec> fifo_;      ///< every store, oldest first (lazy: stale records skipped)
  std::deque<std::pair<fifo_rec, std::int64_t>> store_only_fifo_;  ///< non-GPU stores, expiry
  std::uint32_t stamp_ = 0;

  std::vector<source_state> sources_;
  std::size_t startup_left_ = 0;
  bool suppress_ops_ = false;

  std::vector<prefix_add> pending_;
  std::int64_t pending_ts_ = 0;
  std::int64_t next_flush_ms_ = 0;
  std::int64_t now_ms_ = 0;

  std::size_t refresh_cursor_ = 0;
  std::int64_t last_refresh_ms_ = 0;
  double refresh_credit_ = 0;  ///< slots owed to the refresh walk (fractional per tick)
  std::vector<prefix_add> refresh_buf_;

  std::atomic<int> resync_request_{0};
  std::size_t tier_count_[4] = {0, 0, 0, 0};  ///< R keys per reported tier

  // Warn-once sets (bounded: a hostile engine cannot grow them without limit).
  std::unordered_set<std::int64_t> warned_lora_ids_;
  std::unordered_set<std::string> warned_lora_names_, warned_kinds_;

  decoded_batch batch_;
  std::vector<key_tokens> keys_scratch_;
  std::vector<m_key> clear_scratch_;
};

}  // namespace ic::kvevent
