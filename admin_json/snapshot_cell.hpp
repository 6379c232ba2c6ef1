// The pointer-swap cell behind each admin store (pd-templates.md §2.2 "Serving").
//
// A store publishes an immutable snapshot; readers on any thread take their own reference
// and never wait for a push, and a push never waits for readers. `publish` and `load` are
// the C++17 atomic shared_ptr operations, so a reader sees the old or the new snapshot,
// never a mix.
//
//   ic::admin_json::snapshot_cell<const my_snapshot> cell(std::make_shared<const my_snapshot>());
//   cell.publish(std::make_shared<const my_snapshot>(next));
//   auto snap = cell.load();
#pragma once

#include <atomic>
#include <memory>
#include <utility>

namespace ic::admin_json {

/// Holds the current snapshot of type `T` (use a const type); never empty.
template <class T>
class snapshot_cell {
 public:
  /// Precondition: `initial` is not null.
  explicit snapshot_cell(std::shared_ptr<T> initial) : current_(std::move(initial)) {}

  /// Replaces the snapshot; readers holding the old one keep it alive.
  void publish(std::shared_ptr<T> next) { std::atomic_store(&current_, std::move(next)); }
  /// Returns the current snapshot.
  std::shared_ptr<T> load() const { return std::atomic_load(&current_); }

 private:
  std::shared_ptr<T> current_;
};

}  // namespace ic::admin_json
