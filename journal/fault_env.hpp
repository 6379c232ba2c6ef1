// A RocksDB environment that fails writes on demand, for testing how the journal behaves
// when the disk is full or broken.
//
//   ic::journal::fault_env faults;
//   ic::journal::options o;
//   o.env = faults.env();
//   auto log = ic::journal::log::open(dir, o);
//   faults.set(ic::journal::fault::no_space);   // every file write now fails with NoSpace
//   ... append() returns errc::unavailable ...
//   faults.set(ic::journal::fault::none);       // the next append() resumes RocksDB
//
// It wraps the default file system: creating, appending to, flushing and syncing writable
// files fail while a fault is set (only syncing for `sync_error`); reads are untouched. It must outlive every log using it.
#pragma once

#include <cstdint>
#include <memory>

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace ic::journal {

/// Which failure writes get.
enum class fault {
  none,      ///< writes pass through
  no_space,  ///< IOStatus::NoSpace ("disk full")
  io_error,  ///< IOStatus::IOError
  /// Only table files (.sst: flushes, compactions) get NoSpace; the WAL, the MANIFEST and
  /// other files are written: a disk with a little room left, too little for a flush.
  no_space_tables,
  /// Only Sync/Fsync fail (IOError): the bytes reach the file but the write reports failure,
  /// as after a failed fsync.
  sync_error,
};

/// Owns a fault-injecting rocksdb::Env (see the header overview).
class fault_env {
 public:
  /// Wraps rocksdb::Env::Default()'s file system; no fault is set.
  fault_env();
  ~fault_env();
  fault_env(const fault_env&) = delete;
  fault_env& operator=(const fault_env&) = delete;

  /// Returns the environment to put in `options::env`.
  rocksdb::Env* env() const;
  /// Sets the failure every following write gets (thread-safe).
  void set(fault f);
  /// Returns how many operations failed because of an injected fault.
  std::uint64_t injected() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::journal
