// The JetStream journal's message body: one *envelope* per group commit (spec/scaleout.md
// §3.2). A writer packs the records of one group into one envelope and publishes it as one
// JetStream message with `Nats-Msg-Id = <origin>.<epoch>.<counter>`; every reader decodes
// the same bytes into the same records, in envelope order (the identical-order invariant).
// Pure functions, no NATS: unit-tested byte for byte.
//
// Grammar (integers big-endian, `‖` concatenation; helpers from journal/format.hpp):
//
//   envelope  := magic:"ICJE" version:u8 origin_len:u8 origin:byte{origin_len}
//                epoch:be64 counter:be64 count:be32 record{count} checksum:be64
//   record    := type:be32 len:be32 payload:byte{len}
//   version   = 1
//   origin    = the writer's replica id (1..255 bytes, [A-Za-z0-9_-] only: it is part of
//               the Msg-Id and of NATS subjects later)
//   epoch     = the writer process's start time in µs (ids never repeat across restarts)
//   counter   = the writer's group number within the epoch (1, 2, ...)
//   checksum  = format::checksum("ICJE", every byte before the checksum)
//
//   msg id    := origin "." epoch "." counter            ; decimal, e.g. "r1.1764620000000000.7"
//
// A decoder refuses (errc::corruption) a wrong magic, a short or long body, a count that
// does not match the bytes, and a checksum mismatch; a newer version is errc::incompatible.
// The version byte is numbered forever: a change adds version 2 and keeps decoding 1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "journal/log.hpp"
#include "journal/status.hpp"

namespace ic::journal::jetstream {

/// The envelope version this code writes (and the newest it reads).
inline constexpr std::uint8_t envelope_version = 1;
/// The first four bytes of every envelope.
inline constexpr std::string_view envelope_magic = "ICJE";

/// Who wrote a group commit: the three parts of its Msg-Id.
struct batch_id {
  std::string origin;
  std::uint64_t epoch = 0;
  std::uint64_t counter = 0;
};

/// Returns the Nats-Msg-Id of `id`: "<origin>.<epoch>.<counter>".
std::string msg_id(const batch_id& id);

/// Checks a replica id for use as an envelope origin: 1..255 bytes of [A-Za-z0-9_-].
/// Errors: invalid_argument naming the problem.
status validate_origin(std::string_view origin);

/// Returns the bytes an envelope of `n` records with payloads totalling `payload_bytes`
/// and an origin of `origin_len` bytes takes.
std::size_t envelope_size(std::size_t origin_len, std::size_t n, std::size_t payload_bytes);

/// Appends the envelope of `records` written by `id` to `out`. `id.origin` must pass
/// validate_origin (asserted) and `n` must be ≥ 1.
void encode_envelope(const batch_id& id, const record_in* records, std::size_t n,
                     std::string* out);

/// A decoded envelope; the views point into the decoded bytes.
struct envelope_view {
  std::uint8_t version = 0;
  batch_id id;
  std::vector<record_in> records;
};

/// Decodes and verifies `body`. Errors: corruption (says what is wrong and at which byte),
/// incompatible (a version newer than envelope_version).
status decode_envelope(std::string_view body, envelope_view* out);

}  // namespace ic::journal::jetstream
