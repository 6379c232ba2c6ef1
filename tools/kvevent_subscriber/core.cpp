#include "tools/kvevent_subscriber/core.hpp"

#include <algorithm>
#include <cctype>

#include "index/fingerprint.hpp"

namespace ic::kvevent {
namespace {

constexpr std::size_t warn_once_limit = 1024;

// Medium class of a store or removal (A12): 0 = GPU (T1), 1 = CPU (T2), 2 = storage (T3);
// nullopt for a medium nobody documented.
std::optional<std::uint8_t> medium_class(const std::optional<std::string>& medium, bool remote) {
  if (remote) return 2;
  if (!medium) return 0;
  std::string m = *medium;
  for (auto& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (m == "GPU") return 0;
  if (m == "CPU" || m == "CPU_PINNED" || m == "CPU_TIER1") return 1;
  if (m == "CPU_TIER2" || m == "DISK" || m == "FS" || m == "OBJ" || m == "STORAGE" || m == "SHARED_STORAGE")
    return 2;
  return std::nullopt;
}

tier tier_of_class(std::uint8_t mclass) { return static_cast<tier>(mclass + 1); }

}  // namespace

kv_core::kv_core(core_options opts, op_log& log, adapter_registry& adapters, core_metrics& metrics,
                 replay_port* replay, logger* logger)
    : opts_(std::move(opts)),
      log_(log),
      adapters_(adapters),
      metrics_(metrics),
      replay_(replay),
      logger_(logger),
      sources_(opts_.sources) {
  if (opts_.max_batch_entries == 0) opts_.max_batch_entries = 4096;
  if (opts_.max_tracked_blocks == 0) opts_.max_tracked_blocks = 1;
  if (!replay_) opts_.replay = false;
  // Sized once for the bound: the memory an operator budgets for --max-tracked-blocks is
  // taken up front, and the tables never rehash at the worst moment (A10).
  m_.reserve(opts_.max_tracked_blocks);
  r_.reserve(opts_.max_tracked_blocks);
  for (const auto& [id, name] : opts_.lora_names) adapters_.intern(name);
}

// --- lifecycle -----------------------------------------------------------------------------

void kv_core::start(std::int64_t now_ms) {
  now_ms_ = now_ms;
  next_flush_ms_ = now_ms + opts_.window_ms;
  last_refresh_ms_ = now_ms;
  if (opts_.replay && opts_.startup_replay) {
    // A7: hold live messages, rebuild from the ring, then report everything at ts 0.
    suppress_ops_ = true;
    startup_left_ = sources_.size();
    for (std::size_t s = 0; s < sources_.size(); ++s) {
      auto& st = sources_[s];
      st.startup = true;
      st.recovering = true;
      st.next_needed = st.round_start = 0;
      st.round_seen = st.round_broken = false;
      st.rounds = 1;
      st.deadline_ms = now_ms + opts_.replay_timeout_ms;
      replay_->request_replay(s, 0);
    }
  } else if (opts_.clear_on_start) {
    op o;
    o.type = op_type::clear;
    queue(std::move(o));
    metrics_.resyncs.add(static_cast<std::size_t>(resync_reason::start));
  }
}

void kv_core::tick(std::int64_t now_ms) {
  now_ms_ = now_ms;
  if (int rr = resync_request_.exchange(0)) do_resync(static_cast<resync_reason>(rr - 1));
  for (std::size_t s = 0; s < sources_.size(); ++s) {
    if (sources_[s].recovering && now_ms >= sources_[s].deadline_ms) finish_round(s, true, now_ms);
  }
  expire(now_ms);
  if (now_ms >= next_flush_ms_) {
    flush();
    next_flush_ms_ = now_ms + opts_.window_ms;
  }
  refresh_step(now_ms);
  update_gauges();
}

// --- applying batches ------------------------------------------------------------------------

void kv_core::apply_payload(std::size_t s, std::string_view payload) {
  if (!decode_batch(payload, opts_.dialect, batch_)) {
    metrics_.drop_batch(s, batch_drop::decode);
    if (logger_) logger_->warn("dropping undecodable event batch", {{"source", std::to_string(s)}});
    return;
  }
  const std::int64_t ts_us = micros_from_seconds(batch_.ts);
  if (ts_us > 0) metrics_.last_event_ts_ms.set(s, static_cast<std::uint64_t>(ts_us / 1000));
  // A15: a model is hybrid as soon as one batch shows two groups; learn them first so the
  // filter already applies to the first batch.
  auto& st = sources_[s];
  for (std::size_t i = 0; i < batch_.size; ++i) {
    const auto& ev = batch_.events[i];
    if (ev.kind == event_kind::block_stored && ev.group_idx &&
        std::find(st.groups.begin(), st.groups.end(), *ev.group_idx) == st.groups.end() && st.groups.size() < 64) {
      st.groups.push_back(*ev.group_idx);
    }
  }
  for (std::size_t i = 0; i < batch_.size; ++i) {
    auto& ev = batch_.events[i];
    switch (ev.kind) {
      case event_kind::block_stored: apply_stored(s, ev, ts_us); break;
      case event_kind::block_removed: apply_removed(s, ev, ts_us); break;
      case event_kind::all_cleared:
        metrics_.events.add(static_cast<std::size_t>(event_type_label::all_cleared) *
                            static_cast<std::size_t>(medium_label::count_));
        if (ev.error != drop_reason::none) {
          drop(ev.error);
          break;
        }
        clear_source(s, ts_us);
        break;
      default:
        metrics_.events.add(static_cast<std::size_t>(event_type_label::unknown) *
                            static_cast<std::size_t>(medium_label::count_));
        if (ev.error != drop_reason::none) drop(ev.error);
        break;
    }
  }
}

void kv_core::drop(drop_reason r) { metrics_.events_dropped.add(static_cast<std::size_t>(r)); }

std::optional<std::uint16_t> kv_core::resolve_adapter(const decoded_event& ev) {
  const bool has_name = ev.lora_name && !ev.lora_name->empty();
  if (!ev.lora_id && !has_name) return 0;
  if (ev.lora_id) {
    auto it = opts_.lora_names.find(*ev.lora_id);
    if (it != opts_.lora_names.end()) return adapters_.intern(it->second);
  }
  if (opts_.lora_name_as_adapter && has_name) return adapters_.intern(*ev.lora_name);
  bool first;
  if (ev.lora_id) {
    first = warned_lora_ids_.size() < warn_once_limit && warned_lora_ids_.insert(*ev.lora_id).second;
  } else {
    first = warned_lora_names_.size() < warn_once_limit && warned_lora_names_.insert(*ev.lora_name).second;
  }
  if (first && logger_) {
    logger_->warn(
        "dropping BlockStored for an unmapped LoRA id (fail-closed; add it to --lora-adapter-names to cache this adapter)",
        {{"lora_id", ev.lora_id ? std::to_string(*ev.lora_id) : ""}, {"lora_name", has_name ? *ev.lora_name : ""}});
  }
  return std::nullopt;
}

bool kv_core::kv_group_allowed(source_state& st, const decoded_event& ev) {
  if (ev.kind_name && warned_kinds_.size() < warn_once_limit && warned_kinds_.insert(*ev.kind_name).second &&
      logger_) {
    logger_->info("kv cache spec kind seen", {{"kind", *ev.kind_name}});
  }
  if (st.groups.size() < 2) return true;
  if (ev.kind_name) {
    return std::find(opts_.kv_spec_kinds.begin(), opts_.kv_spec_kinds.end(), *ev.kind_name) !=
           opts_.kv_spec_kinds.end();
  }
  std::int64_t g = ev.group_idx.value_or(0);
  return std::find(opts_.kv_groups.begin(), opts_.kv_groups.end(), g) != opts_.kv_groups.end();
}

void kv_core::apply_stored(std::size_t s, decoded_event& ev, std::int64_t ts_us) {
  auto mc = medium_class(ev.medium, ev.remote);
  metrics_.events.add(static_cast<std::size_t>(event_type_label::block_stored) *
                          static_cast<std::size_t>(medium_label::count_) +
                      (mc ? *mc : static_cast<std::size_t>(medium_label::other)));
  if (ev.error != drop_reason::none) return drop(ev.error);
  if (!mc) return drop(drop_reason::unknown_medium);
  auto adapter = resolve_adapter(ev);
  if (!adapter) return drop(drop_reason::unmapped_lora);
  if (!kv_group_allowed(sources_[s], ev)) return drop(drop_reason::kv_group);
  const std::int64_t bs = ev.block_size;
  if (bs <= 0) return drop(drop_reason::bad_block_size);
  if (ev.hashes.empty()) return;
  const std::int64_t n = opts_.routing_block_size > 0 ? opts_.routing_block_size : bs;
  if (bs % n != 0) return drop(drop_reason::block_size_mismatch);
  const std::size_t nblocks = ev.tokens.size() / static_cast<std::size_t>(bs);
  if (nblocks != ev.hashes.size()) {
    if (logger_) {
      logger_->warn("BlockStored produced no index entries (missing or mismatched token_ids)",
                    {{"block_hashes", std::to_string(ev.hashes.size())}, {"token_ids", std::to_string(ev.tokens.size())},
                     {"block_size", std::to_string(bs)}});
    }
    return drop(drop_reason::token_mismatch);
  }
  if (opts_.extra_keys_drop && ev.salted) return drop(drop_reason::extra_keys);
  const auto group = static_cast<std::uint8_t>(std::clamp<std::int64_t>(ev.group_idx.value_or(0), 0, 255));
  const auto src = static_cast<std::uint8_t>(s);

  bool has_prev = false;
  std::uint64_t prev = 0;
  std::uint32_t prev_tokens = 0;
  if (ev.parent) {
    // A9: a non-nil parent we do not know means we missed its event: never a fresh root.
    const m_slot* p = m_.find(m_key{*ev.parent, src, group, *mc});
    if (!p && *mc != 0) p = m_.find(m_key{*ev.parent, src, group, 0});  // CPU shares the GPU hash space
    if (!p) return drop(drop_reason::orphan);
    has_prev = true;
    prev = p->fp;
    prev_tokens = p->tokens;
  }
  std::size_t limit = nblocks;
  if (opts_.extra_keys_drop) {
    for (std::size_t i = 0; i < std::min(nblocks, ev.extra_nonempty.size()); ++i) {
      if (ev.extra_nonempty[i]) {
        limit = i;
        break;
      }
    }
    if (limit < nblocks) drop(drop_reason::extra_keys);  // once per event
  }
  const std::size_t per = static_cast<std::size_t>(bs / n);
  const tier t = tier_of_class(*mc);
  const std::uint32_t* tok = ev.tokens.data();
  for (std::size_t i = 0; i < limit; ++i) {
    keys_scratch_.clear();
    for (std::size_t j = 0; j < per; ++j) {
      std::uint64_t c = ic::index::content_hash(tok + i * bs + j * n, static_cast<std::size_t>(n));
      prev = has_prev ? ic::index::chain_link(prev, c) : c;
      has_prev = true;
      prev_tokens += static_cast<std::uint32_t>(n);
      keys_scratch_.push_back({prev, prev_tokens});
    }
    store_block(m_key{ev.hashes[i], src, group, *mc}, keys_scratch_.data(), per, *adapter, t, ts_us);
  }
}

void kv_core::apply_removed(std::size_t s, const decoded_event& ev, std::int64_t ts_us) {
  auto mc = medium_class(ev.medium, ev.remote);
  metrics_.events.add(static_cast<std::size_t>(event_type_label::block_removed) *
                          static_cast<std::size_t>(medium_label::count_) +
                      (mc ? *mc : static_cast<std::size_t>(medium_label::other)));
  if (ev.error != drop_reason::none) return drop(ev.error);
  if (!mc) return drop(drop_reason::unknown_medium);
  const auto group = static_cast<std::uint8_t>(std::clamp<std::int64_t>(ev.group_idx.value_or(0), 0, 255));
  const bool infer = opts_.ignore_block_removed && *mc == 0;
  std::vector<prefix_add> t2;
  for (std::uint64_t h : ev.hashes) {
    m_key k{h, static_cast<std::uint8_t>(s), group, *mc};
    m_slot* e = m_.find(k);
    if (!e) continue;  // unknown hash: nothing [REF]
    if (e->refcount > 1) {  // A11: another physical copy still holds it
      e->refcount--;
      continue;
    }
    m_slot copy = *e;
    m_.erase(k);
    release_entry(copy, absent_mode::evict, infer, ts_us, &t2);
  }
  push_t2(t2, ts_us);
}

void kv_core::clear_source(std::size_t s, std::int64_t ts_us) {
  clear_scratch_.clear();
  for (std::size_t i = 0; i < m_.capacity(); ++i) {
    if (!m_.used(i)) continue;
    const m_slot& e = m_.at(i);
    if (e.source == s) clear_scratch_.push_back(m_key{e.hash, e.source, e.group, e.mclass});
  }
  const bool everything = sources_.size() == 1 || clear_scratch_.size() == m_.size();
  for (const auto& k : clear_scratch_) {
    m_slot* e = m_.find(k);
    if (!e) continue;
    m_slot copy = *e;
    m_.erase(k);
    release_entry(copy, everything ? absent_mode::silent : absent_mode::evict, false, ts_us, nullptr);
  }
  if (!everything) return;  // A6: other ranks still hold keys; EVICTs were queued per key
  // One ALL_CLEARED for the replica; inferred T2 hints go with it [REF].
  for (auto& [k, rec] : inferred_) {
    if (r_slot* e = r_.find(k)) {
      tier before = e->reported;
      e->inferred = 0;
      on_transition(*e, before, absent_mode::silent, false, ts_us, nullptr);
    }
  }
  for (const auto& [k, rec] : inferred_) erase_r_if_dead(k.adapter, k.fp);
  inferred_.clear();
  inferred_fifo_.clear();
  pending_.clear();
  pending_ts_ = 0;
  op o;
  o.type = op_type::clear;
  o.ts_us = ts_us;
  queue(std::move(o));
}

// --- reverse map and residency (A10–A12) -------------------------------------------------------

void kv_core::keys_of(const m_slot& slot, std::vector<key_tokens>& out) const {
  out.clear();
  if (slot.multi) {
    auto it = multi_.find(m_key{slot.hash, slot.source, slot.group, slot.mclass});
    if (it != multi_.end()) {
      for (std::uint64_t fp : it->second) out.push_back({fp, 0});
    }
  }
  out.push_back({slot.fp, slot.tokens});
}

void kv_core::store_block(const m_key& k, const key_tokens* keys, std::size_t n, std::uint16_t adapter, tier t,
                          std::int64_t ts_us) {
  if (m_slot* e = m_.find(k)) {
    if (e->fp == keys[n - 1].fp && e->adapter == adapter) {
      if (e->refcount < 0xffff) e->refcount++;  // A11: the same block stored again
      return;
    }
    metrics_.hash_conflicts++;  // same engine hash, different content: replace
    m_slot copy = *e;
    m_.erase(k);
    release_entry(copy, absent_mode::evict, false, ts_us, nullptr);
  }
  enforce_cap();
  auto [slot, inserted] = m_.insert(k);
  (void)inserted;
  slot->fp = keys[n - 1].fp;
  slot->tokens = keys[n - 1].tokens;
  slot->stamp = ++stamp_;
  slot->refcount = 1;
  slot->adapter = adapter;
  slot->multi = n > 1 ? 1 : 0;
  const std::uint32_t stamp = slot->stamp;
  if (n > 1) {
    auto& v = multi_[k];
    v.clear();
    for (std::size_t j = 0; j + 1 < n; ++j) v.push_back(keys[j].fp);
  }
  fifo_rec rec{k.hash, stamp, k.source, k.group, k.mclass, 0};
  fifo_.push_back(rec);
  if (t == tier::t2) store_only_fifo_.emplace_back(rec, now_ms_ + opts_.t2_retention_ms);
  for (std::size_t j = 0; j < n; ++j) add_holder(adapter, keys[j].fp, keys[j].tokens, t, ts_us);
}

void kv_core::release_entry(const m_slot& slot, absent_mode mode, bool infer_t2, std::int64_t ts_us,
                            std::vector<prefix_add>* t2_out) {
  std::vector<key_tokens> keys;
  keys_of(slot, keys);
  if (slot.multi) multi_.erase(m_key{slot.hash, slot.source, slot.group, slot.mclass});
  for (const auto& kt : keys) {
    remove_holder(slot.adapter, kt.fp, tier_of_class(slot.mclass), mode, infer_t2, ts_us, t2_out);
  }
}

tier kv_core::reported_of(const r_slot& e) {
  if (e.holders[0] > 0) return tier::t1;
  if (e.holders[1] > 0 || e.inferred) return tier::t2;
  if (e.holders[2] > 0) return tier::t3;
  return tier::absent;
}

void kv_core::add_holder(std::uint16_t adapter, std::uint64_t fp, std::uint32_t tokens, tier t, std::int64_t ts_us) {
  auto [e, inserted] = r_.insert(r_key{fp, adapter});
  if (inserted) e->reported = tier::absent;
  tier before = e->reported;
  const int ti = static_cast<int>(t) - 1;
  if (e->holders[ti] < 0xffff) e->holders[ti]++;
  if (t == tier::t1 && e->inferred) {
    e->inferred = 0;  // stored again: the inferred T2 is superseded
    inferred_.erase(r_key{fp, adapter});
  }
  e->tokens = tokens;
  on_transition(*e, before, absent_mode::evict, false, ts_us, nullptr);
}

void kv_core::remove_holder(std::uint16_t adapter, std::uint64_t fp, tier t, absent_mode mode, bool infer_t2,
                            std::int64_t ts_us, std::vector<prefix_add>* t2_out) {
  r_slot* e = r_.find(r_key{fp, adapter});
  if (!e) return;
  tier before = e->reported;
  const int ti = static_cast<int>(t) - 1;
  if (e->holders[ti] > 0) e->holders[ti]--;
  bool inferred_now = false;
  if (infer_t2 && t == tier::t1 && e->holders[0] == 0 && e->holders[1] == 0 && e->holders[2] == 0) {
    // L2 mode [REF]: a GPU eviction leaves the block in the offload tier (a prediction).
    e->inferred = 1;
    std::int64_t expire = now_ms_ + opts_.t2_retention_ms;
    inferred_[r_key{fp, adapter}] = inferred_rec{ts_us, expire};
    inferred_fifo_.emplace_back(r_key{fp, adapter}, expire);
    inferred_now = true;
  }
  on_transition(*e, before, mode, inferred_now, ts_us, t2_out);
  erase_r_if_dead(adapter, fp);
}

void kv_core::on_transition(r_slot& e, tier before, absent_mode mode, bool inferred_now, std::int64_t ts_us,
                            std::vector<prefix_add>* t2_out) {
  const tier after = reported_of(e);
  if (after == before) return;
  e.reported = after;
  tier_count_[static_cast<int>(before)]--;
  tier_count_[static_cast<int>(after)]++;
  if (suppress_ops_) return;
  if (after == tier::absent) {
    if (mode == absent_mode::silent) return;  // unknown fate (LRU, expiry) or covered by a CLEAR
    flush();  // adds before the eviction, in order [REF]
    op o;
    o.type = op_type::evict;
    o.ts_us = ts_us;
    o.fp = e.fp;
    o.adapter = e.adapter;
    queue(std::move(o));
    return;
  }
  if (inferred_now && after == tier::t2 && t2_out) {
    t2_out->push_back(prefix_add{e.fp, e.tokens, e.adapter, tier::t2});
    return;
  }
  pending_.push_back(prefix_add{e.fp, e.tokens, e.adapter, after});
  if (ts_us > 0) pending_ts_ = ts_us;
  if (pending_.size() >= opts_.max_batch_entries) flush();
}

void kv_core::erase_r_if_dead(std::uint16_t adapter, std::uint64_t fp) {
  r_slot* e = r_.find(r_key{fp, adapter});
  if (e && e->holders[0] == 0 && e->holders[1] == 0 && e->holders[2] == 0 && !e->inferred &&
      e->reported == tier::absent) {
    r_.erase(r_key{fp, adapter});
  }
}

bool kv_core::forget_inferred(const r_key& k, std::int64_t expire_ms) {
  auto it = inferred_.find(k);
  if (it == inferred_.end() || it->second.expire_ms != expire_ms) return false;  // superseded
  inferred_.erase(it);
  if (r_slot* e = r_.find(k)) {
    tier before = e->reported;
    e->inferred = 0;
    on_transition(*e, before, absent_mode::silent, false, 0, nullptr);
    erase_r_if_dead(k.adapter, k.fp);
  }
  return true;
}

bool kv_core::forget_entry(const fifo_rec& rec) {
  m_key k{rec.hash, rec.source, rec.group, rec.mclass};
  m_slot* e = m_.find(k);
  if (!e || e->stamp != rec.stamp) return false;  // stale record (removed or re-stored)
  m_slot copy = *e;
  m_.erase(k);
  // We do not know the block left the engine (A10) or it was only a local T2 prediction
  // (A12): no RPC; the server's TTL ages the key.
  release_entry(copy, absent_mode::silent, false, 0, nullptr);
  return true;
}

void kv_core::enforce_cap() {
  while (m_.size() + inferred_.size() >= opts_.max_tracked_blocks) {
    if (!inferred_fifo_.empty()) {  // inferred T2 entries are predictions: they go first
      auto [k, expire] = inferred_fifo_.front();
      inferred_fifo_.pop_front();
      if (forget_inferred(k, expire)) metrics_.tracked_evicted++;
      continue;
    }
    if (fifo_.empty()) break;
    fifo_rec rec = fifo_.front();
    fifo_.pop_front();
    if (forget_entry(rec)) metrics_.tracked_evicted++;
  }
  if (fifo_.size() > 2 * m_.size() + 1024) {
    std::deque<fifo_rec> live;
    for (const auto& rec : fifo_) {
      const m_slot* e = m_.find(m_key{rec.hash, rec.source, rec.group, rec.mclass});
      if (e && e->stamp == rec.stamp) live.push_back(rec);
    }
    fifo_.swap(live);
  }
}

void kv_core::expire(std::int64_t now_ms) {
  while (!inferred_fifo_.empty() && inferred_fifo_.front().second <= now_ms) {
    auto [k, expire] = inferred_fifo_.front();
    inferred_fifo_.pop_front();
    forget_inferred(k, expire);
  }
  while (!store_only_fifo_.empty() && store_only_fifo_.front().second <= now_ms) {
    fifo_rec rec = store_only_fifo_.front().first;
    store_only_fifo_.pop_front();
    forget_entry(rec);
  }
}

// --- operations ----------------------------------------------------------------------------

void kv_core::queue(op o) {
  if (suppress_ops_) return;
  log_.push(std::move(o));
}

void kv_core::chunked(op_type t, std::int64_t ts_us, const std::vector<prefix_add>& entries, std::vector<op>* out) {
  for (std::size_t i = 0; i < entries.size(); i += opts_.max_batch_entries) {
    op o;
    o.type = t;
    o.ts_us = ts_us;
    std::size_t end = std::min(entries.size(), i + opts_.max_batch_entries);
    o.entries.assign(entries.begin() + static_cast<std::ptrdiff_t>(i), entries.begin() + static_cast<std::ptrdiff_t>(end));
    if (out) out->push_back(std::move(o));
    else queue(std::move(o));
  }
}

void kv_core::flush() {
  if (pending_.empty()) return;
  if (!suppress_ops_) chunked(op_type::add, pending_ts_, pending_, nullptr);
  pending_.clear();
  pending_ts_ = 0;
}

void kv_core::push_t2(std::vector<prefix_add>& entries, std::int64_t ts_us) {
  if (entries.empty()) return;
  flush();
  chunked(op_type::t2, ts_us, entries, nullptr);
}

void kv_core::full_report(std::vector<op>& out) {
  // A18 step 3: every key with a reported tier; T1/T3/observed T2 at ts 0, inferred T2 at
  // its eviction ts in CSUs of their own.
  std::vector<prefix_add> current;
  std::map<std::int64_t, std::vector<prefix_add>> inferred_by_ts;
  for (std::size_t i = 0; i < r_.capacity(); ++i) {
    if (!r_.used(i)) continue;
    const r_slot& e = r_.at(i);
    if (e.reported == tier::absent) continue;
    if (e.reported == tier::t2 && e.inferred && e.holders[1] == 0) {
      auto it = inferred_.find(r_key{e.fp, e.adapter});
      inferred_by_ts[it != inferred_.end() ? it->second.ts_us : 0].push_back({e.fp, e.tokens, e.adapter, tier::t2});
      continue;
    }
    current.push_back({e.fp, e.tokens, e.adapter, e.reported});
  }
  chunked(op_type::add, 0, current, &out);
  for (auto& [ts, entries] : inferred_by_ts) chunked(op_type::t2, ts, entries, &out);
}

void kv_core::do_resync(resync_reason r) {
  if (startup_left_ > 0) {
    // Not during the startup replay: keep the request, so the sender waiting for it is
    // answered once the tables are rebuilt.
    resync_request_.store(static_cast<int>(r) + 1);
    return;
  }
  pending_.clear();
  pending_ts_ = 0;
  std::vector<op> ops;
  ops.emplace_back();
  ops.back().type = op_type::clear;
  full_report(ops);
  log_.replace(std::move(ops));
  metrics_.resyncs.add(static_cast<std::size_t>(r));
  if (logger_) logger_->info("resync queued", {{"reason", resync_reason_name(r)}});
}

void kv_core::refresh_step(std::int64_t now_ms) {
  if (opts_.refresh_interval_ms <= 0 || suppress_ops_ || log_.resync_needed()) {
    last_refresh_ms_ = now_ms;
    return;
  }
  const std::int64_t elapsed = now_ms - last_refresh_ms_;
  if (elapsed <= 0) return;
  last_refresh_ms_ = now_ms;
  // A19: walk the table once per interval, a slice per tick, so the load is spread.
  const std::size_t cap = r_.capacity();
  refresh_credit_ += static_cast<double>(cap) * static_cast<double>(elapsed) / static_cast<double>(opts_.refresh_interval_ms);
  std::size_t step = std::min(static_cast<std::size_t>(refresh_credit_), cap);
  refresh_credit_ -= static_cast<double>(step);
  if (refresh_credit_ > static_cast<double>(cap)) refresh_credit_ = 0;
  for (std::size_t k = 0; k < step; ++k) {
    if (refresh_cursor_ >= cap) refresh_cursor_ = 0;
    std::size_t i = refresh_cursor_++;
    if (!r_.used(i)) continue;
    const r_slot& e = r_.at(i);
    if (e.reported != tier::t1 && e.reported != tier::t3) continue;  // inferred T2 is never refreshed
    refresh_buf_.push_back({e.fp, e.tokens, e.adapter, e.reported});
  }
  chunked(op_type::add, 0, refresh_buf_, nullptr);  // ts 0: "resident now"
  refresh_buf_.clear();
}

void kv_core::update_gauges() {
  metrics_.tracked_blocks = m_.size();
  for (int t = 1; t <= 3; ++t) metrics_.residency_keys.set(static_cast<std::size_t>(t), tier_count_[t]);
  metrics_.reported_keys = tier_count_[1] + tier_count_[2] + tier_count_[3];
}

tier kv_core::reported(const std::string& adapter, std::uint64_t fp) const {
  auto* self = const_cast<kv_core*>(this);
  const r_slot* e = self->r_.find(r_key{fp, self->adapters_.intern(adapter)});
  return e ? e->reported : tier::absent;
}

std::uint32_t kv_core::refcount(std::size_t source, std::uint64_t engine_hash) const {
  auto* self = const_cast<kv_core*>(this);
  const m_slot* e = self->m_.find(m_key{engine_hash, static_cast<std::uint8_t>(source), 0, 0});
  return e ? e->refcount : 0;
}

// --- labels --------------------------------------------------------------------------------

const char* batch_drop_name(batch_drop r) {
  switch (r) {
    case batch_drop::decode: return "decode";
    case batch_drop::topic: return "topic";
    default: return "frames";
  }
}

const char* replay_result_name(replay_result r) {
  switch (r) {
    case replay_result::ok: return "ok";
    case replay_result::partial: return "partial";
    case replay_result::truncated: return "truncated";
    case replay_result::timeout: return "timeout";
    default: return "unavailable";
  }
}

const char* event_type_name(event_type_label t) {
  switch (t) {
    case event_type_label::block_stored: return "BlockStored";
    case event_type_label::block_removed: return "BlockRemoved";
    case event_type_label::all_cleared: return "AllBlocksCleared";
    default: return "unknown";
  }
}

const char* medium_label_name(medium_label m) {
  switch (m) {
    case medium_label::gpu: return "GPU";
    case medium_label::cpu: return "CPU";
    case medium_label::storage: return "STORAGE";
    default: return "other";
  }
}

const char* resync_reason_name(resync_reason r) {
  switch (r) {
    case resync_reason::start: return "start";
    case resync_reason::overflow: return "overflow";
    default: return "outage";
  }
}

}  // namespace ic::kvevent
