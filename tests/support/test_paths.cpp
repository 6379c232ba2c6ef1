#include "tests/support/test_paths.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

namespace ic::test {
namespace {

/// Reads `<this executable>.paths` once; aborts when it is missing (the test cannot run).
const std::map<std::string, std::string, std::less<>>& paths() {
  static const auto table = [] {
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
      std::fprintf(stderr, "test_paths: cannot read /proc/self/exe\n");
      std::abort();
    }
    const std::string file = std::string(exe, static_cast<std::size_t>(n)) + ".paths";
    std::ifstream in(file);
    if (!in) {
      std::fprintf(stderr, "test_paths: %s is missing (CMake writes it next to the test)\n",
                   file.c_str());
      std::abort();
    }
    std::map<std::string, std::string, std::less<>> t;
    std::string line;
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) t.emplace(line.substr(0, eq), line.substr(eq + 1));
    }
    return t;
  }();
  return table;
}

const std::string& lookup(std::string_view key) {
  const auto& t = paths();
  const auto it = t.find(key);
  if (it == t.end()) {
    std::fprintf(stderr,
                 "test_paths: no \"%.*s\" in this test's .paths file (name it in "
                 "ic_test(... STARTS ...))\n",
                 static_cast<int>(key.size()), key.data());
    std::abort();
  }
  return it->second;
}

}  // namespace

const std::string& source_dir() { return lookup("source_dir"); }
const std::string& shared_dir() { return lookup("shared_dir"); }
const char* executable(std::string_view target) { return lookup(target).c_str(); }

}  // namespace ic::test
