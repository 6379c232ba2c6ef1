// The journal's on-disk encoding: column-family names, key layouts and value layouts.
//
// journal/README.md gives the same format as a grammar; this header is the code that writes
// and parses it. Everything here is pure (no RocksDB, no I/O) so it is unit-tested byte for
// byte and usable by a journal inspector. Integers are big-endian so that RocksDB's bytewise
// key order is numeric order.
//
// A value that fails its checksum or is structurally wrong decodes to a `corruption` status;
// a value with a record/format version newer than this code decodes to `incompatible`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "journal/status.hpp"

namespace ic::journal::format {

/// The journal format this code writes; it reads every version from 1 up to this one.
inline constexpr std::uint32_t current_version = 1;
/// The version byte at the front of record, snapshot header/chunk/footer values.
inline constexpr std::uint8_t value_version = 1;
/// The value of meta key `magic`: says "this RocksDB directory is an InferenceCache journal".
inline constexpr std::string_view magic_value = "inferencecache-journal";

/// Column family names (RocksDB's "default" family exists but stays empty).
inline constexpr const char* meta_cf = "meta";
inline constexpr const char* records_cf = "records";
inline constexpr const char* snapshots_cf = "snapshots";

/// Meta keys (CF "meta").
inline constexpr std::string_view magic_key = "magic";
inline constexpr std::string_view version_key = "format_version";            ///< be32
inline constexpr std::string_view truncated_through_key = "truncated_through";  ///< be64
inline constexpr std::string_view next_snapshot_id_key = "next_snapshot_id";    ///< be64

/// Bytes in front of a record payload: version u8, type be32, checksum be64.
inline constexpr std::size_t record_header_size = 1 + 4 + 8;
/// Bytes in front of a snapshot chunk payload: version u8, checksum be64.
inline constexpr std::size_t chunk_header_size = 1 + 8;

/// Snapshot key tags (the byte after be64(snapshot id)).
inline constexpr std::uint8_t snapshot_header_tag = 0x00;
inline constexpr std::uint8_t snapshot_chunk_tag = 0x01;
inline constexpr std::uint8_t snapshot_footer_tag = 0xFF;

/// Appends the 8-byte big-endian form of `v` to `out`.
void put_be64(std::string* out, std::uint64_t v);
/// Appends the 4-byte big-endian form of `v` to `out`.
void put_be32(std::string* out, std::uint32_t v);
/// Reads 8 big-endian bytes at `p`.
std::uint64_t get_be64(const char* p);
/// Reads 4 big-endian bytes at `p`.
std::uint32_t get_be32(const char* p);
/// Returns the 8-byte big-endian form of `v`.
std::string be64(std::uint64_t v);

/// Returns the hex form of `bytes` (for messages naming keys).
std::string hex(std::string_view bytes);

/// Returns XXH3-64 of `payload` seeded with XXH3-64 of `prefix`: the journal's checksum.
std::uint64_t checksum(std::string_view prefix, std::string_view payload);

// ---- records: CF "records", key = be64(seq), value = version type checksum payload ----

/// Returns the key of record `seq`.
std::string record_key(std::uint64_t seq);
/// Parses a record key; false when `key` is not 8 bytes.
bool parse_record_key(std::string_view key, std::uint64_t* seq);

/// Returns the checksum of a record: over be64(seq) ‖ version ‖ be32(type), then payload.
std::uint64_t record_checksum(std::uint64_t seq, std::uint8_t version, std::uint32_t type,
                              std::string_view payload);
/// Appends the value of record (`seq`, `type`, `payload`) to `out`.
void encode_record(std::uint64_t seq, std::uint32_t type, std::string_view payload,
                   std::string* out);

/// A record value split into its fields; `payload` points into the decoded value.
struct record_fields {
  std::uint8_t version = 0;
  std::uint32_t type = 0;
  std::string_view payload;
};

/// Decodes and verifies the value stored under `seq`. Errors: `corruption` (too short,
/// checksum mismatch; the message says which), `incompatible` (newer value version).
status decode_record(std::uint64_t seq, std::string_view value, record_fields* out);

// ---- snapshots: CF "snapshots", keys start with be64(snapshot id) ----

/// Returns the key of snapshot `id`'s header (written first).
std::string snapshot_header_key(std::uint64_t id);
/// Returns the key of chunk `index` (0-based) of snapshot `id`.
std::string snapshot_chunk_key(std::uint64_t id, std::uint64_t index);
/// Returns the key of snapshot `id`'s footer, the "complete" marker (written last).
std::string snapshot_footer_key(std::uint64_t id);
/// Returns the first key of snapshot `id` (= its header key); all of its keys are below
/// `snapshot_prefix(id + 1)`.
std::string snapshot_prefix(std::uint64_t id);

/// What a snapshot key names.
struct snapshot_key {
  std::uint64_t id = 0;
  std::uint8_t tag = 0;
  std::uint64_t chunk = 0;  ///< only for `snapshot_chunk_tag`
};
/// Parses a snapshot key; false when it has none of the three shapes.
bool parse_snapshot_key(std::string_view key, snapshot_key* out);

/// Snapshot header: version u8, covering seq be64, checksum be64 (over be64(id) ‖ first 9).
std::string encode_snapshot_header(std::uint64_t id, std::uint64_t covering_seq);
/// Decodes and verifies a header value. Errors: corruption, incompatible.
status decode_snapshot_header(std::uint64_t id, std::string_view value,
                              std::uint64_t* covering_seq);

/// Appends a chunk value (version u8, checksum be64, payload) to `out`; the checksum covers
/// be64(id) ‖ be64(index), then the payload.
void encode_snapshot_chunk(std::uint64_t id, std::uint64_t index, std::string_view payload,
                           std::string* out);
/// Decodes and verifies a chunk value; `payload` points into `value`.
status decode_snapshot_chunk(std::uint64_t id, std::uint64_t index, std::string_view value,
                             std::string_view* payload);

/// Snapshot footer fields: how many chunks and bytes, and a checksum over all payloads.
struct snapshot_footer {
  std::uint64_t chunk_count = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t content_checksum = 0;  ///< XXH3-64 of the concatenated chunk payloads
};
/// Footer value: version u8, chunk_count be64, total_bytes be64, content_checksum be64,
/// checksum be64 (over be64(id) ‖ the first 25 bytes).
std::string encode_snapshot_footer(std::uint64_t id, const snapshot_footer& footer);
/// Decodes and verifies a footer value. Errors: corruption, incompatible.
status decode_snapshot_footer(std::uint64_t id, std::string_view value, snapshot_footer* out);

}  // namespace ic::journal::format
