// A compact open-addressing hash table (linear probing, backward-shift deletion).
//
// The reverse map and the residency table hold up to `--max-tracked-blocks` entries inside
// a 128 MiB sidecar, so they are flat arrays of small slots instead of node-based maps
// (about 3× smaller). The slot type carries its own key fields; `Traits` says how:
//
//   struct traits {
//     static std::uint64_t hash(const key&);            // well mixed (use mix64)
//     static std::uint64_t hash_of(const slot&);        // the same, from a stored slot
//     static bool matches(const slot&, const key&);
//     static void assign(slot&, const key&);            // writes the key fields
//   };
//
// Pointers returned by find/insert stay valid only until the next insert or erase.
// Indexing uses the multiply-shift range reduction, so the capacity need not be a power
// of two and growth is by 1.5× (less slack than doubling).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "index/hash_mix.hpp"

namespace ic::kvevent {

/// The splitmix64 finaliser (index/hash_mix.hpp): spreads any 64-bit value over all bits.
using ic::index::mix64;

template <class Slot, class Key, class Traits>
class flat_table {
 public:
  /// Maximum load before growing (×1.5).
  static constexpr double max_load = 0.8;

  flat_table() { rehash(16); }

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return slots_.size(); }
  /// Bytes of the slot arrays (for the memory figures).
  std::size_t bytes() const { return slots_.capacity() * sizeof(Slot) + used_.capacity(); }

  /// Sizes the table for `n` entries without growth.
  void reserve(std::size_t n) {
    std::size_t want = static_cast<std::size_t>(static_cast<double>(n) / max_load) + 1;
    if (want > slots_.size()) rehash(want);
  }

  Slot* find(const Key& k) {
    std::size_t i = home(Traits::hash(k));
    while (used_[i]) {
      if (Traits::matches(slots_[i], k)) return &slots_[i];
      i = next(i);
    }
    return nullptr;
  }

  /// Returns the slot for `k` and whether it was inserted (then value-initialised, key set).
  std::pair<Slot*, bool> insert(const Key& k) {
    if (Slot* s = find(k)) return {s, false};
    if (static_cast<double>(size_ + 1) > max_load * static_cast<double>(slots_.size())) {
      rehash(slots_.size() + slots_.size() / 2 + 16);
    }
    std::size_t i = home(Traits::hash(k));
    while (used_[i]) i = next(i);
    slots_[i] = Slot{};
    Traits::assign(slots_[i], k);
    used_[i] = 1;
    ++size_;
    return {&slots_[i], true};
  }

  /// Removes `k`; false when absent.
  bool erase(const Key& k) {
    std::size_t i = home(Traits::hash(k));
    while (used_[i]) {
      if (Traits::matches(slots_[i], k)) {
        erase_at(i);
        return true;
      }
      i = next(i);
    }
    return false;
  }

  void clear() {
    std::fill(used_.begin(), used_.end(), 0);
    size_ = 0;
  }

  /// Slot access by index, for incremental scans (refresh) and full walks.
  bool used(std::size_t i) const { return used_[i] != 0; }
  Slot& at(std::size_t i) { return slots_[i]; }
  const Slot& at(std::size_t i) const { return slots_[i]; }

  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (used_[i]) f(slots_[i]);
  }

 private:
  std::size_t home(std::uint64_t h) const {
    return static_cast<std::size_t>((static_cast<unsigned __int128>(h) * slots_.size()) >> 64);
  }
  std::size_t next(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }

  void erase_at(std::size_t i) {
    // Backward shift: pull later members of the probe run into the hole, so lookups never
    // need tombstones.
    std::size_t hole = i;
    std::size_t j = next(i);
    while (used_[j]) {
      std::size_t h = home(Traits::hash_of(slots_[j]));
      bool movable = (hole <= j) ? (h <= hole || h > j) : (h <= hole && h > j);
      if (movable) {
        slots_[hole] = slots_[j];
        hole = j;
      }
      j = next(j);
    }
    used_[hole] = 0;
    --size_;
  }

  void rehash(std::size_t cap) {
    std::vector<Slot> old_slots;
    std::vector<std::uint8_t> old_used;
    old_slots.swap(slots_);
    old_used.swap(used_);
    slots_.assign(cap, Slot{});
    used_.assign(cap, 0);
    slots_.shrink_to_fit();
    used_.shrink_to_fit();
    for (std::size_t k = 0; k < old_slots.size(); ++k) {
      if (!old_used[k]) continue;
      std::size_t i = home(Traits::hash_of(old_slots[k]));
      while (used_[i]) i = next(i);
      slots_[i] = old_slots[k];
      used_[i] = 1;
    }
  }

  std::vector<Slot> slots_;
  std::vector<std::uint8_t> used_;
  std::size_t size_ = 0;
};

}  // namespace ic::kvevent
