#include "tools/kvevent_subscriber/events.hpp"

#include <xxhash.h>

#include "tools/kvevent_subscriber/msgpack_reader.hpp"

namespace ic::kvevent {
namespace {

// Seed for hashing str/bin engine hashes that are not 8 bytes long down to 64 bits.
constexpr std::uint64_t bytes_hash_seed = 0x6b76'6576'656e'7473ull;

std::uint64_t be8(std::string_view b) {
  std::uint64_t v = 0;
  for (unsigned char ch : b) v = (v << 8) | ch;
  return v;
}

// Normalises one hash value (§2.5); false (with the reason) when it is not a hash.
bool hash_of(const mp_value& v, std::uint64_t& out, drop_reason& err) {
  switch (v.type) {
    case mp_type::uint: out = v.u; return true;
    case mp_type::sint: out = static_cast<std::uint64_t>(v.i); return true;
    case mp_type::str:
    case mp_type::bin:
      out = v.bytes.size() == 8 ? be8(v.bytes)
                                : XXH3_64bits_withSeed(v.bytes.data(), v.bytes.size(), bytes_hash_seed);
      return true;
    case mp_type::nil: err = drop_reason::nil_hash; return false;
    default: err = drop_reason::decode; return false;
  }
}

class event_decoder {
 public:
  event_decoder(mp_reader& r, wire_dialect d, decoded_event& ev) : r_(r), dialect_(d), ev_(ev) {}

  void run() {
    decode();
    // One extra_keys entry per block of the event, whatever way decoding ended (an event
    // dropped half-way, or a kind that names no blocks to flag): entries past the last hash
    // name no block and are dropped.
    if (ev_.extra_nonempty.size() > ev_.hashes.size()) ev_.extra_nonempty.resize(ev_.hashes.size());
  }

 private:
  void decode() {
    mp_value v;
    if (!r_.next(v)) return fail(drop_reason::decode);
    if (v.type == mp_type::array) return positional(v.count);
    if (v.type == mp_type::map) return tagged_map(v.count);
    fail(drop_reason::decode);
  }

  void fail(drop_reason r) {
    if (ev_.error == drop_reason::none) ev_.error = r;
  }

  static event_kind kind_of(std::string_view tag) {
    if (tag == "BlockStored") return event_kind::block_stored;
    if (tag == "BlockRemoved") return event_kind::block_removed;
    if (tag == "AllBlocksCleared") return event_kind::all_cleared;
    return event_kind::unknown;
  }

  bool hashes() {
    mp_value v;
    if (!r_.next(v) || v.type != mp_type::array) { fail(drop_reason::decode); return false; }
    ev_.hashes.reserve(v.count);
    for (std::uint32_t i = 0; i < v.count; ++i) {
      mp_value h;
      std::uint64_t x = 0;
      drop_reason err = drop_reason::none;
      if (!r_.next(h)) { fail(drop_reason::decode); return false; }
      if (h.type == mp_type::array || h.type == mp_type::map) { fail(drop_reason::decode); return false; }
      if (!hash_of(h, x, err)) { fail(err); return false; }
      ev_.hashes.push_back(x);
    }
    return true;
  }

  bool parent() {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type == mp_type::nil) return true;
    std::uint64_t x = 0;
    drop_reason err = drop_reason::none;
    if (v.type == mp_type::array || v.type == mp_type::map || !hash_of(v, x, err)) {
      fail(drop_reason::decode);
      return false;
    }
    ev_.parent = x;
    return true;
  }

  bool tokens() {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type == mp_type::nil) return true;  // nil token_ids = empty [REF]
    if (v.type != mp_type::array) { fail(drop_reason::decode); return false; }
    ev_.tokens.resize(v.count);
    std::uint32_t* out = ev_.tokens.data();
    for (std::uint32_t i = 0; i < v.count; ++i) {
      mp_value t;
      if (!r_.next(t)) { fail(drop_reason::decode); return false; }
      if (t.type != mp_type::uint || t.u > 0xffffffffull) {
        // Out of [0, 2^32-1], or not an integer at all (SGLang EAGLE bigram pairs).
        fail(drop_reason::token_range);
        return false;
      }
      out[i] = static_cast<std::uint32_t>(t.u);
    }
    return true;
  }

  bool block_size() {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type == mp_type::uint) {
      if (v.u > 0x7fffffffull) { fail(drop_reason::bad_block_size); return false; }
      ev_.block_size = static_cast<std::int64_t>(v.u);
    } else if (v.type == mp_type::sint) {
      ev_.block_size = v.i;
    } else {
      fail(drop_reason::decode);
      return false;
    }
    return true;
  }

  bool lora_id() {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type == mp_type::nil) return true;
    if (v.type == mp_type::uint && v.u <= 0x7fffffffffffffffull) {
      ev_.lora_id = static_cast<std::int64_t>(v.u);
    } else if (v.type == mp_type::sint) {
      ev_.lora_id = v.i;
    } else {
      fail(drop_reason::decode);
      return false;
    }
    return true;
  }

  // Optional fields: a value of the wrong type counts as absent (A2), never as an error.
  bool opt_string(std::optional<std::string>& out) {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type == mp_type::str) out = std::string(v.bytes);
    return r_.skip_contents(v) || (fail(drop_reason::decode), false);
  }

  bool opt_int(std::optional<std::int64_t>& out) {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type == mp_type::uint && v.u <= 0x7fffffffffffffffull) out = static_cast<std::int64_t>(v.u);
    else if (v.type == mp_type::sint) out = v.i;
    return r_.skip_contents(v) || (fail(drop_reason::decode), false);
  }

  bool locality() {
    std::optional<std::string> loc;
    if (!opt_string(loc)) return false;
    ev_.remote = loc && (*loc == "REMOTE" || *loc == "remote");
    return true;
  }

  bool extra_keys() {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type != mp_type::array) return r_.skip_contents(v) || (fail(drop_reason::decode), false);  // absent
    ev_.extra_nonempty.assign(v.count, 0);
    for (std::uint32_t b = 0; b < v.count; ++b) {
      mp_value e;
      if (!r_.next(e)) { fail(drop_reason::decode); return false; }
      if (e.type != mp_type::array) {
        if (!r_.skip_contents(e)) { fail(drop_reason::decode); return false; }
        continue;
      }
      for (std::uint32_t k = 0; k < e.count; ++k) {
        mp_value item;
        if (!r_.next(item)) { fail(drop_reason::decode); return false; }
        if (item.type == mp_type::str) {
          ev_.extra_strings.emplace_back(b, item.bytes);
        } else {
          ev_.extra_nonempty[b] = 1;
          if (!r_.skip_contents(item)) { fail(drop_reason::decode); return false; }
        }
      }
    }
    return true;
  }

  bool metadata() {
    mp_value v;
    if (!r_.next(v)) { fail(drop_reason::decode); return false; }
    if (v.type != mp_type::map) return r_.skip_contents(v) || (fail(drop_reason::decode), false);
    for (std::uint32_t k = 0; k < v.count; ++k) {
      mp_value key;
      if (!r_.next(key)) { fail(drop_reason::decode); return false; }
      bool salt = key.type == mp_type::str && key.bytes == "cache_salt";
      if (!r_.skip_contents(key)) { fail(drop_reason::decode); return false; }
      mp_value val;
      mp_reader probe = r_;
      if (!probe.next(val)) { fail(drop_reason::decode); return false; }
      if (salt && val.type != mp_type::nil && !(val.is_bytes() && val.bytes.empty())) ev_.salted = true;
      if (!r_.skip()) { fail(drop_reason::decode); return false; }
    }
    return true;
  }

  void finish() {
    for (const auto& [b, item] : ev_.extra_strings) {
      if (!ev_.lora_name || item != *ev_.lora_name) ev_.extra_nonempty[b] = 1;
    }
    ev_.extra_strings.clear();
  }

  void positional(std::uint32_t n) {
    mp_value tag;
    if (n == 0 || !r_.next(tag) || tag.type != mp_type::str) return fail(drop_reason::decode);
    ev_.kind = kind_of(tag.bytes);
    switch (ev_.kind) {
      case event_kind::block_stored: {
        if (n < 5) return fail(drop_reason::decode);  // up to block_size is required [REF]
        if (!hashes() || !parent() || !tokens() || !block_size()) return;
        std::uint32_t idx = 5;
        if (idx < n) { if (!lora_id()) return; ++idx; }
        if (idx < n) { if (!opt_string(ev_.medium)) return; ++idx; }
        if (dialect_ == wire_dialect::sglang) {
          if (idx < n) { if (!metadata()) return; ++idx; }
        } else {
          if (idx < n) { if (!opt_string(ev_.lora_name)) return; ++idx; }
          if (idx < n) { if (!extra_keys()) return; ++idx; }
          if (idx < n) { if (!opt_int(ev_.group_idx)) return; ++idx; }
          if (idx < n) { if (!opt_string(ev_.kind_name)) return; ++idx; }
        }
        finish();
        return;
      }
      case event_kind::block_removed: {
        if (n < 2) return fail(drop_reason::decode);
        if (!hashes()) return;
        if (n > 2 && !opt_string(ev_.medium)) return;
        if (n > 3) opt_int(ev_.group_idx);
        return;
      }
      default:
        return;  // AllBlocksCleared needs nothing more; unknown tags are skipped
    }
  }

  void tagged_map(std::uint32_t n) {
    bool have_hashes = false, have_bs = false;
    for (std::uint32_t k = 0; k < n; ++k) {
      mp_value key;
      if (!r_.next(key)) return fail(drop_reason::decode);
      if (key.type != mp_type::str) {
        if (key.type == mp_type::array || key.type == mp_type::map) return fail(drop_reason::decode);
        if (!r_.skip()) return fail(drop_reason::decode);
        continue;
      }
      std::string_view name = key.bytes;
      bool ok = true;
      if (name == "type") {
        mp_value t;
        if (!r_.next(t)) return fail(drop_reason::decode);
        if (t.type != mp_type::str) return fail(drop_reason::decode);
        ev_.kind = kind_of(t.bytes);
      } else if (name == "block_hashes") {
        ok = hashes();
        have_hashes = true;
      } else if (name == "parent_block_hash") {
        ok = parent();
      } else if (name == "token_ids") {
        ok = tokens();
      } else if (name == "block_size") {
        ok = block_size();
        have_bs = true;
      } else if (name == "lora_id") {
        ok = lora_id();
      } else if (name == "medium") {
        ok = opt_string(ev_.medium);
      } else if (name == "lora_name") {
        ok = opt_string(ev_.lora_name);
      } else if (name == "extra_keys") {
        ok = extra_keys();
      } else if (name == "group_idx") {
        ok = opt_int(ev_.group_idx);
      } else if (name == "kv_cache_spec_kind") {
        ok = opt_string(ev_.kind_name);
      } else if (name == "locality") {
        ok = locality();
      } else if (name == "metadata") {
        ok = metadata();
      } else {
        ok = r_.skip();  // unknown keys are ignored (§2.4)
        if (!ok) fail(drop_reason::decode);
      }
      if (!ok) return;
    }
    if (ev_.kind == event_kind::block_stored) {
      if (!have_hashes || !have_bs) return fail(drop_reason::decode);  // "block_size is required"
      finish();
    } else if (ev_.kind == event_kind::block_removed && !have_hashes) {
      fail(drop_reason::decode);
    }
  }

  mp_reader& r_;
  wire_dialect dialect_;
  decoded_event& ev_;
};

bool read_ts(mp_reader& r, double& ts) {
  mp_value v;
  if (!r.next(v)) return false;
  if (v.type == mp_type::f64) ts = v.d;
  else if (v.type == mp_type::uint) ts = static_cast<double>(v.u);
  else if (v.type == mp_type::sint) ts = static_cast<double>(v.i);
  else if (v.type == mp_type::nil) ts = 0;
  else return false;
  return true;
}

bool read_rank(mp_reader& r, std::optional<std::int64_t>& rank) {
  mp_value v;
  mp_reader probe = r;
  if (!probe.next(v)) return false;
  if (v.type == mp_type::uint) rank = static_cast<std::int64_t>(v.u & 0x7fffffffffffffffull);
  else if (v.type == mp_type::sint) rank = v.i;
  return r.skip();
}

bool read_events(mp_reader& r, wire_dialect dialect, decoded_batch& out) {
  mp_value v;
  if (!r.next(v) || v.type != mp_type::array) return false;
  if (out.events.size() < v.count) out.events.resize(v.count);
  for (std::uint32_t i = 0; i < v.count; ++i) {
    const std::uint8_t* start = r.position();
    if (!r.skip()) return false;  // truncated: the envelope is malformed
    mp_reader sub(start, static_cast<std::size_t>(r.position() - start));
    decoded_event& ev = out.events[i];
    ev.reset();
    event_decoder(sub, dialect, ev).run();
  }
  out.size = v.count;
  return true;
}

}  // namespace

const char* drop_reason_name(drop_reason r) {
  switch (r) {
    case drop_reason::none: return "none";
    case drop_reason::decode: return "decode";
    case drop_reason::bad_block_size: return "bad_block_size";
    case drop_reason::token_range: return "token_range";
    case drop_reason::token_mismatch: return "token_mismatch";
    case drop_reason::nil_hash: return "nil_hash";
    case drop_reason::unmapped_lora: return "unmapped_lora";
    case drop_reason::orphan: return "orphan";
    case drop_reason::extra_keys: return "extra_keys";
    case drop_reason::kv_group: return "kv_group";
    case drop_reason::unknown_medium: return "unknown_medium";
    case drop_reason::block_size_mismatch: return "block_size_mismatch";
    default: return "unknown";
  }
}

void decoded_event::reset() {
  kind = event_kind::unknown;
  error = drop_reason::none;
  hashes.clear();
  parent.reset();
  tokens.clear();
  block_size = 0;
  lora_id.reset();
  medium.reset();
  lora_name.reset();
  extra_nonempty.clear();
  salted = false;
  group_idx.reset();
  kind_name.reset();
  remote = false;
  extra_strings.clear();
}

bool decode_batch(std::string_view payload, wire_dialect dialect, decoded_batch& out) {
  out.size = 0;
  out.ts = 0;
  out.rank.reset();
  mp_reader r(payload);
  mp_value v;
  if (!r.next(v)) return false;
  if (v.type == mp_type::array) {
    if (v.count < 2) return false;
    if (!read_ts(r, out.ts) || !read_events(r, dialect, out)) { out.size = 0; return false; }
    if (v.count >= 3 && !read_rank(r, out.rank)) { out.size = 0; return false; }
    if (v.count > 3 && !r.skip_n(v.count - 3)) { out.size = 0; return false; }
  } else if (v.type == mp_type::map) {
    bool have_ts = false, have_events = false;
    for (std::uint32_t k = 0; k < v.count; ++k) {
      mp_value key;
      bool ok;
      if (!r.next(key)) { out.size = 0; return false; }
      if (key.type == mp_type::str && key.bytes == "ts") {
        ok = read_ts(r, out.ts);
        have_ts = true;
      } else if (key.type == mp_type::str && key.bytes == "events" && !have_events) {
        ok = read_events(r, dialect, out);
        have_events = true;
      } else if (key.type == mp_type::str && key.bytes == "data_parallel_rank") {
        ok = read_rank(r, out.rank);
      } else {
        ok = (key.type != mp_type::array && key.type != mp_type::map) && r.skip();
      }
      if (!ok) { out.size = 0; return false; }
    }
    if (!have_ts || !have_events) { out.size = 0; return false; }
  } else {
    return false;
  }
  if (!r.at_end()) {  // trailing bytes: not one msgpack value
    out.size = 0;
    return false;
  }
  return true;
}

std::int64_t micros_from_seconds(double ts) {
  if (!(ts > 0)) return 0;
  double us = ts * 1e6;
  if (us >= 9.2e18) return 0;
  return static_cast<std::int64_t>(us);
}

}  // namespace ic::kvevent
