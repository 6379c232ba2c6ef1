// Writes the committed old-format fixture: a tiny journal in the current format.
//
//   ic_journal_make_fixture journal/testdata/v<N>     (N = format::current_version)
//
// Run it once when a format version is introduced and commit the directory; never
// regenerate an existing version's fixture (fixture_test.cpp pins its contents, so a newer
// build must keep reading it). Content:
//   records 1..40: type 1 + seq % 3, payload "fixture record <seq>" (+ 300 '#' when seq % 10 == 0)
//   snapshot covering 10: chunks "fixture snapshot@10 chunk <i>", i = 0..2; then truncated through 10
//   snapshot covering 30: chunks "fixture snapshot@30 chunk <i>", i = 0..1
// RocksDB's info logs (LOG*) and older OPTIONS files are removed; the rest is the fixture.
#include <cstdio>
#include <filesystem>
#include <string>

#include "journal/log.hpp"

namespace {

int fail(const ic::journal::status& s) {
  std::fprintf(stderr, "make_fixture: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace ic::journal;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR (must not exist)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  if (fs::exists(dir)) {
    std::fprintf(stderr, "make_fixture: %s exists; never overwrite a committed fixture\n",
                 dir.c_str());
    return 2;
  }
  {
    options o;
    o.write_buffer_bytes = 64 << 10;
    auto opened = log::open(dir, o);
    if (!opened.ok()) return fail(opened.status());
    auto& l = **opened;
    for (std::uint64_t seq = 1; seq <= 40; ++seq) {
      std::string p = "fixture record " + std::to_string(seq);
      if (seq % 10 == 0) p += std::string(300, '#');
      auto r = l.append(static_cast<std::uint32_t>(1 + seq % 3), p);
      if (!r.ok()) return fail(r.status());
    }
    for (std::uint64_t covering : {10, 30}) {
      auto w = l.begin_snapshot(covering);
      if (!w.ok()) return fail(w.status());
      for (int i = 0; i < (covering == 10 ? 3 : 2); ++i) {
        auto s = w->add_chunk("fixture snapshot@" + std::to_string(covering) + " chunk " +
                              std::to_string(i));
        if (!s.ok()) return fail(s);
      }
      auto f = w->finish();
      if (!f.ok()) return fail(f.status());
      if (covering == 10) {
        if (auto s = l.truncate_through(10); !s.ok()) return fail(s);
      }
    }
    if (auto s = l.close(); !s.ok()) return fail(s);
  }
  // Drop RocksDB's info logs and all but the newest OPTIONS file: neither is needed to open.
  std::string newest_options;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("OPTIONS-", 0) == 0 && name > newest_options) newest_options = name;
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("LOG", 0) == 0 || (name.rfind("OPTIONS-", 0) == 0 && name != newest_options)) {
      fs::remove(e.path());
    }
  }
  std::uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(dir)) total += fs::file_size(e.path());
  std::printf("wrote %s (%ju bytes)\n", dir.c_str(), total);
  return 0;
}
