// A writer-preferring reader/writer lock with deadline-bounded shared acquisition.
//
// The index actor is the only writer (it applies journaled records); lookups read from the
// gRPC threads under the shared side. glibc's default rwlock prefers readers, which would
// let a steady stream of lookups starve ingest, so this one asks for writer preference.
// Readers that cannot get the lock by their deadline give up (the lookup answers TIMEOUT).
#pragma once

#include <pthread.h>
#include <time.h>

#include <cerrno>
#include <chrono>

namespace ic::actors {

/// Reader/writer lock; see the header comment.
class rw_lock {
 public:
  rw_lock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~rw_lock() { pthread_rwlock_destroy(&lock_); }
  rw_lock(const rw_lock&) = delete;
  rw_lock& operator=(const rw_lock&) = delete;

  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

  /// Takes the shared side unless `deadline` (steady clock) passes first; true on success.
  bool try_lock_shared_until(std::chrono::steady_clock::time_point deadline) {
    if (pthread_rwlock_tryrdlock(&lock_) == 0) return true;
    // steady_clock is CLOCK_MONOTONIC on Linux.
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch());
    timespec ts{static_cast<time_t>(ns.count() / 1'000'000'000),
                static_cast<long>(ns.count() % 1'000'000'000)};
    int rc;
    do {
      rc = pthread_rwlock_clockrdlock(&lock_, CLOCK_MONOTONIC, &ts);
    } while (rc == EAGAIN);
    return rc == 0;
  }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace ic::actors
