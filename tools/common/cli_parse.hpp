// Command-line parsing shared by the tools: one place for how --help and bad usage end.
#pragma once

#include <iostream>
#include <optional>
#include <string_view>

#include <CLI/CLI.hpp>

namespace ic::tools {

/// Exit code of a usage error (bad flag or value), for every tool.
inline constexpr int exit_usage = 2;

/// Parses `argv` into `app`. Returns nullopt when the program should go on; otherwise the
/// exit code: 0 after printing help, `exit_usage` after one line "<prog>: <error> (see --help)"
/// on stderr.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             std::string_view prog) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << prog << ": " << e.what() << " (see --help)\n";
    return exit_usage;
  }
  return std::nullopt;
}

}  // namespace ic::tools
