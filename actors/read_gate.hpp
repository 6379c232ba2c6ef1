// A reader-writer gate that readers never wait on: `try_read()` succeeds at once or fails,
// and a writer that is waiting makes it fail (writers are preferred), so a steady stream of
// readers cannot starve the writer. The tenant actor is the writer (every one of its
// handlers writes through it); the gateway's threads are the readers of the fast path
// (runtime.cpp), which fall back to the actor's mailbox when `try_read()` fails, and
// writers only to apply waiting LFU credits when `try_write()` finds the gate free.
#pragma once

#include <pthread.h>

namespace ic::actors {

class read_gate {
 public:
  read_gate() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    // Writer preference without recursive reads: a reader's tryrdlock fails while a writer
    // waits (glibc), which is what keeps the actor from starving under lookups.
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~read_gate() { pthread_rwlock_destroy(&lock_); }
  read_gate(const read_gate&) = delete;
  read_gate& operator=(const read_gate&) = delete;

  /// Enters as a reader if no writer holds or waits for the gate; never blocks.
  bool try_read() { return pthread_rwlock_tryrdlock(&lock_) == 0; }
  void end_read() { pthread_rwlock_unlock(&lock_); }
  /// Enters as the writer; waits only for the readers inside (each a short decision).
  void write() { pthread_rwlock_wrlock(&lock_); }
  /// Enters as the writer if nobody is inside or waiting; never blocks.
  bool try_write() { return pthread_rwlock_trywrlock(&lock_) == 0; }
  void end_write() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace ic::actors
