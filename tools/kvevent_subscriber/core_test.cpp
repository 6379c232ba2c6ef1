// The core against the scenarios of spec/adapter.md §5, fed through the harness (no sockets).
#include "tools/kvevent_subscriber/core.hpp"

#include <gtest/gtest.h>

#include "tools/kvevent_subscriber/test_support.hpp"

namespace ic::kvevent {
namespace {

using namespace fake;
using testing::E;
using testing::F0_127;
using testing::harness;

void expect_entry(const prefix_add& e, std::uint64_t fp, std::uint32_t tokens, tier t = tier::t1) {
  EXPECT_EQ(e.fp, fp) << std::hex << e.fp;
  EXPECT_EQ(e.tokens, tokens);
  EXPECT_EQ(e.t, t);
}

// 1: a root store of two blocks.
TEST(CoreScenarios, S01RootStoreAddsBothFingerprints) {
  harness h;
  h.send(batch(1000.0, {stored({E(0), E(1)}, nil(), tokens(0, 32), 16)}));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, op_type::add);
  EXPECT_EQ(ops[0].ts_us, 1000000000);
  ASSERT_EQ(ops[0].entries.size(), 2u);
  expect_entry(ops[0].entries[0], F0_127[0], 16);
  expect_entry(ops[0].entries[1], F0_127[1], 32);
  EXPECT_EQ(ops[0].entries[0].adapter, 0);
}

// 2: the same in vLLM 0.26 map form, with every later field present.
TEST(CoreScenarios, S02MapFormEqualsTupleForm) {
  harness h;
  mv ev = map({{"type", "BlockStored"}, {"block_hashes", hashes({E(0), E(1)})}, {"parent_block_hash", nil()},
               {"token_ids", tokens(0, 32)}, {"block_size", 16}, {"lora_id", nil()}, {"medium", "GPU"},
               {"lora_name", nil()}, {"extra_keys", arr({nil(), nil()})}, {"group_idx", 0},
               {"kv_cache_spec_kind", "full_attention"}, {"locality", "LOCAL"}});
  h.send(batch(1000.0, {ev}));
  auto adds = harness::adds(h.ops());
  ASSERT_EQ(adds.size(), 2u);
  expect_entry(adds[0], F0_127[0], 16);
  expect_entry(adds[1], F0_127[1], 32);
}

// 3 and 4: the 2-element envelope and the 12-element tuple.
TEST(CoreScenarios, S03S04OldEnvelopeAndLongTuple) {
  harness h;
  h.send(batch(1000.0, {stored({E(0), E(1)}, nil(), tokens(0, 32), 16)}, nil(), true));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 2u);
  harness h2;
  h2.send(batch(1000.0, {stored({E(0), E(1)}, nil(), tokens(0, 32), 16, nil(),
                                {mv("GPU"), nil(), nil(), mv(0), mv("full_attention"), nil()})}));
  auto b = harness::adds(h2.ops());
  ASSERT_EQ(b.size(), 2u);
  expect_entry(b[1], F0_127[1], 32);
}

// 5: SGLang per-page events with negative hashes, rank 3.
TEST(CoreScenarios, S05SglangPagesChainWithNegativeHashes) {
  auto o = testing::base_options();
  o.dialect = wire_dialect::sglang;
  harness h(o);
  mv e1 = arr({mv("BlockStored"), arr({mv(-7)}), nil(), tokens(0, 16), mv(16), nil(), mv("GPU")});
  mv e2 = arr({mv("BlockStored"), arr({mv(-8)}), mv(-7), tokens(16, 16), mv(16), nil(), mv("GPU")});
  h.send(batch(1000.0, {e1, e2}, mv(3)));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 2u);
  expect_entry(a[0], F0_127[0], 16);
  expect_entry(a[1], F0_127[1], 32);
}

// 6: unknown tags (tuple and map) are skipped.
TEST(CoreScenarios, S06UnknownTagsSkipped) {
  harness h;
  h.send(batch(1000.0, {arr({mv("SomeFutureEvent"), mv(42)}), stored({E(0)}, nil(), tokens(0, 16), 16),
                        map({{"type", "Other"}, {"x", 1}})}));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 1u);
  expect_entry(a[0], F0_127[0], 16);
}

// 7: garbage is survived and counted; it is not a gap.
TEST(CoreScenarios, S07GarbagePayloadCountedNotAGap) {
  harness h;
  h.send_raw(0, std::string("\xff\x00", 2));
  h.send_raw(1, encode(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)})));
  EXPECT_EQ(harness::adds(h.ops()).size(), 1u);
  EXPECT_EQ(h.metrics.batch_dropped(0, batch_drop::decode), 1u);
  EXPECT_EQ(h.metrics.seq_gaps.get(0), 0u);
}

// 8: uint, negative int, 32-byte bin and str hashes: stored then removed in the same form.
TEST(CoreScenarios, S08HashFormsRoundTrip) {
  harness h;
  std::vector<mv> hs{mv(std::uint64_t{17927488143086849986ull}), mv(-5), bin(std::string(32, '\x42')), mv("abc")};
  std::vector<mv> stores;
  for (std::size_t k = 0; k < hs.size(); ++k) {
    stores.push_back(arr({mv("BlockStored"), arr({hs[k]}), nil(), tokens(static_cast<std::uint32_t>(k * 16), 16),
                          mv(16), nil()}));
  }
  h.send(batch(1000.0, stores));
  auto added = harness::adds(h.ops());
  ASSERT_EQ(added.size(), 4u);
  std::vector<mv> rms;
  for (auto& x : hs) rms.push_back(arr({mv("BlockRemoved"), arr({x})}));
  h.send(batch(2000.0, rms));
  auto ops = h.ops();
  ASSERT_EQ(harness::count(ops, op_type::evict), 4);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(ops[k].fp, added[k].fp);
}

// 9: a nil hash drops only its event.
TEST(CoreScenarios, S09NilHashDropsOnlyItsEvent) {
  harness h;
  h.send(batch(1000.0, {arr({mv("BlockStored"), arr({nil()}), nil(), tokens(0, 16), mv(16), nil()}),
                        stored({E(1)}, nil(), tokens(16, 16), 16)}));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 1u);
  expect_entry(a[0], testing::F16_31_root, 16);
  EXPECT_EQ(h.dropped(drop_reason::nil_hash), 1u);
}

// 10: a vLLM CPU placeholder (block_size 0) does not take the GPU store with it.
TEST(CoreScenarios, S10CpuPlaceholderBesideGpuStore) {
  harness h;
  h.send(batch(1000.0, {stored({E(0), E(1)}, nil(), tokens(0, 32), 16),
                        arr({mv("BlockStored"), hashes({E(0)}), nil(), arr({}), mv(0), nil(), mv("CPU")})}));
  EXPECT_EQ(harness::adds(h.ops()).size(), 2u);
  EXPECT_EQ(h.dropped(drop_reason::bad_block_size), 1u);
}

// 11, 12: token counts that do not match the hashes index nothing, with the reference's WARN.
TEST(CoreScenarios, S11S12TokenMismatchIndexesNothing) {
  harness h;
  h.send(batch(1000.0, {stored({E(0), E(1)}, nil(), arr({}), 16)}));
  h.send(batch(1000.0, {stored({E(0), E(1), E(2)}, nil(), tokens(0, 40), 16)}));
  EXPECT_TRUE(h.ops().empty());
  EXPECT_EQ(h.dropped(drop_reason::token_mismatch), 2u);
  ASSERT_FALSE(h.warnings.empty());
  EXPECT_EQ(h.warnings[0], "BlockStored produced no index entries (missing or mismatched token_ids)");
}

// 13, 14, 15, 16: truncated tuple, string lora_id, out-of-range and bigram tokens drop one event.
TEST(CoreScenarios, S13ToS16MalformedEventsAreIsolated) {
  harness h;
  h.send(batch(1000.0, {arr({mv("BlockStored"), hashes({E(0)}), nil()}),
                        arr({mv("BlockStored"), hashes({E(2)}), nil(), tokens(0, 16), mv(16), mv("x")}),
                        arr({mv("BlockStored"), hashes({E(3)}), nil(), arr({mv(-1)}), mv(1), nil()}),
                        arr({mv("BlockStored"), hashes({E(4)}), nil(), arr({mv(std::uint64_t{4294967296ull})}), mv(1), nil()}),
                        arr({mv("BlockStored"), hashes({E(5)}), nil(), arr({arr({mv(1), mv(2)})}), mv(1), nil()}),
                        stored({E(1)}, nil(), tokens(0, 16), 16)}));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 1u);
  expect_entry(a[0], F0_127[0], 16);
  EXPECT_EQ(h.dropped(drop_reason::decode), 2u);
  EXPECT_EQ(h.dropped(drop_reason::token_range), 3u);
}

// 17: --topic-match exact drops other topics; prefix keeps them.
TEST(CoreScenarios, S17TopicMatch) {
  harness prefix;
  prefix.send_raw(0, encode(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)})), "kv-events-x");
  EXPECT_EQ(harness::adds(prefix.ops()).size(), 1u);
  auto o = testing::base_options();
  o.topic_exact = true;
  harness exact(o);
  exact.send_raw(0, encode(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)})), "kv-events-x");
  EXPECT_TRUE(exact.ops().empty());
  EXPECT_EQ(exact.metrics.batch_dropped(0, batch_drop::topic), 1u);
}

// 18, 19: a chain across events (and within one batch) equals rolling the whole prompt.
TEST(CoreScenarios, S18S19ChainAcrossEvents) {
  for (bool one_batch : {false, true}) {
    harness h;
    mv a = stored({E(0), E(1), E(2)}, nil(), tokens(0, 48), 16);
    mv b = stored({E(3), E(4), E(5), E(6), E(7)}, mv(E(2)), tokens(48, 80), 16);
    if (one_batch) {
      h.send(batch(1000.0, {a, b}));
    } else {
      h.send(batch(1000.0, {a}));
      h.send(batch(1000.0, {b}));
    }
    auto adds = harness::adds(h.ops());
    ASSERT_EQ(adds.size(), 8u);
    for (int i = 0; i < 8; ++i) expect_entry(adds[static_cast<std::size_t>(i)], F0_127[i], static_cast<std::uint32_t>(16 * (i + 1)));
  }
}

// 20: an unknown parent is an orphan, and so is its child.
TEST(CoreScenarios, S20OrphansAreNeverRoots) {
  harness h;
  h.send(batch(1000.0, {stored({0xE009}, mv(0xDEAD), tokens(16, 16), 16)}));
  h.send(batch(1000.0, {stored({0xE00A}, mv(0xE009), tokens(32, 16), 16)}));
  EXPECT_TRUE(h.ops().empty());
  EXPECT_EQ(h.dropped(drop_reason::orphan), 2u);
}

// 21: a duplicate physical block is evicted at its second removal.
TEST(CoreScenarios, S21RefcountedDuplicateBlock) {
  harness h;
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)}));
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)}));
  EXPECT_EQ(harness::adds(h.ops()).size(), 1u);
  h.send(batch(2000.0, {removed({E(0)})}));
  EXPECT_TRUE(h.ops().empty());
  h.send(batch(2000.0, {removed({E(0)})}));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, op_type::evict);
  EXPECT_EQ(ops[0].fp, F0_127[0]);
}

// 22, 23: re-chunking a 64-token block into 16-token routing keys; 24 not divisible.
TEST(CoreScenarios, S22S23RoutingBlockSize) {
  auto o = testing::base_options();
  o.routing_block_size = 16;
  harness h(o);
  h.send(batch(1000.0, {stored({0x77}, nil(), tokens(0, 64), 64)}));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 4u);
  for (int i = 0; i < 4; ++i) expect_entry(a[static_cast<std::size_t>(i)], F0_127[i], static_cast<std::uint32_t>(16 * (i + 1)));
  h.send(batch(2000.0, {removed({0x77})}));
  auto ops = h.ops();
  ASSERT_EQ(harness::count(ops, op_type::evict), 4);
  h.send(batch(3000.0, {stored({0x78}, nil(), tokens(0, 24), 24)}));
  EXPECT_TRUE(h.ops().empty());
  EXPECT_EQ(h.dropped(drop_reason::block_size_mismatch), 1u);

  harness ref;  // without the flag: one key at the event's block size [REF]
  ref.send(batch(1000.0, {stored({0x77}, nil(), tokens(0, 64), 64)}));
  auto r = harness::adds(ref.ops());
  ASSERT_EQ(r.size(), 1u);
  expect_entry(r[0], testing::F0_63_bs64, 64);
}

// 25, 26: single-tier evictions carry the batch ts and come after the adds.
TEST(CoreScenarios, S25S26EvictionsInOrder) {
  harness h;
  h.send(batch(1000.0, {stored({E(0), E(1), E(2), E(3), E(4), E(5), E(6), E(7)}, nil(), tokens(0, 128), 16)}));
  h.send(batch(2000.0, {removed({E(6), E(7)}), removed({0x1234})}));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].type, op_type::add);
  EXPECT_EQ(ops[0].entries.size(), 8u);
  EXPECT_EQ(ops[1].type, op_type::evict);
  EXPECT_EQ(ops[1].fp, F0_127[6]);
  EXPECT_EQ(ops[1].ts_us, 2000000000);
  EXPECT_EQ(ops[2].fp, F0_127[7]);
}

// 27, 28: AllBlocksCleared sends CLEAR with its ts, supersedes adds, and later children are orphans.
TEST(CoreScenarios, S27S28ClearSupersedesAndOrphansChildren) {
  harness h;
  h.send(batch(1000.0, {stored({E(0), E(1)}, nil(), tokens(0, 32), 16), cleared()}));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, op_type::clear);
  EXPECT_EQ(ops[0].ts_us, 1000000000);
  h.send(batch(3000.0, {stored({E(8)}, mv(E(1)), tokens(32, 16), 16)}));
  EXPECT_TRUE(h.ops().empty());
  EXPECT_EQ(h.dropped(drop_reason::orphan), 1u);
  EXPECT_EQ(h.core->tracked_blocks(), 0u);
}

// 29, 30, 31: L2 mode: T1, then T2 in its own CSU at the eviction ts, then T1; never EVICT.
TEST(CoreScenarios, S29S30S31L2Mode) {
  auto o = testing::base_options();
  o.ignore_block_removed = true;
  o.window_ms = 3600000;
  harness h(o);
  h.send(batch(100.0, {stored({E(0)}, nil(), tokens(0, 16), 16)}));
  h.send(batch(200.0, {removed({E(0)})}));
  h.send(batch(300.0, {stored({E(1)}, nil(), tokens(1000, 16), 16)}));
  h.send(batch(400.0, {stored({E(2)}, nil(), tokens(0, 16), 16)}));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].type, op_type::add);
  EXPECT_EQ(ops[0].ts_us, 100000000);
  EXPECT_EQ(ops[1].type, op_type::t2);
  ASSERT_EQ(ops[1].entries.size(), 1u);
  expect_entry(ops[1].entries[0], F0_127[0], 16, tier::t2);
  EXPECT_EQ(ops[1].ts_us, 200000000);
  EXPECT_EQ(ops[2].entries.size(), 2u);  // B and the restored A (T1), at the latest ts
  EXPECT_EQ(ops[2].entries[1].t, tier::t1);
  EXPECT_EQ(harness::count(ops, op_type::evict), 0);
  h.send(batch(500.0, {cleared()}));
  auto c = h.ops();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].type, op_type::clear);
}

// 32: a CPU copy keeps the key T1; the GPU removal leaves it T2 (observed); the CPU removal evicts.
TEST(CoreScenarios, S32MediumAwareObservedT2) {
  harness h;
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16, nil(), {mv("GPU")})}));
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16, nil(), {mv("CPU")})}));
  auto a = h.ops();
  ASSERT_EQ(harness::adds(a).size(), 1u);
  h.send(batch(2000.0, {removed({E(0)}, {mv("GPU")})}));
  auto b = h.ops();
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(b[0].entries.size(), 1u);
  EXPECT_EQ(b[0].entries[0].t, tier::t2);
  h.send(batch(3000.0, {removed({E(0)}, {mv("cpu")})}));
  auto c = h.ops();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].type, op_type::evict);
}

// 33: a store-only CPU event is T2 and is forgotten after --t2-retention without an RPC.
TEST(CoreScenarios, S33StoreOnlyT2Expires) {
  auto o = testing::base_options();
  o.t2_retention_ms = 1000;
  harness h(o);
  h.send(batch(1000.0, {stored({0x77}, nil(), tokens(0, 16), 16, nil(), {mv("CPU")})}));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].t, tier::t2);
  h.core->tick(h.now);
  EXPECT_EQ(h.metrics.residency_keys.get(2), 1u);
  h.now += 1001;
  h.core->tick(h.now);
  EXPECT_EQ(h.metrics.residency_keys.get(2), 0u);
  EXPECT_TRUE(h.ops().empty());
}

// 34: an unknown medium drops the event.
TEST(CoreScenarios, S34UnknownMedium) {
  harness h;
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16, nil(), {mv("QUANTUM")})}));
  EXPECT_TRUE(h.ops().empty());
  EXPECT_EQ(h.dropped(drop_reason::unknown_medium), 1u);
}

// 35: hybrid groups: the sliding-window group is not indexed and its removal evicts nothing.
TEST(CoreScenarios, S35HybridGroups) {
  harness h;
  auto ev = [](int group, const char* kind) {
    return map({{"type", "BlockStored"}, {"block_hashes", hashes({E(0)})}, {"parent_block_hash", nil()},
                {"token_ids", tokens(0, 16)}, {"block_size", 16}, {"lora_id", nil()}, {"medium", "GPU"},
                {"lora_name", nil()}, {"group_idx", group}, {"kv_cache_spec_kind", kind}});
  };
  h.send(batch(1000.0, {ev(0, "full_attention"), ev(1, "sliding_window")}));
  EXPECT_EQ(harness::adds(h.ops()).size(), 1u);
  EXPECT_EQ(h.dropped(drop_reason::kv_group), 1u);
  auto rm = [](int group) {
    return map({{"type", "BlockRemoved"}, {"block_hashes", hashes({E(0)})}, {"medium", "GPU"}, {"group_idx", group}});
  };
  h.send(batch(2000.0, {rm(1)}));
  EXPECT_TRUE(h.ops().empty());
  h.send(batch(2000.0, {rm(0)}));
  EXPECT_EQ(harness::count(h.ops(), op_type::evict), 1);
}

// 36, 37, 40: LoRA mapping, fail-closed with one WARN, evictions carry the adapter.
TEST(CoreScenarios, S36S37LoraFailClosed) {
  auto o = testing::base_options();
  o.lora_names = {{1, "sql-lora"}};
  harness h(o);
  for (int rep = 0; rep < 10; ++rep) {
    h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16, mv(1)), stored({E(1)}, nil(), tokens(0, 16), 16, mv(2)),
                          stored({E(2)}, nil(), tokens(0, 16), 16, nil())}));
  }
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(h.adapters.name(a[0].adapter), "sql-lora");
  EXPECT_EQ(h.adapters.name(a[1].adapter), "");
  int unmapped = 0;
  for (const auto& w : h.warnings) unmapped += w.find("unmapped LoRA id") != std::string::npos;
  EXPECT_EQ(unmapped, 1);
  for (int rep = 0; rep < 10; ++rep) h.send(batch(2000.0, {removed({E(0)})}));
  auto ev = h.ops();
  ASSERT_EQ(harness::count(ev, op_type::evict), 1);
  EXPECT_EQ(h.adapters.name(ev[0].adapter), "sql-lora");
  h.send(batch(2000.0, {removed({E(1)})}));
  EXPECT_TRUE(h.ops().empty());
}

// 39: --lora-name-as-adapter; an explicit map wins.
TEST(CoreScenarios, S39LoraNameFallback) {
  auto o = testing::base_options();
  o.lora_name_as_adapter = true;
  harness h(o);
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16, mv(3), {mv("GPU"), mv("chat")})}));
  auto a = harness::adds(h.ops());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(h.adapters.name(a[0].adapter), "chat");
  o.lora_names = {{3, "sql"}};
  harness h2(o);
  h2.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16, mv(3), {mv("GPU"), mv("chat")})}));
  auto b = harness::adds(h2.ops());
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(h2.adapters.name(b[0].adapter), "sql");
}

// 41: salted blocks are dropped (and their children orphaned); lora_name in extra_keys is not salt.
TEST(CoreScenarios, S41ExtraKeys) {
  auto salted = [](mv extra, mv lora_name) {
    return map({{"type", "BlockStored"}, {"block_hashes", hashes({E(0), E(1)})}, {"parent_block_hash", nil()},
                {"token_ids", tokens(0, 32)}, {"block_size", 16}, {"lora_id", nil()}, {"medium", "GPU"},
                {"lora_name", lora_name}, {"extra_keys", extra}});
  };
  harness h;
  h.send(batch(1000.0, {salted(arr({arr({mv("salt-a")}), nil()}), nil())}));
  h.send(batch(1000.0, {stored({E(2)}, mv(E(1)), tokens(32, 16), 16)}));
  EXPECT_TRUE(h.ops().empty());
  EXPECT_EQ(h.dropped(drop_reason::extra_keys), 1u);
  EXPECT_EQ(h.dropped(drop_reason::orphan), 1u);
  auto o = testing::base_options();
  o.lora_name_as_adapter = true;
  harness lora(o);
  lora.send(batch(1000.0, {salted(arr({arr({mv("sql-lora")}), arr({mv("sql-lora")})}), mv("sql-lora"))}));
  EXPECT_EQ(harness::adds(lora.ops()).size(), 2u);
  o = testing::base_options();
  o.extra_keys_drop = false;
  harness ignore(o);
  ignore.send(batch(1000.0, {salted(arr({arr({mv("salt-a")}), nil()}), nil())}));
  EXPECT_EQ(harness::adds(ignore.ops()).size(), 2u);
}

// 42, 43: coalescing shares the latest positive ts; a non-positive ts gives 0.
TEST(CoreScenarios, S42S43Timestamps) {
  auto o = testing::base_options();
  o.window_ms = 1000;
  harness h(o);
  h.send(batch(1.0, {stored({E(0)}, nil(), tokens(0, 16), 16)}));
  h.send(batch(2.0, {stored({E(1)}, nil(), tokens(100, 16), 16)}));
  h.send(batch(3.0, {stored({E(2)}, nil(), tokens(200, 16), 16)}));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].entries.size(), 3u);
  EXPECT_EQ(ops[0].ts_us, 3000000);
  harness z;
  z.send(batch(-5.0, {stored({E(0)}, nil(), tokens(0, 16), 16)}));
  EXPECT_EQ(z.ops()[0].ts_us, 0);
}

// 44: a 5000-block store goes out as CSUs of at most 4096 entries.
TEST(CoreScenarios, S44LargeEventIsSplit) {
  harness h;
  std::vector<std::uint64_t> hs;
  for (int i = 0; i < 5000; ++i) hs.push_back(0x100000 + static_cast<std::uint64_t>(i));
  h.send(batch(1000.0, {stored(hs, nil(), tokens(0, 80000), 16)}));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].entries.size(), 4096u);
  EXPECT_EQ(ops[1].entries.size(), 904u);
}

// 47, 48: contiguous seqs never replay; a gap is recovered from the ring, in order.
TEST(CoreScenarios, S47S48GapRecoveredThroughReplay) {
  auto o = testing::base_options();
  o.replay = true;
  harness h(o);
  std::vector<std::string> ring = {
      encode(batch(1000.0, {stored({E(0), E(1), E(2)}, nil(), tokens(0, 48), 16)})),
      encode(batch(1000.0, {stored({0xF000}, nil(), tokens(1000, 16), 16)})),
      encode(batch(1000.0, {stored({E(3)}, mv(E(2)), tokens(48, 16), 16)})),
      encode(batch(1000.0, {removed({E(1)})})),
      encode(batch(1000.0, {stored({E(4)}, mv(E(3)), tokens(64, 16), 16)}))};
  h.send_raw(0, ring[0]);
  h.send_raw(1, ring[1]);
  EXPECT_TRUE(h.port.requests.empty());
  h.send_raw(4, ring[4]);
  ASSERT_EQ(h.port.requests.size(), 1u);
  EXPECT_EQ(h.port.requests[0].second, 2u);
  for (std::uint64_t q = 2; q <= 4; ++q) h.core->on_replay(0, q, ring[q], h.now);
  h.core->on_replay_end(0, h.now);
  EXPECT_EQ(h.core->tracked_blocks(), 5u);  // E0, E2, E3, E4, F000
  EXPECT_EQ(h.core->reported("", F0_127[1]), tier::absent);
  EXPECT_EQ(h.core->reported("", F0_127[4]), tier::t1);
  EXPECT_EQ(h.metrics.seq_gaps.get(0), 1u);
  EXPECT_EQ(h.metrics.seq_missed.get(0), 2u);
  EXPECT_EQ(h.metrics.replay_count(0, replay_result::ok), 1u);
  EXPECT_EQ(h.dropped(drop_reason::orphan), 0u);
  EXPECT_EQ(h.core->refcount(0, E(4)), 1u);  // the live seq 4 was a duplicate of the replayed one (56)
}

// 50, 51: a wrapped ring or no replay endpoint is unrecoverable: CLEAR, then the live messages.
TEST(CoreScenarios, S50S51UnrecoverableGapClears) {
  for (bool have_replay : {true, false}) {
    auto o = testing::base_options();
    o.replay = have_replay;
    harness h(o);
    h.send_raw(0, encode(batch(1000.0, {stored({E(0), E(1), E(2)}, nil(), tokens(0, 48), 16)})));
    h.send_raw(1, encode(batch(1000.0, {stored({0xF000}, nil(), tokens(1000, 16), 16)})));
    h.ops();
    std::string live4 = encode(batch(1000.0, {stored({E(4)}, mv(E(3)), tokens(64, 16), 16)}));
    h.send_raw(4, live4);
    if (have_replay) {
      h.core->on_replay(0, 3, encode(batch(1000.0, {removed({E(1)})})), h.now);  // ring starts at 3 > 2
      EXPECT_EQ(h.metrics.replay_count(0, replay_result::truncated), 1u);
    } else {
      EXPECT_EQ(h.metrics.replay_count(0, replay_result::unavailable), 1u);
    }
    auto ops = h.ops();
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].type, op_type::clear);
    EXPECT_EQ(h.core->tracked_blocks(), 0u);
    EXPECT_EQ(h.dropped(drop_reason::orphan), 1u);  // E4's parent went with the clear
  }
}

// 52: a lossy replay round (holes, END lost) is re-asked from the first missing seq.
TEST(CoreScenarios, S52LossyReplayReasked) {
  auto o = testing::base_options();
  o.replay = true;
  o.replay_timeout_ms = 100;
  harness h(o);
  std::vector<std::string> p;
  for (int q = 0; q <= 10; ++q) p.push_back(encode(batch(1000.0, {stored({0x100 + static_cast<std::uint64_t>(q)}, nil(), tokens(static_cast<std::uint32_t>(q * 16), 16), 16)})));
  for (int q = 0; q <= 2; ++q) h.send_raw(static_cast<std::uint64_t>(q), p[static_cast<std::size_t>(q)]);
  h.send_raw(10, p[10]);
  ASSERT_EQ(h.port.requests.back().second, 3u);
  for (int q : {3, 4, 8, 9, 10}) h.core->on_replay(0, static_cast<std::uint64_t>(q), p[static_cast<std::size_t>(q)], h.now);
  h.now += 101;
  h.core->tick(h.now);  // END never came
  ASSERT_EQ(h.port.requests.size(), 2u);
  EXPECT_EQ(h.port.requests[1].second, 5u);
  for (int q = 5; q <= 10; ++q) h.core->on_replay(0, static_cast<std::uint64_t>(q), p[static_cast<std::size_t>(q)], h.now);
  EXPECT_EQ(h.core->tracked_blocks(), 11u);
  EXPECT_EQ(h.core->status(0).expected.value_or(0), 11u);
  EXPECT_FALSE(h.core->status(0).recovering);
  EXPECT_EQ(h.metrics.replay_count(0, replay_result::timeout), 1u);
}

// 53: the sequence going back to 0 is an engine restart: CLEAR, then the new content, no replay.
TEST(CoreScenarios, S53EngineRestart) {
  auto o = testing::base_options();
  o.replay = true;
  harness h(o);
  for (int q = 0; q <= 5; ++q)
    h.send_raw(static_cast<std::uint64_t>(q), encode(batch(1000.0, {stored({0x100 + static_cast<std::uint64_t>(q)}, nil(), tokens(static_cast<std::uint32_t>(q * 16), 16), 16)})));
  h.ops();
  h.send_raw(0, encode(batch(1000.0, {stored({0x999}, nil(), tokens(5000, 16), 16)})));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].type, op_type::clear);
  EXPECT_EQ(ops[1].type, op_type::add);
  EXPECT_EQ(h.metrics.engine_restarts.get(0), 1u);
  EXPECT_TRUE(h.port.requests.empty());
  EXPECT_EQ(h.core->status(0).incarnation, 1u);
}

// 54: startup replay: CLEAR @0, then every replayed key @0, then live adds with their ts.
TEST(CoreScenarios, S54StartupReplay) {
  auto o = testing::base_options();
  o.replay = true;
  o.clear_on_start = true;
  harness h(o);
  h.start();
  ASSERT_EQ(h.port.requests.size(), 1u);
  EXPECT_EQ(h.port.requests[0].second, 0u);
  h.send_raw(5, encode(batch(2000.0, {stored({E(5)}, mv(E(4)), tokens(80, 16), 16)})));  // live, held
  mv parent = nil();
  for (int q = 0; q <= 4; ++q) {
    h.core->on_replay(0, static_cast<std::uint64_t>(q),
                      encode(batch(1000.0, {stored({E(q)}, parent, tokens(static_cast<std::uint32_t>(q * 16), 16), 16)})), h.now);
    parent = mv(E(q));
  }
  h.core->on_replay_end(0, h.now);  // seq 5 is held: END closes the round
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].type, op_type::clear);
  EXPECT_EQ(ops[0].ts_us, 0);
  EXPECT_EQ(ops[1].entries.size(), 5u);
  EXPECT_EQ(ops[1].ts_us, 0);
  ASSERT_EQ(ops[2].entries.size(), 1u);
  EXPECT_EQ(ops[2].entries[0].fp, F0_127[5]);
  EXPECT_EQ(ops[2].ts_us, 2000000000);
}

// A restart after a replay: seq 0 again is a restart, not a duplicate of the replayed seq 0.
TEST(CoreScenarios, RestartAfterStartupReplayIsNotADuplicate) {
  auto o = testing::base_options();
  o.replay = true;
  harness h(o);
  h.start();
  for (int q = 0; q <= 2; ++q)
    h.core->on_replay(0, static_cast<std::uint64_t>(q), encode(batch(1000.0, {stored({0x100 + static_cast<std::uint64_t>(q)}, nil(), tokens(static_cast<std::uint32_t>(q * 16), 16), 16)})), h.now);
  h.core->on_replay_end(0, h.now);
  h.send_raw(3, encode(batch(1000.0, {stored({0x200}, nil(), tokens(900, 16), 16)})));
  h.ops();
  h.send_raw(0, encode(batch(1000.0, {stored({0x300}, nil(), tokens(5000, 16), 16)})));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].type, op_type::clear);
  EXPECT_EQ(h.metrics.engine_restarts.get(0), 1u);
  EXPECT_EQ(h.core->tracked_blocks(), 1u);
}

// 55: a late join is not a gap; with clear-on-start one CLEAR comes first.
TEST(CoreScenarios, S55LateJoin) {
  auto o = testing::base_options();
  o.clear_on_start = true;
  harness h(o);
  h.start();
  h.send_raw(17, encode(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)})));
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].type, op_type::clear);
  EXPECT_EQ(h.metrics.seq_gaps.get(0), 0u);
}

// 59: the op log overflows: discarded, resync_needed; the resync sends CLEAR then the live keys.
TEST(CoreScenarios, S59OverflowLeadsToResync) {
  harness h(testing::base_options(), 10);
  for (int i = 0; i < 100; ++i) {
    h.send(batch(1000.0, {stored({0x1000 + static_cast<std::uint64_t>(i)}, nil(), tokens(static_cast<std::uint32_t>(i * 16), 16), 16)}));
    h.core->flush();
  }
  for (int i = 0; i < 50; ++i) h.send(batch(2000.0, {removed({0x1000 + static_cast<std::uint64_t>(i)})}));
  EXPECT_TRUE(h.log.resync_needed());
  h.core->request_resync(resync_reason::overflow);
  h.core->tick(h.now);
  auto ops = h.ops();
  ASSERT_GE(ops.size(), 2u);
  EXPECT_EQ(ops[0].type, op_type::clear);
  EXPECT_EQ(ops[0].ts_us, 0);
  EXPECT_EQ(harness::adds(ops).size(), 50u);
  EXPECT_EQ(harness::count(ops, op_type::evict), 0);
  EXPECT_EQ(h.metrics.resyncs.get(static_cast<std::size_t>(resync_reason::overflow)), 1u);
}

// A resync asked for during the startup replay waits for it, then replaces the log.
TEST(CoreScenarios, ResyncDuringStartupReplayIsDeferred) {
  auto o = testing::base_options();
  o.replay = true;
  o.clear_on_start = true;
  harness h(o);
  h.start();
  h.core->request_resync(resync_reason::overflow);
  h.core->tick(h.now);
  std::uint64_t gen = h.log.generation();
  h.core->on_replay(0, 0, encode(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)})), h.now);
  h.core->on_replay_end(0, h.now);
  h.core->tick(h.now);
  EXPECT_GT(h.log.generation(), gen);
  auto ops = h.ops();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].type, op_type::clear);
  EXPECT_EQ(ops[1].entries.size(), 1u);
}

// 63: refresh re-sends resident T1 keys at ts 0, never inferred T2.
TEST(CoreScenarios, S63Refresh) {
  auto o = testing::base_options();
  o.refresh_interval_ms = 1000;
  o.ignore_block_removed = true;
  harness h(o);
  h.start();
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16), stored({E(1)}, nil(), tokens(100, 16), 16)}));
  h.send(batch(2000.0, {removed({E(1)})}));
  h.ops();
  h.now += 1000;
  h.core->tick(h.now);
  auto ops = h.ops();
  auto a = harness::adds(ops);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].fp, F0_127[0]);
  EXPECT_EQ(ops[0].ts_us, 0);
}

// 76: DP ranks: a key is evicted only when no rank holds it; a rank's clear sends no CLEAR.
TEST(CoreScenarios, S76DataParallelRanks) {
  auto o = testing::base_options();
  o.sources = 2;
  harness h(o);
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)}), 0);
  h.send(batch(1000.0, {stored({E(0)}, nil(), tokens(0, 16), 16)}), 1);
  EXPECT_EQ(harness::adds(h.ops()).size(), 1u);
  h.send(batch(2000.0, {removed({E(0)})}), 0);
  EXPECT_TRUE(h.ops().empty());
  h.send(batch(2000.0, {removed({E(0)})}), 1);
  EXPECT_EQ(harness::count(h.ops(), op_type::evict), 1);
  h.send(batch(3000.0, {stored({E(1)}, nil(), tokens(100, 16), 16)}), 0);
  h.send(batch(3000.0, {stored({E(1)}, nil(), tokens(100, 16), 16), stored({E(2)}, nil(), tokens(200, 16), 16)}), 1);
  h.ops();
  h.send(batch(4000.0, {cleared()}), 1);
  auto ops = h.ops();
  EXPECT_EQ(harness::count(ops, op_type::clear), 0);
  ASSERT_EQ(harness::count(ops, op_type::evict), 1);
}

// 77: the reverse map is bounded; dropped entries send no EVICT.
TEST(CoreScenarios, S77BoundedReverseMap) {
  auto o = testing::base_options();
  o.max_tracked_blocks = 4;
  harness h(o);
  for (int i = 0; i < 6; ++i)
    h.send(batch(1000.0, {stored({0x500 + static_cast<std::uint64_t>(i)}, nil(), tokens(static_cast<std::uint32_t>(i * 16), 16), 16)}));
  h.ops();
  h.core->tick(h.now);
  EXPECT_EQ(h.metrics.tracked_blocks.load(), 4u);
  EXPECT_EQ(h.metrics.tracked_evicted.load(), 2u);
  h.send(batch(2000.0, {removed({0x500})}));
  EXPECT_TRUE(h.ops().empty());
}

}  // namespace
}  // namespace ic::kvevent
