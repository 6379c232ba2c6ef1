// Bounded decoding: msgpack reader limits, envelope shapes, per-event isolation, and hostile
// input (truncations, lies about lengths, random bytes) that must never crash or allocate
// by a declared size.
#include "tools/kvevent_subscriber/events.hpp"

#include <random>

#include <gtest/gtest.h>

#include "tools/kvevent_subscriber/fake_engine.hpp"
#include "tools/kvevent_subscriber/msgpack_reader.hpp"

namespace ic::kvevent {
namespace {

using namespace fake;

TEST(MsgpackReader, RejectsLengthsTheFrameCannotHold) {
  // array32 of 2^32-1 elements in 5 bytes, map32, str32, bin32: all refused up front.
  for (std::string bad : {std::string("\xdd\xff\xff\xff\xff", 5), std::string("\xdf\xff\xff\xff\xff", 5),
                          std::string("\xdb\x00\x01\x00\x00", 5), std::string("\xc6\x7f\xff\xff\xff", 5)}) {
    mp_reader r(bad);
    mp_value v;
    EXPECT_FALSE(r.next(v)) << std::hex << static_cast<int>(static_cast<unsigned char>(bad[0]));
  }
}

TEST(MsgpackReader, SkipsDeepNestingWithoutRecursion) {
  std::string deep(100000, '\x91');  // [[[[...]]]] 100k levels
  deep += '\xc0';
  mp_reader r(deep);
  EXPECT_TRUE(r.skip());
  EXPECT_TRUE(r.at_end());
}

TEST(MsgpackReader, NormalisesIntegerWidthsAndSigns) {
  std::string s = encode(arr({mv(std::uint64_t{18446744073709551615ull}), mv(-5), mv(7)}));
  mp_reader r(s);
  mp_value v;
  ASSERT_TRUE(r.next(v));
  ASSERT_EQ(v.count, 3u);
  ASSERT_TRUE(r.next(v));
  EXPECT_EQ(v.type, mp_type::uint);
  EXPECT_EQ(v.u, 18446744073709551615ull);
  ASSERT_TRUE(r.next(v));
  EXPECT_EQ(v.type, mp_type::sint);
  EXPECT_EQ(v.i, -5);
  std::string signed_positive("\xd3\x00\x00\x00\x00\x00\x00\x00\x09", 9);  // int64 9
  mp_reader r2(signed_positive);
  ASSERT_TRUE(r2.next(v));
  EXPECT_EQ(v.type, mp_type::uint);
  EXPECT_EQ(v.u, 9u);
}

TEST(DecodeBatch, AcceptsEveryEnvelopeShape) {
  decoded_batch b;
  EXPECT_TRUE(decode_batch(encode(batch(1.5, {cleared()})), wire_dialect::vllm, b));
  EXPECT_EQ(b.size, 1u);
  EXPECT_DOUBLE_EQ(b.ts, 1.5);
  EXPECT_EQ(b.rank.value_or(-1), 0);
  EXPECT_TRUE(decode_batch(encode(batch(1.5, {cleared()}, nil(), true)), wire_dialect::vllm, b));
  EXPECT_TRUE(decode_batch(encode(arr({mv(1.5), arr({cleared()}), mv(3), mv("future")})), wire_dialect::vllm, b));
  EXPECT_EQ(b.rank.value_or(-1), 3);
  EXPECT_TRUE(decode_batch(encode(map({{"events", arr({cleared()})}, {"ts", mv(2.0)}, {"data_parallel_rank", nil()}})),
                           wire_dialect::vllm, b));
  EXPECT_DOUBLE_EQ(b.ts, 2.0);
}

TEST(DecodeBatch, RejectsMalformedEnvelopes) {
  decoded_batch b;
  EXPECT_FALSE(decode_batch(encode(arr({mv(1.0)})), wire_dialect::vllm, b));           // 1 element
  EXPECT_FALSE(decode_batch(encode(mv("x")), wire_dialect::vllm, b));                  // not a container
  EXPECT_FALSE(decode_batch(encode(map({{"ts", mv(1.0)}})), wire_dialect::vllm, b));   // no events
  std::string trailing = encode(batch(1.0, {})) + '\xc0';
  EXPECT_FALSE(decode_batch(trailing, wire_dialect::vllm, b));
  EXPECT_FALSE(decode_batch(std::string("\xff\x00", 2), wire_dialect::vllm, b));
}

TEST(DecodeBatch, OneBadEventKeepsTheOthers) {
  decoded_batch b;
  std::string p = encode(batch(1.0, {arr({mv("BlockStored"), arr({nil()}), nil(), tokens(0, 16), mv(16), nil()}),
                                     stored({1}, nil(), tokens(0, 16), 16)}));
  ASSERT_TRUE(decode_batch(p, wire_dialect::vllm, b));
  ASSERT_EQ(b.size, 2u);
  EXPECT_EQ(b.events[0].error, drop_reason::nil_hash);
  EXPECT_EQ(b.events[1].error, drop_reason::none);
  EXPECT_EQ(b.events[1].tokens.size(), 16u);
}

TEST(DecodeBatch, SglangIndexSevenIsMetadataNotLoraName) {
  decoded_batch b;
  mv ev = arr({mv("BlockStored"), hashes({1}), nil(), tokens(0, 16), mv(16), nil(), mv("GPU"),
               map({{"cache_salt", "s"}, {"session_id", "x"}})});
  ASSERT_TRUE(decode_batch(encode(batch(1.0, {ev})), wire_dialect::sglang, b));
  EXPECT_TRUE(b.events[0].salted);
  EXPECT_FALSE(b.events[0].lora_name);
  ASSERT_TRUE(decode_batch(encode(batch(1.0, {ev})), wire_dialect::vllm, b));  // wrong type at 7: absent
  EXPECT_FALSE(b.events[0].salted);
  EXPECT_EQ(b.events[0].error, drop_reason::none);
}

TEST(DecodeBatch, ExtraKeysPastTheLastHashNameNoBlock) {
  // Found by fuzz_kvevent_batch: more extra_keys entries than block hashes, in both layouts
  // (the map form may list extra_keys before block_hashes).
  decoded_batch b;
  mv pos = arr({mv("BlockStored"), hashes({1}), nil(), tokens(0, 16), mv(16), nil(), mv("GPU"), nil(),
                arr({nil(), arr({mv("salt")}), arr({mv("salt")})})});
  ASSERT_TRUE(decode_batch(encode(batch(1.0, {pos})), wire_dialect::vllm, b));
  EXPECT_EQ(b.events[0].error, drop_reason::none);
  EXPECT_EQ(b.events[0].extra_nonempty, std::vector<std::uint8_t>({0}));
  mv m = map({{"type", "BlockStored"}, {"extra_keys", arr({arr({mv("salt")}), nil(), arr({mv("x")})})},
              {"block_hashes", hashes({1, 2})}, {"token_ids", tokens(0, 32)}, {"block_size", mv(16)}});
  ASSERT_TRUE(decode_batch(encode(batch(1.0, {m})), wire_dialect::vllm, b));
  EXPECT_EQ(b.events[0].error, drop_reason::none);
  EXPECT_EQ(b.events[0].extra_nonempty, std::vector<std::uint8_t>({1, 0}));
}

TEST(DecodeBatch, ExtraKeysNeverOutnumberTheHashesOfAnEventThatFailedOrNamesNone) {
  // Found by a 10 M-execution fuzz_kvevent_batch run: extra_keys decoded, then a later field
  // failed (the event is dropped, but kept its untrimmed flags); also a BlockRemoved map that
  // carries extra_keys.
  decoded_batch b;
  mv failed = map({{"extra_keys", arr({arr({mv("salt")}), arr({mv("salt")}), arr({mv("salt")})})},
                   {"block_hashes", hashes({1})}, {"type", mv(5)}});  // a type that is no string
  ASSERT_TRUE(decode_batch(encode(batch(1.0, {failed})), wire_dialect::vllm, b));
  EXPECT_EQ(b.events[0].error, drop_reason::decode);
  EXPECT_LE(b.events[0].extra_nonempty.size(), b.events[0].hashes.size());
  mv removed_map = map({{"type", "BlockRemoved"}, {"extra_keys", arr({arr({mv(1)}), arr({mv(2)})})},
                        {"block_hashes", hashes({7})}});
  ASSERT_TRUE(decode_batch(encode(batch(1.0, {removed_map})), wire_dialect::vllm, b));
  EXPECT_LE(b.events[0].extra_nonempty.size(), b.events[0].hashes.size());
}

TEST(DecodeBatch, MapStoredWithoutBlockSizeIsAnError) {
  decoded_batch b;
  mv ev = map({{"type", "BlockStored"}, {"block_hashes", hashes({1})}, {"token_ids", tokens(0, 16)}});
  ASSERT_TRUE(decode_batch(encode(batch(1.0, {ev})), wire_dialect::vllm, b));
  EXPECT_EQ(b.events[0].error, drop_reason::decode);
}

TEST(DecodeBatch, HostileInputNeverCrashes) {
  // Every truncation of a realistic payload, then random byte flips and random garbage.
  std::string good = encode(batch(1.0, {stored({1, 2}, nil(), tokens(0, 32), 16, nil(),
                                               {mv("GPU"), nil(), arr({nil(), arr({mv("salt")})}), mv(0)}),
                                        removed({1}, {mv("GPU")}), cleared(),
                                        map({{"type", "BlockStored"}, {"block_hashes", hashes({3})}, {"block_size", 16},
                                             {"token_ids", tokens(0, 16)}})}));
  decoded_batch b;
  for (std::size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(decode_batch(good.substr(0, n), wire_dialect::vllm, b));
  ASSERT_TRUE(decode_batch(good, wire_dialect::vllm, b));
  std::mt19937 rng(42);
  for (int round = 0; round < 20000; ++round) {
    std::string m = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<char>(rng());
    decode_batch(m, round % 2 ? wire_dialect::vllm : wire_dialect::sglang, b);  // must not crash
    std::string junk(rng() % 64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    decode_batch(junk, wire_dialect::vllm, b);
  }
  for (std::size_t i = 0; i < b.size; ++i) EXPECT_LE(b.events[i].tokens.size(), good.size());
}

TEST(DecodeBatch, TimestampToMicros) {
  EXPECT_EQ(micros_from_seconds(1000.0), 1000000000);
  EXPECT_EQ(micros_from_seconds(0.0), 0);
  EXPECT_EQ(micros_from_seconds(-5.0), 0);
  EXPECT_EQ(micros_from_seconds(1.0000019), 1000001);
}

}  // namespace
}  // namespace ic::kvevent
