// The server's command line: any argv (NUL- or newline-separated tokens) parses to a config
// or to an early exit with code 0 or 2 and a message; never a crash.
//
// Tokens naming --admin-token-file are dropped: they make the parser read a file, and a
// fuzzer-chosen path (/dev/zero, a FIFO) would only measure the file system; reading the
// token is covered by server/config_test.cpp.
//
// One `command_line_parser` serves every input (as the server would parse once); the
// reuse itself is checked against a fresh parse every 16th input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "server/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = {"inferencecache-server"};
  std::string token;
  for (std::size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\0' || data[i] == '\n') {
      if (token.find("token-file") == std::string::npos) args.push_back(token);
      token.clear();
      if (args.size() > 64) break;
    } else {
      token += static_cast<char>(data[i]);
    }
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  // One parser for the whole run: declaring the ~45 CLI11 options was 38 % of the time per
  // input. Every 16th input is also parsed from scratch and must get the same answer, so a
  // command line that leaks into the next one through the reused parser is a finding.
  static ic::server::command_line_parser parser;
  static unsigned inputs = 0;
  const int argc = static_cast<int>(argv.size());
  auto parsed = parser.parse(argc, argv.data());
  if (++inputs % 16 == 0) {
    auto fresh = ic::server::parse_command_line(argc, argv.data());
    ic::fuzz::check(parsed.index() == fresh.index(), "a reused parser answers as a fresh one");
    if (auto* e = std::get_if<ic::server::early_exit>(&parsed)) {
      const auto& b = std::get<ic::server::early_exit>(fresh);
      ic::fuzz::check(e->code == b.code && e->message == b.message,
                      "a reused parser refuses as a fresh one");
    } else {
      const auto& a = std::get<ic::server::server_config>(parsed);
      const auto& b = std::get<ic::server::server_config>(fresh);
      ic::fuzz::check(a.grpc_bind_address == b.grpc_bind_address && a.data_dir == b.data_dir &&
                          a.log_level == b.log_level && a.default_ttl == b.default_ttl &&
                          a.max_index_entries == b.max_index_entries &&
                          a.journal.kind == b.journal.kind &&
                          a.journal.nats_servers == b.journal.nats_servers,
                      "a reused parser accepts as a fresh one");
    }
  }
  if (auto* exit = std::get_if<ic::server::early_exit>(&parsed)) {
    ic::fuzz::check(exit->code == 0 || exit->code == 2, "early exits use code 0 or 2");
    ic::fuzz::check(!exit->message.empty(), "an early exit says why");
    if (exit->code == 2)
      ic::fuzz::check(exit->message.find('\n') == std::string::npos, "a refusal is one line");
    return 0;
  }
  const auto& cfg = std::get<ic::server::server_config>(parsed);
  ic::fuzz::check(cfg.engine_block_size > 0, "block size is positive");
  ic::fuzz::check(cfg.max_index_entries >= 0, "entry cap is not negative");
  ic::fuzz::check(cfg.max_recv_message_bytes > 0, "gRPC message cap is positive");
  ic::fuzz::check(cfg.http_max_connections > 0, "HTTP connection bound is positive");
  ic::fuzz::check(cfg.http_idle_timeout.count() > 0, "HTTP idle timeout is positive");
  ic::fuzz::check(cfg.default_ttl.count() > 0 && cfg.sweep_interval.count() > 0,
                  "TTL and sweep interval are positive");
  return 0;
}
