// Test helpers for journal/*_test.cpp: a temporary directory that cleans up after itself.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ic::journal::testing {

/// A fresh directory under /tmp (mkdtemp), removed with its contents on destruction.
class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = "/tmp/ic_journal_test_XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    path_ = p != nullptr ? std::string(p) : std::string();
  }
  ~temp_dir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// Returns the directory itself.
  const std::string& path() const { return path_; }
  /// Returns `path()/name` (not created).
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ic::journal::testing
