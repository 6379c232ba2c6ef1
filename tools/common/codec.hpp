// Text codecs shared by the tools: hex and base64 block hashes, comma lists, host:port.
//
// Every parser returns an error value instead of throwing, so each tool can print one clear
// line and exit 2 on bad input:
//
//   std::string err;
//   auto bytes = ic::tools::decode_hash("0x00ab12cd34ef5678", &err);
//   if (!bytes) { std::cerr << err << "\n"; return 2; }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ic::tools {

/// Encodes bytes as lower-case hex.
std::string to_hex(const std::string& bytes);

/// Decodes hex (optional `0x` prefix, even length); nullopt and `*err` on bad input.
std::optional<std::string> from_hex(const std::string& text, std::string* err);

/// Encodes bytes as standard base64 with padding.
std::string to_base64(const std::string& bytes);

/// Decodes standard or URL-safe base64 (padding optional); nullopt and `*err` on bad input.
std::optional<std::string> from_base64(const std::string& text, std::string* err);

/// Decodes one block hash written as hex (`0x…` or only hex digits, even length) or, failing
/// that, base64 (`b64:` prefix forces base64); nullopt and `*err` on bad input.
std::optional<std::string> decode_hash(const std::string& text, std::string* err);

/// Splits `text` on commas, trimming blanks and dropping empty items.
std::vector<std::string> split_list(const std::string& text);

/// Parses a comma list of unsigned 32-bit integers; nullopt and `*err` on bad input.
std::optional<std::vector<std::uint32_t>> parse_u32_list(const std::string& text, std::string* err);

/// Encodes `v` as 8 big-endian bytes (the block hash width the workloads use).
std::string be64(std::uint64_t v);

/// A parsed `host:port` (IPv6 as `[::1]:port`).
struct host_port {
  std::string host;
  int port = 0;
};

/// Parses `host:port`; nullopt and `*err` when the port is missing or out of range.
std::optional<host_port> parse_host_port(const std::string& text, std::string* err);

/// True for 127.0.0.0/8, ::1 and `localhost`.
bool is_loopback_host(const std::string& host);

/// Parses a duration like `500ms`, `2s`, `1.5s`, `3m` or a bare number of seconds;
/// nullopt and `*err` on bad input.
std::optional<double> parse_seconds(const std::string& text, std::string* err);

}  // namespace ic::tools
