#include "journal/format.hpp"

#include <xxhash.h>

namespace ic::journal::format {

namespace {

status corrupt(std::string what) { return {errc::corruption, std::move(what)}; }

status check_version(std::uint8_t v, const char* what) {
  if (v == 0) return corrupt(std::string(what) + ": value version 0");
  if (v > value_version) {
    return {errc::incompatible, std::string(what) + ": value version " + std::to_string(v) +
                                    " is newer than this build reads (" +
                                    std::to_string(value_version) + ")"};
  }
  return {};
}

std::string checksum_mismatch(std::uint64_t stored, std::uint64_t computed) {
  return "checksum mismatch (stored " + hex(be64(stored)) + ", computed " +
         hex(be64(computed)) + ")";
}

}  // namespace

void put_be64(std::string* out, std::uint64_t v) {
  char b[8];
  for (int i = 7; i >= 0; --i) {
    b[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
  out->append(b, 8);
}

void put_be32(std::string* out, std::uint32_t v) {
  char b[4];
  for (int i = 3; i >= 0; --i) {
    b[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
  out->append(b, 4);
}

std::uint64_t get_be64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::uint32_t get_be32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string be64(std::uint64_t v) {
  std::string s;
  put_be64(&s, v);
  return s;
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    s.push_back(digits[c >> 4]);
    s.push_back(digits[c & 0xF]);
  }
  return s;
}

std::uint64_t checksum(std::string_view prefix, std::string_view payload) {
  const XXH64_hash_t seed = XXH3_64bits(prefix.data(), prefix.size());
  return XXH3_64bits_withSeed(payload.data(), payload.size(), seed);
}

// ---- records ----

std::string record_key(std::uint64_t seq) { return be64(seq); }

bool parse_record_key(std::string_view key, std::uint64_t* seq) {
  if (key.size() != 8) return false;
  *seq = get_be64(key.data());
  return true;
}

std::uint64_t record_checksum(std::uint64_t seq, std::uint8_t version, std::uint32_t type,
                              std::string_view payload) {
  std::string prefix;
  prefix.reserve(13);
  put_be64(&prefix, seq);
  prefix.push_back(static_cast<char>(version));
  put_be32(&prefix, type);
  return checksum(prefix, payload);
}

void encode_record(std::uint64_t seq, std::uint32_t type, std::string_view payload,
                   std::string* out) {
  out->reserve(out->size() + record_header_size + payload.size());
  out->push_back(static_cast<char>(value_version));
  put_be32(out, type);
  put_be64(out, record_checksum(seq, value_version, type, payload));
  out->append(payload.data(), payload.size());
}

status decode_record(std::uint64_t seq, std::string_view value, record_fields* out) {
  if (value.size() < record_header_size) {
    return corrupt("record value is " + std::to_string(value.size()) +
                   " bytes, shorter than its " + std::to_string(record_header_size) +
                   "-byte header");
  }
  const auto version = static_cast<std::uint8_t>(value[0]);
  if (auto s = check_version(version, "record"); !s.ok()) return s;
  const std::uint32_t type = get_be32(value.data() + 1);
  const std::uint64_t stored = get_be64(value.data() + 5);
  const std::string_view payload = value.substr(record_header_size);
  const std::uint64_t computed = record_checksum(seq, version, type, payload);
  if (stored != computed) return corrupt("record " + checksum_mismatch(stored, computed));
  out->version = version;
  out->type = type;
  out->payload = payload;
  return {};
}

// ---- snapshots ----

std::string snapshot_prefix(std::uint64_t id) { return be64(id); }

std::string snapshot_header_key(std::uint64_t id) {
  std::string k = be64(id);
  k.push_back(static_cast<char>(snapshot_header_tag));
  return k;
}

std::string snapshot_chunk_key(std::uint64_t id, std::uint64_t index) {
  std::string k = be64(id);
  k.push_back(static_cast<char>(snapshot_chunk_tag));
  put_be64(&k, index);
  return k;
}

std::string snapshot_footer_key(std::uint64_t id) {
  std::string k = be64(id);
  k.push_back(static_cast<char>(snapshot_footer_tag));
  return k;
}

bool parse_snapshot_key(std::string_view key, snapshot_key* out) {
  if (key.size() != 9 && key.size() != 17) return false;
  out->id = get_be64(key.data());
  out->tag = static_cast<std::uint8_t>(key[8]);
  out->chunk = 0;
  if (key.size() == 17) {
    if (out->tag != snapshot_chunk_tag) return false;
    out->chunk = get_be64(key.data() + 9);
    return true;
  }
  return out->tag == snapshot_header_tag || out->tag == snapshot_footer_tag;
}

std::string encode_snapshot_header(std::uint64_t id, std::uint64_t covering_seq) {
  std::string v;
  v.push_back(static_cast<char>(value_version));
  put_be64(&v, covering_seq);
  put_be64(&v, checksum(be64(id), v));
  return v;
}

status decode_snapshot_header(std::uint64_t id, std::string_view value,
                              std::uint64_t* covering_seq) {
  if (value.size() != 17) {
    return corrupt("snapshot header is " + std::to_string(value.size()) + " bytes, not 17");
  }
  if (auto s = check_version(static_cast<std::uint8_t>(value[0]), "snapshot header"); !s.ok())
    return s;
  const std::uint64_t stored = get_be64(value.data() + 9);
  const std::uint64_t computed = checksum(be64(id), value.substr(0, 9));
  if (stored != computed) return corrupt("snapshot header " + checksum_mismatch(stored, computed));
  *covering_seq = get_be64(value.data() + 1);
  return {};
}

void encode_snapshot_chunk(std::uint64_t id, std::uint64_t index, std::string_view payload,
                           std::string* out) {
  std::string prefix = be64(id);
  put_be64(&prefix, index);
  out->reserve(out->size() + chunk_header_size + payload.size());
  out->push_back(static_cast<char>(value_version));
  put_be64(out, checksum(prefix, payload));
  out->append(payload.data(), payload.size());
}

status decode_snapshot_chunk(std::uint64_t id, std::uint64_t index, std::string_view value,
                             std::string_view* payload) {
  if (value.size() < chunk_header_size) {
    return corrupt("chunk value is " + std::to_string(value.size()) +
                   " bytes, shorter than its header");
  }
  if (auto s = check_version(static_cast<std::uint8_t>(value[0]), "snapshot chunk"); !s.ok())
    return s;
  std::string prefix = be64(id);
  put_be64(&prefix, index);
  const std::uint64_t stored = get_be64(value.data() + 1);
  const std::string_view p = value.substr(chunk_header_size);
  const std::uint64_t computed = checksum(prefix, p);
  if (stored != computed) return corrupt("chunk " + checksum_mismatch(stored, computed));
  *payload = p;
  return {};
}

std::string encode_snapshot_footer(std::uint64_t id, const snapshot_footer& footer) {
  std::string v;
  v.push_back(static_cast<char>(value_version));
  put_be64(&v, footer.chunk_count);
  put_be64(&v, footer.total_bytes);
  put_be64(&v, footer.content_checksum);
  put_be64(&v, checksum(be64(id), v));
  return v;
}

status decode_snapshot_footer(std::uint64_t id, std::string_view value, snapshot_footer* out) {
  if (value.size() != 33) {
    return corrupt("snapshot footer is " + std::to_string(value.size()) + " bytes, not 33");
  }
  if (auto s = check_version(static_cast<std::uint8_t>(value[0]), "snapshot footer"); !s.ok())
    return s;
  const std::uint64_t stored = get_be64(value.data() + 25);
  const std::uint64_t computed = checksum(be64(id), value.substr(0, 25));
  if (stored != computed) return corrupt("snapshot footer " + checksum_mismatch(stored, computed));
  out->chunk_count = get_be64(value.data() + 1);
  out->total_bytes = get_be64(value.data() + 9);
  out->content_checksum = get_be64(value.data() + 17);
  return {};
}

}  // namespace ic::journal::format
