#include "journal/jetstream/envelope.hpp"

#include <cassert>

#include "journal/format.hpp"

namespace ic::journal::jetstream {

namespace {

constexpr std::size_t fixed_head = 4 + 1 + 1;        // magic, version, origin_len
constexpr std::size_t fixed_ids = 8 + 8 + 4;         // epoch, counter, count
constexpr std::size_t record_head = 4 + 4;           // type, len
constexpr std::size_t checksum_bytes = 8;

status corrupt(std::string what) {
  return {errc::corruption, "envelope: " + std::move(what)};
}

bool origin_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-';
}

}  // namespace

std::string msg_id(const batch_id& id) {
  return id.origin + "." + std::to_string(id.epoch) + "." + std::to_string(id.counter);
}

status validate_origin(std::string_view origin) {
  if (origin.empty() || origin.size() > 255) {
    return {errc::invalid_argument, "replica id must be 1..255 bytes, got " +
                                        std::to_string(origin.size())};
  }
  for (char c : origin) {
    if (!origin_char(c)) {
      return {errc::invalid_argument, "replica id '" + std::string(origin) +
                                          "' may only hold [A-Za-z0-9_-]"};
    }
  }
  return {};
}

std::size_t envelope_size(std::size_t origin_len, std::size_t n, std::size_t payload_bytes) {
  return fixed_head + origin_len + fixed_ids + n * record_head + payload_bytes + checksum_bytes;
}

void encode_envelope(const batch_id& id, const record_in* records, std::size_t n,
                     std::string* out) {
  assert(validate_origin(id.origin).ok() && n >= 1);
  std::size_t payload = 0;
  for (std::size_t i = 0; i < n; ++i) payload += records[i].payload.size();
  const std::size_t start = out->size();
  out->reserve(start + envelope_size(id.origin.size(), n, payload));
  out->append(envelope_magic);
  out->push_back(static_cast<char>(envelope_version));
  out->push_back(static_cast<char>(id.origin.size()));
  out->append(id.origin);
  format::put_be64(out, id.epoch);
  format::put_be64(out, id.counter);
  format::put_be32(out, static_cast<std::uint32_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    format::put_be32(out, records[i].type);
    format::put_be32(out, static_cast<std::uint32_t>(records[i].payload.size()));
    out->append(records[i].payload);
  }
  const std::string_view body(out->data() + start, out->size() - start);
  format::put_be64(out, format::checksum(envelope_magic, body));
}

status decode_envelope(std::string_view body, envelope_view* out) {
  *out = envelope_view{};
  if (body.size() < fixed_head + fixed_ids + checksum_bytes) {
    return corrupt("too short (" + std::to_string(body.size()) + " bytes)");
  }
  if (body.substr(0, 4) != envelope_magic) return corrupt("bad magic (not an envelope)");
  const auto version = static_cast<std::uint8_t>(body[4]);
  if (version == 0) return corrupt("version 0");
  if (version > envelope_version) {
    return {errc::incompatible, "envelope: version " + std::to_string(version) +
                                    " is newer than this build reads (" +
                                    std::to_string(envelope_version) + ")"};
  }
  const std::size_t sum_at = body.size() - checksum_bytes;
  const std::uint64_t stored = format::get_be64(body.data() + sum_at);
  const std::uint64_t computed = format::checksum(envelope_magic, body.substr(0, sum_at));
  if (stored != computed) {
    return corrupt("checksum mismatch (stored " + format::hex(format::be64(stored)) +
                   ", computed " + format::hex(format::be64(computed)) + ")");
  }
  const std::size_t origin_len = static_cast<std::uint8_t>(body[5]);
  std::size_t at = fixed_head;
  if (at + origin_len + fixed_ids > sum_at) return corrupt("origin runs past the end");
  out->version = version;
  out->id.origin.assign(body.data() + at, origin_len);
  at += origin_len;
  out->id.epoch = format::get_be64(body.data() + at);
  out->id.counter = format::get_be64(body.data() + at + 8);
  const std::uint32_t count = format::get_be32(body.data() + at + 16);
  at += fixed_ids;
  if (count == 0) return corrupt("no records");
  if (count > (sum_at - at) / record_head) {
    return corrupt("count " + std::to_string(count) + " does not fit in " +
                   std::to_string(body.size()) + " bytes");
  }
  out->records.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    if (sum_at - at < record_head) {
      return corrupt("record " + std::to_string(i) + " header at byte " + std::to_string(at) +
                     " runs past the end");
    }
    const std::uint32_t type = format::get_be32(body.data() + at);
    const std::uint32_t len = format::get_be32(body.data() + at + 4);
    at += record_head;
    if (len > sum_at - at) {
      return corrupt("record " + std::to_string(i) + " of " + std::to_string(len) +
                     " bytes at byte " + std::to_string(at) + " runs past the end");
    }
    out->records.push_back({type, body.substr(at, len)});
    at += len;
  }
  if (at != sum_at) {
    return corrupt(std::to_string(sum_at - at) + " trailing bytes after record " +
                   std::to_string(count - 1));
  }
  return {};
}

}  // namespace ic::journal::jetstream
