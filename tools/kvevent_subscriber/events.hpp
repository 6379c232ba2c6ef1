// Engine KV-event decoding: one msgpack `KVEventBatch` payload → plain structs.
//
// Accepts every layout of spec/adapter.md §2.3–§2.4: the envelope as an array of ≥ 2
// elements `[ts, events, rank?, …]` or a map `{ts, events, data_parallel_rank?}`, and each
// event either positional (tag at index 0; vLLM and SGLang dialects differ at index 7) or
// a tagged map (`type` key, any key order, unknown keys ignored). Errors are isolated per
// event (A3): a malformed event gets a `drop_reason` and the rest of the batch still
// decodes; only a malformed envelope (truncated, wrong shape, trailing bytes) fails the
// whole batch. Decoding never allocates in proportion to a declared length, only to bytes
// actually present, and `decoded_batch` is reused across calls to keep the hot path free of
// allocations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ic::kvevent {

/// Why one event was not applied (metric label `reason`, spec A3). `none` = applied.
enum class drop_reason : std::uint8_t {
  none,
  decode,
  bad_block_size,
  token_range,
  token_mismatch,
  nil_hash,
  unmapped_lora,
  orphan,
  extra_keys,
  kv_group,
  unknown_medium,
  block_size_mismatch,
  count_
};

/// The metric label of `r`.
const char* drop_reason_name(drop_reason r);

/// Which positional layout to read (spec A2): index 7 is `lora_name` (vLLM) or the
/// `metadata` map (SGLang).
enum class wire_dialect : std::uint8_t { vllm, sglang };

/// The kind of one decoded event.
enum class event_kind : std::uint8_t { block_stored, block_removed, all_cleared, unknown };

/// One event, every field the adapter reads. Engine hashes are normalised to u64: integers
/// as their 64-bit two's-complement value, 8-byte str/bin as big-endian, other str/bin as
/// XXH3-64 of the bytes (spec §2.5 compares hashes only with each other).
struct decoded_event {
  event_kind kind = event_kind::unknown;
  drop_reason error = drop_reason::none;  ///< set when the event is malformed
  std::vector<std::uint64_t> hashes;
  std::optional<std::uint64_t> parent;
  std::vector<std::uint32_t> tokens;
  std::int64_t block_size = 0;
  std::optional<std::int64_t> lora_id;
  std::optional<std::string> medium;
  std::optional<std::string> lora_name;
  /// Per block (index into `hashes`): true when its `extra_keys` entry, with the
  /// `lora_name` string removed, is non-empty (cache_salt, multimodal, embeddings; A14).
  std::vector<std::uint8_t> extra_nonempty;
  bool salted = false;  ///< SGLang `metadata.cache_salt` present (whole event, A14)
  std::optional<std::int64_t> group_idx;
  std::optional<std::string> kind_name;  ///< `kv_cache_spec_kind`
  bool remote = false;                   ///< `locality == "REMOTE"`
  /// Scratch: (block, item) string items of `extra_keys`, resolved against `lora_name`
  /// once the whole event is read (map key order is free).
  std::vector<std::pair<std::uint32_t, std::string_view>> extra_strings;

  void reset();
};

/// One decoded batch; `events` keeps its capacity between calls (only `size` are valid).
struct decoded_batch {
  double ts = 0;
  std::optional<std::int64_t> rank;
  std::vector<decoded_event> events;
  std::size_t size = 0;
};

/// Decodes `payload` into `out`. False when the envelope is malformed (the caller counts
/// `batches_dropped_total{reason="decode"}`); then `out.size` is 0.
bool decode_batch(std::string_view payload, wire_dialect dialect, decoded_batch& out);

/// Converts a batch `ts` in float seconds to `timestamp_us` (truncated; 0 when ts ≤ 0).
std::int64_t micros_from_seconds(double ts);

}  // namespace ic::kvevent
