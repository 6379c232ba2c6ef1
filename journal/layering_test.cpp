// Keeps journal/ plain: no CAF, gRPC or generated protobuf anywhere, and no RocksDB header
// in a public header (so including the journal stays light).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/test_paths.hpp"

namespace {

namespace fs = std::filesystem;

TEST(JournalLayering, IncludesNoCafGrpcProtobufAndPublicHeadersNoRocksDb) {
  const fs::path dir = fs::path(ic::test::source_dir()) / "journal";
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const auto ext = e.path().extension();
    // .inc: private implementation fragments (log_impl.inc), which may include RocksDB.
    if (ext != ".hpp" && ext != ".cpp" && ext != ".inc") continue;
    ++files;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("#include", 0) != 0) continue;
      for (const char* banned : {"<caf/", "<grpc", "<google/protobuf", ".pb.h"}) {
        EXPECT_EQ(line.find(banned), std::string::npos) << e.path() << ": " << line;
      }
      if (ext == ".hpp") {
        EXPECT_EQ(line.find("<rocksdb/"), std::string::npos) << e.path() << ": " << line;
      }
    }
  }
  EXPECT_GT(files, 5);
}

}  // namespace
