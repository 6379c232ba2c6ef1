// The subscriber's engine payloads (tools/kvevent_subscriber): `decode_batch` of one msgpack
// KVEventBatch in either dialect never crashes and refuses with an empty batch; decoding into
// a reused `decoded_batch` (as the core does) gives what a fresh one gives; and the whole
// core path (decode, sequence tracking, apply, re-chunking, flush) takes the same bytes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "tools/kvevent_subscriber/core.hpp"
#include "tools/kvevent_subscriber/events.hpp"

namespace kv = ic::kvevent;

namespace {

bool same_ts(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_event(const kv::decoded_event& a, const kv::decoded_event& b) {
  return a.kind == b.kind && a.error == b.error && a.hashes == b.hashes && a.parent == b.parent &&
         a.tokens == b.tokens && a.block_size == b.block_size && a.lora_id == b.lora_id &&
         a.medium == b.medium && a.lora_name == b.lora_name && a.extra_nonempty == b.extra_nonempty &&
         a.salted == b.salted && a.group_idx == b.group_idx && a.kind_name == b.kind_name &&
         a.remote == b.remote;
}

// Runs `payload` through a fresh core: two live messages (seq 0 and 1), a tick, a flush.
void through_core(std::string_view payload, kv::wire_dialect dialect, std::uint8_t knobs) {
  kv::core_options o;
  o.dialect = dialect;
  o.window_ms = 10;
  o.clear_on_start = false;
  o.refresh_interval_ms = 0;
  o.routing_block_size = (knobs & 2) ? 32 : 0;
  o.lora_name_as_adapter = (knobs & 4) != 0;
  o.extra_keys_drop = (knobs & 8) == 0;
  o.max_tracked_blocks = 64;  // small: the bounded reverse map evicts within one input
  kv::op_log log(1000);
  kv::adapter_registry adapters;
  kv::core_metrics metrics(o.sources);
  kv::logger lg;
  lg.set_sink([](kv::log_level, const std::string&, const kv::log_fields&) {});
  kv::kv_core core(o, log, adapters, metrics, nullptr, &lg);
  core.start(1000);
  core.on_live(0, kv::raw_message{"kv-events", true, 0, std::string(payload)}, 1000);
  core.on_live(0, kv::raw_message{"kv-events", true, 1, std::string(payload)}, 1005);
  core.tick(1020);
  core.flush();
  kv::op out;
  std::size_t popped = 0;
  while (log.pop(out, std::chrono::milliseconds(0))) ++popped;
  ic::fuzz::check(popped <= 1000, "the op log holds at most its bound");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ic::fuzz::cursor in(data, size);
  const std::uint8_t knobs = in.byte();
  const auto dialect = (knobs & 1) ? kv::wire_dialect::sglang : kv::wire_dialect::vllm;
  const std::string_view payload = in.rest();

  static kv::decoded_batch reused;  // carries capacity and stale events from earlier inputs
  kv::decoded_batch fresh;
  const bool ok = kv::decode_batch(payload, dialect, fresh);
  const bool ok_reused = kv::decode_batch(payload, dialect, reused);
  ic::fuzz::check(ok == ok_reused, "a reused batch decodes like a fresh one");
  if (!ok) {
    ic::fuzz::check(fresh.size == 0 && reused.size == 0, "a refused envelope leaves size 0");
  } else {
    ic::fuzz::check(fresh.size <= fresh.events.size(), "size counts decoded events");
    ic::fuzz::check(fresh.size == reused.size && same_ts(fresh.ts, reused.ts) && fresh.rank == reused.rank,
                    "a reused batch has the fresh envelope");
    for (std::size_t i = 0; i < fresh.size; ++i) {
      const auto& e = fresh.events[i];
      ic::fuzz::check(same_event(e, reused.events[i]), "a reused event decodes like a fresh one");
      ic::fuzz::check(e.extra_nonempty.empty() || e.extra_nonempty.size() <= e.hashes.size(),
                      "extra_keys flags name blocks of the event");
    }
    ic::fuzz::check(kv::micros_from_seconds(fresh.ts) >= 0, "timestamps are never negative");
  }
  through_core(payload, dialect, knobs);
  return 0;
}
