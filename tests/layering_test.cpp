// Dependencies point one way: index/, policy/, journal/, tokenizer/ and the admin-store
// components (admin_json/, topology/, templates/) never include CAF, gRPC or generated
// protobuf headers; state/ (the plain state under the actors) never includes CAF or gRPC; and
// nothing outside actors/, server/ and tests/ includes CAF (design.md, style.md habit 1).
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/test_paths.hpp"

namespace {

namespace fs = std::filesystem;

TEST(Layering, PlainComponentsIncludeNoCafGrpcOrProtobuf) {
  const std::regex forbidden(
      R"(^\s*#\s*include\s*[<"](caf/|grpc|grpcpp/|google/protobuf/|inferencecache/|[^">]*\.pb\.h))");
  int files = 0;
  for (const char* component :
       {"index", "policy", "journal", "tokenizer", "admin_json", "topology", "templates"}) {
    fs::path dir = fs::path(ic::test::source_dir()) / component;
    ASSERT_TRUE(fs::exists(dir)) << dir;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      auto ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp" && ext != ".h" && ext != ".cc" && ext != ".inc") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        EXPECT_FALSE(std::regex_search(line, forbidden))
            << entry.path().string() << ":" << n << ": " << line;
      }
    }
  }
  EXPECT_GT(files, 0);
}

/// Calls `check(path, line_number, line)` for every line of every C++ source under `dir`.
template <class Check>
int for_each_source_line(const fs::path& dir, Check check) {
  int files = 0;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    const auto name = it->path().filename().string();
    if (it->is_directory() && (name == "build" || name.rfind("build-", 0) == 0 || name[0] == '.')) {
      it.disable_recursion_pending();
      continue;
    }
    auto ext = it->path().extension().string();
    if (ext != ".hpp" && ext != ".cpp" && ext != ".h" && ext != ".cc" && ext != ".inc") continue;
    ++files;
    std::ifstream in(it->path());
    std::string line;
    int n = 0;
    while (std::getline(in, line)) check(it->path(), ++n, line);
  }
  return files;
}

const std::regex caf_include(R"(^\s*#\s*include\s*[<"]caf/)");

TEST(Layering, StateIncludesNoCafOrGrpc) {
  const std::regex forbidden(R"(^\s*#\s*include\s*[<"](caf/|grpc|grpcpp/))");
  const fs::path dir = fs::path(ic::test::source_dir()) / "state";
  ASSERT_TRUE(fs::exists(dir)) << dir;
  const int files = for_each_source_line(dir, [&](const fs::path& p, int n, const std::string& line) {
    EXPECT_FALSE(std::regex_search(line, forbidden)) << p.string() << ":" << n << ": " << line;
  });
  EXPECT_GT(files, 0);
}

TEST(Layering, OnlyActorsServerAndTestsIncludeCaf) {
  const fs::path root(ic::test::source_dir());
  int files = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_directory() || name == "actors" || name == "server" || name == "tests" ||
        name == "build" || name.rfind("build-", 0) == 0 || name[0] == '.')
      continue;
    files += for_each_source_line(entry.path(), [&](const fs::path& p, int n, const std::string& line) {
      EXPECT_FALSE(std::regex_search(line, caf_include)) << p.string() << ":" << n << ": " << line;
    });
  }
  EXPECT_GT(files, 0);
  EXPECT_TRUE(std::regex_search("#include <caf/all.hpp>", caf_include));
  EXPECT_FALSE(std::regex_search("#include \"actors/runtime.hpp\"", caf_include));
}

TEST(Layering, ForbiddenPatternCatchesTheIncludesItMustCatch) {
  const std::regex forbidden(
      R"(^\s*#\s*include\s*[<"](caf/|grpc|grpcpp/|google/protobuf/|inferencecache/|[^">]*\.pb\.h))");
  EXPECT_TRUE(std::regex_search("#include <caf/all.hpp>", forbidden));
  EXPECT_TRUE(std::regex_search("#include <grpcpp/grpcpp.h>", forbidden));
  EXPECT_TRUE(std::regex_search("#include \"inferencecache/v1alpha1/inferencecache.pb.h\"", forbidden));
  EXPECT_TRUE(std::regex_search("  #  include <google/protobuf/arena.h>", forbidden));
  EXPECT_FALSE(std::regex_search("#include \"index/fingerprint.hpp\"", forbidden));
  EXPECT_FALSE(std::regex_search("#include <rocksdb/db.h>", forbidden));
}

}  // namespace
