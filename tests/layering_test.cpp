// Dependencies point one way: index/, policy/, journal/ and the admin-store components
// (admin_json/, topology/, templates/) never include CAF, gRPC or generated protobuf
// headers (design.md, style.md habit 1).
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

TEST(Layering, PlainComponentsIncludeNoCafGrpcOrProtobuf) {
  const std::regex forbidden(
      R"(^\s*#\s*include\s*[<"](caf/|grpc|grpcpp/|google/protobuf/|inferencecache/|[^">]*\.pb\.h))");
  int files = 0;
  for (const char* component :
       {"index", "policy", "journal", "admin_json", "topology", "templates"}) {
    fs::path dir = fs::path(IC_SOURCE_DIR) / component;
    ASSERT_TRUE(fs::exists(dir)) << dir;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      auto ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp" && ext != ".h" && ext != ".cc") continue;
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
