#include "journal/fault_env.hpp"

#include <atomic>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

namespace ic::journal {

namespace {

using rocksdb::FileOptions;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

/// The shared switch: which fault is on, and how often it fired.
struct fault_switch {
  std::atomic<fault> mode{fault::none};
  std::atomic<std::uint64_t> fired{0};

  /// Returns the injected failure for a write (`is_sync`: a Sync/Fsync call; `is_table`:
  /// the file is an SST, written by a flush or a compaction).
  IOStatus check(bool is_sync, bool is_table) {
    switch (mode.load(std::memory_order_acquire)) {
      case fault::none: return IOStatus::OK();
      case fault::no_space_tables:
        if (!is_table) return IOStatus::OK();
        fired.fetch_add(1, std::memory_order_relaxed);
        return IOStatus::NoSpace("injected fault: no space left on device (table file)");
      case fault::sync_error:
        if (!is_sync) return IOStatus::OK();
        fired.fetch_add(1, std::memory_order_relaxed);
        return IOStatus::IOError("injected fault: fsync failed");
      case fault::no_space:
        fired.fetch_add(1, std::memory_order_relaxed);
        return IOStatus::NoSpace("injected fault: no space left on device");
      case fault::io_error:
        fired.fetch_add(1, std::memory_order_relaxed);
        return IOStatus::IOError("injected fault: I/O error");
    }
    return IOStatus::OK();
  }
};

/// A writable file whose writes consult the switch first.
class faulty_file : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  faulty_file(std::unique_ptr<FSWritableFile>&& f, std::shared_ptr<fault_switch> sw, bool table)
      : FSWritableFileOwnerWrapper(std::move(f)), sw_(std::move(sw)), table_(table) {}

  IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* dbg) override {
    if (auto s = sw_->check(false, table_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Append(data, o, dbg);
  }
  IOStatus Append(const Slice& data, const IOOptions& o,
                  const rocksdb::DataVerificationInfo& v, IODebugContext* dbg) override {
    if (auto s = sw_->check(false, table_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Append(data, o, v, dbg);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t off, const IOOptions& o,
                            IODebugContext* dbg) override {
    if (auto s = sw_->check(false, table_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::PositionedAppend(data, off, o, dbg);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t off, const IOOptions& o,
                            const rocksdb::DataVerificationInfo& v,
                            IODebugContext* dbg) override {
    if (auto s = sw_->check(false, table_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::PositionedAppend(data, off, o, v, dbg);
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* dbg) override {
    if (auto s = sw_->check(false, table_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Flush(o, dbg);
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
    if (auto s = sw_->check(true, table_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Sync(o, dbg);
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    if (auto s = sw_->check(true, table_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Fsync(o, dbg);
  }

 private:
  std::shared_ptr<fault_switch> sw_;
  bool table_;
};

/// The file system: creating writable files fails too while a fault is on.
class faulty_fs : public rocksdb::FileSystemWrapper {
 public:
  faulty_fs(const std::shared_ptr<rocksdb::FileSystem>& target, std::shared_ptr<fault_switch> sw)
      : FileSystemWrapper(target), sw_(std::move(sw)) {}

  const char* Name() const override { return "ic_journal_faulty_fs"; }

  IOStatus NewWritableFile(const std::string& f, const FileOptions& o,
                           std::unique_ptr<FSWritableFile>* r, IODebugContext* dbg) override {
    if (auto s = sw_->check(false, is_table(f)); !s.ok()) return s;
    auto s = target()->NewWritableFile(f, o, r, dbg);
    if (s.ok()) wrap(r, is_table(f));
    return s;
  }
  IOStatus ReopenWritableFile(const std::string& f, const FileOptions& o,
                              std::unique_ptr<FSWritableFile>* r,
                              IODebugContext* dbg) override {
    if (auto s = sw_->check(false, is_table(f)); !s.ok()) return s;
    auto s = target()->ReopenWritableFile(f, o, r, dbg);
    if (s.ok()) wrap(r, is_table(f));
    return s;
  }
  IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const FileOptions& o,
                             std::unique_ptr<FSWritableFile>* r, IODebugContext* dbg) override {
    if (auto s = sw_->check(false, is_table(f)); !s.ok()) return s;
    auto s = target()->ReuseWritableFile(f, old, o, r, dbg);
    if (s.ok()) wrap(r, is_table(f));
    return s;
  }

 private:
  static bool is_table(const std::string& name) {
    return name.size() >= 4 && name.compare(name.size() - 4, 4, ".sst") == 0;
  }
  void wrap(std::unique_ptr<FSWritableFile>* r, bool table) {
    r->reset(new faulty_file(std::move(*r), sw_, table));
  }
  std::shared_ptr<fault_switch> sw_;
};

}  // namespace

struct fault_env::impl {
  std::shared_ptr<fault_switch> sw = std::make_shared<fault_switch>();
  std::shared_ptr<rocksdb::FileSystem> fs;
  std::unique_ptr<rocksdb::Env> env;
};

fault_env::fault_env() : impl_(std::make_unique<impl>()) {
  impl_->fs = std::make_shared<faulty_fs>(rocksdb::Env::Default()->GetFileSystem(), impl_->sw);
  impl_->env = rocksdb::NewCompositeEnv(impl_->fs);
}

fault_env::~fault_env() = default;

rocksdb::Env* fault_env::env() const { return impl_->env.get(); }

void fault_env::set(fault f) { impl_->sw->mode.store(f, std::memory_order_release); }

std::uint64_t fault_env::injected() const {
  return impl_->sw->fired.load(std::memory_order_relaxed);
}

}  // namespace ic::journal
