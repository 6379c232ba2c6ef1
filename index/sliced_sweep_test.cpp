// A sweep run in slices (the tenant actor answers lookups between slices) must leave the
// same state, report the same counts and record the same changes in the same order as a
// one-shot sweep: replay applies the journaled sweep in one go.
#include <sstream>

#include <gtest/gtest.h>

#include "index/testing/combined_index.hpp"
#include "index/test_support.hpp"

namespace ic::index {
namespace {

using namespace ic::index::testing;

TEST(SlicedSweep, SlicesGiveTheOneShotSweepExactly) {
  for (std::uint64_t seed : {1u, 7u, 42u}) {
    for (std::size_t slice : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " slice " + std::to_string(slice));
      index_options o;
      o.max_entries = 300;
      o.default_ttl = std::chrono::seconds(90);
      combined_index one(o), sliced(o);
      generator gen(seed);
      int steps_with_removals = 0;
      for (int step = 0; step < 600; ++step) {
        if (step % 25 == 24) {
          change_log a, b;
          sweep_result ra = one.sweep(gen.now, &a);
          sweep_result rb;
          combined_index::sweep_cursor cursor;
          int slices = 0;
          while (!sliced.sweep_step(gen.now, cursor, slice, &b, rb)) ++slices;
          EXPECT_EQ(ra.entries_removed_lru, rb.entries_removed_lru);
          EXPECT_EQ(ra.entries_removed_lfu, rb.entries_removed_lfu);
          EXPECT_EQ(ra.stats_rows_removed, rb.stats_rows_removed);
          EXPECT_EQ(image(a), image(b));
          if (!a.empty()) ++steps_with_removals;
          if (slice == 1) {
            EXPECT_GT(slices, 0);
          }
          ASSERT_EQ(one.canonical_dump(), sliced.canonical_dump()) << "step " << step;
        } else if (step % 7 == 3) {
          auto e = gen.make_event();
          one.apply_event(e, gen.now);
          sliced.apply_event(e, gen.now);
        } else {
          auto u = gen.make_update(false);
          one.ingest(u, gen.now);
          sliced.ingest(u, gen.now);
        }
      }
      EXPECT_EQ(one.canonical_dump(), sliced.canonical_dump());
      EXPECT_GT(steps_with_removals, 3);
    }
  }
}

}  // namespace
}  // namespace ic::index
