// The key table of a tenant index: an open-addressing hash table from a key's 64-bit hash to
// the index of its record, which the owner stores elsewhere (tenant_index's slab).
//
//   key_table t;                                        // 16 empty slots
//   std::size_t at = 0;
//   std::uint32_t r = t.find(h, [&](std::uint32_t rec) { return same_key(rec); }, at);
//   if (r == key_table::npos) {
//     t.insert_at(at, h, new_record);                   // `at`: the empty slot find() ended on
//     if (t.over_load()) t.rehash(t.slot_count() * 2, hash_of);
//   }
//   t.erase(record, hash_of);                           // backward-shift deletion
//
// Linear probing over 4-byte slots: (6-bit hash tag << 26) | (record index + 1), 0 = empty.
// The tag lets a probe skip almost every non-matching slot without touching its record.
// Max load 7/8 (the owner grows with `over_load` / `rehash`), no tombstones. Every lookup
// and insert goes through the one probe loop `find` (header-only, so it inlines into the
// chain walk). The table never hashes a key itself: `rehash` and `erase` take the owner's
// `hash_of(record)`, the function the owner used to compute `h`.
//
// Plain C++, not thread-safe: const calls may run concurrently, never with a mutation.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace ic::index {

class key_table {
 public:
  /// The "not found" record index.
  static constexpr std::uint32_t npos = 0xFFFFFFFFu;
  /// Record indexes must be below this (26 bits less the empty marker; 64 M keys).
  static constexpr std::uint32_t max_records = (1u << 26) - 1;

  /// Creates an empty table of 16 slots.
  key_table() : slots_(16, 0) {}

  /// Returns the number of records in the table.
  std::size_t size() const { return used_; }
  /// Returns the number of slots (a power of two).
  std::size_t slot_count() const { return slots_.size(); }
  /// Returns the heap bytes of the slots.
  std::size_t memory_bytes() const { return slots_.capacity() * sizeof(std::uint32_t); }
  /// Returns true when `extra` more records would put the load above 7/8.
  bool over_load(std::size_t extra = 0) const { return (used_ + extra) * 8 > slots_.size() * 7; }

  /// The probe loop: from `h`'s home slot, returns the record index of the first slot whose
  /// tag matches `h` and whose record `same(record)` accepts, or `npos` at the empty slot
  /// that ends the probe. `at` is left on that slot (where an insert of the key goes).
  template <class Same>
  std::uint32_t find(std::uint64_t h, Same same, std::size_t& at) const {
    const std::size_t mask = slots_.size() - 1;
    const std::uint32_t tag = tag_of(h);
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint32_t sl = slots_[i];
      if (sl == 0) {
        at = i;
        return npos;
      }
      if ((sl & ~index_mask) != tag) continue;
      const std::uint32_t rec = (sl & index_mask) - 1;
      if (same(rec)) {
        at = i;
        return rec;
      }
    }
  }

  /// Stores `record` (hash `h`) in slot `at`, the empty slot `find(h, …)` just returned.
  /// Aborts when `record` is not below `max_records` (documented limit). Does not grow.
  void insert_at(std::size_t at, std::uint64_t h, std::uint32_t record) {
    if (record >= max_records) std::abort();  // > 64 M keys in one tenant
    slots_[at] = tag_of(h) | (record + 1);
    ++used_;
  }

  /// Removes `record`, which must be in the table; `hash_of(r)` returns any record's hash.
  template <class HashOf>
  void erase(std::uint32_t record, HashOf hash_of) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = hash_of(record) & mask;
    while ((slots_[i] & index_mask) != record + 1) i = (i + 1) & mask;
    // Backward-shift deletion keeps linear probing tombstone-free.
    std::size_t j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (slots_[j] == 0) break;
      const std::size_t home = hash_of((slots_[j] & index_mask) - 1) & mask;
      const bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = 0;
    --used_;
  }

  /// Moves every record into a table of `slots` slots (a power of two, larger than the
  /// records at 7/8 load) in one pass; `hash_of(r)` returns a record's hash.
  template <class HashOf>
  void rehash(std::size_t slots, HashOf hash_of) {
    std::vector<std::uint32_t> next;
    reserve_huge(next, slots);
    next.assign(slots, 0);
    const std::size_t mask = slots - 1;
    for (const std::uint32_t sl : slots_) {
      if (sl == 0) continue;
      std::size_t i = hash_of((sl & index_mask) - 1) & mask;
      while (next[i] != 0) i = (i + 1) & mask;
      next[i] = sl;
    }
    slots_.swap(next);
  }

  /// Empties the table and sizes it to `slots` slots (a power of two), for a bulk load.
  void reset(std::size_t slots) {
    reserve_huge(slots_, slots);
    slots_.assign(slots, 0);
    used_ = 0;
  }

  /// Returns the smallest slot count (a power of two, at least 16) that holds `records` at a
  /// load of at most 7/8.
  static std::size_t slots_for(std::size_t records) {
    std::size_t slots = 16;
    while (records * 8 > slots * 7) slots *= 2;
    return slots;
  }

  /// Prefetches `h`'s home slot.
  void prefetch(std::uint64_t h) const { __builtin_prefetch(&slots_[h & (slots_.size() - 1)]); }
  /// Returns the record in `h`'s home slot (whatever its tag), or `npos` when it is empty:
  /// a prefetch hint for the record the probe will most likely read.
  std::uint32_t home_record(std::uint64_t h) const {
    const std::uint32_t sl = slots_[h & (slots_.size() - 1)];
    return sl == 0 ? npos : (sl & index_mask) - 1;
  }

 private:
  static constexpr std::uint32_t index_mask = (1u << 26) - 1;
  static std::uint32_t tag_of(std::uint64_t h) { return static_cast<std::uint32_t>(h >> 58) << 26; }

  /// Reserves `n` slots for an empty table, asking for transparent huge pages when the table
  /// is large: inserts and lookups hit random slots, and 4 KiB pages would make nearly every
  /// one a TLB miss. Only a hint; nothing depends on it.
  static void reserve_huge(std::vector<std::uint32_t>& slots, std::size_t n) {
    slots.clear();
    slots.shrink_to_fit();
    slots.reserve(n);
#ifdef MADV_HUGEPAGE
    constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
    const auto begin = reinterpret_cast<std::uintptr_t>(slots.data());
    const std::uintptr_t end = begin + n * sizeof(std::uint32_t);
    const std::uintptr_t first = (begin + huge - 1) & ~(huge - 1);
    const std::uintptr_t last = end & ~(huge - 1);
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
  }

  std::vector<std::uint32_t> slots_;
  std::size_t used_ = 0;
};

}  // namespace ic::index
