#include "journal/format.hpp"

#include <gtest/gtest.h>

namespace ic::journal::format {
namespace {

TEST(JournalFormat, Be64RoundTripsAndSortsNumerically) {
  for (std::uint64_t v : {0ull, 1ull, 255ull, 256ull, 0x0102030405060708ull, ~0ull}) {
    const std::string b = be64(v);
    ASSERT_EQ(b.size(), 8u);
    EXPECT_EQ(get_be64(b.data()), v);
  }
  EXPECT_EQ(hex(be64(0x0102030405060708ull)), "0102030405060708");
  EXPECT_LT(record_key(255), record_key(256));  // bytewise order == numeric order
  EXPECT_LT(record_key(1), record_key(1ull << 40));
  std::string b32;
  put_be32(&b32, 0xA1B2C3D4u);
  EXPECT_EQ(hex(b32), "a1b2c3d4");
  EXPECT_EQ(get_be32(b32.data()), 0xA1B2C3D4u);
}

TEST(JournalFormat, RecordRoundTripsWithItsLayout) {
  std::string v;
  encode_record(42, 7, "hello", &v);
  ASSERT_EQ(v.size(), record_header_size + 5);
  EXPECT_EQ(static_cast<std::uint8_t>(v[0]), value_version);
  EXPECT_EQ(get_be32(v.data() + 1), 7u);
  EXPECT_EQ(get_be64(v.data() + 5), record_checksum(42, value_version, 7, "hello"));
  EXPECT_EQ(v.substr(record_header_size), "hello");

  record_fields f;
  ASSERT_TRUE(decode_record(42, v, &f).ok());
  EXPECT_EQ(f.type, 7u);
  EXPECT_EQ(f.payload, "hello");
  EXPECT_EQ(f.version, value_version);

  std::string empty;
  encode_record(1, 0, "", &empty);
  ASSERT_TRUE(decode_record(1, empty, &f).ok());
  EXPECT_TRUE(f.payload.empty());
}

TEST(JournalFormat, RecordChecksumPinsTheConstruction) {
  // Pinned so that a change of the checksum construction cannot go unnoticed: it would make
  // every stored journal unreadable.
  EXPECT_EQ(hex(be64(checksum("", ""))), "412f1275e10017f3");
  std::string v;
  encode_record(1, 1, "abc", &v);
  EXPECT_EQ(hex(v), "0100000001" + hex(be64(record_checksum(1, 1, 1, "abc"))) + "616263");
}

TEST(JournalFormat, RecordDetectsEveryKindOfDamage) {
  std::string v;
  encode_record(9, 3, "payload", &v);
  record_fields f;

  // Under another key (sequence number): the checksum covers the seq.
  auto s = decode_record(10, v, &f);
  EXPECT_EQ(s.code(), errc::corruption);
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos);

  std::string flipped = v;
  flipped.back() ^= 0x01;
  EXPECT_EQ(decode_record(9, flipped, &f).code(), errc::corruption);

  std::string type_changed = v;
  type_changed[4] ^= 0x01;
  EXPECT_EQ(decode_record(9, type_changed, &f).code(), errc::corruption);

  EXPECT_EQ(decode_record(9, v.substr(0, 5), &f).code(), errc::corruption);
  EXPECT_EQ(decode_record(9, "", &f).code(), errc::corruption);

  std::string newer = v;
  newer[0] = static_cast<char>(value_version + 1);
  EXPECT_EQ(decode_record(9, newer, &f).code(), errc::incompatible);
}

TEST(JournalFormat, SnapshotKeysSortHeaderChunksFooter) {
  const std::string h = snapshot_header_key(5), c0 = snapshot_chunk_key(5, 0),
                    c1 = snapshot_chunk_key(5, 1), big = snapshot_chunk_key(5, 1000000),
                    f = snapshot_footer_key(5), next = snapshot_prefix(6);
  EXPECT_LT(h, c0);
  EXPECT_LT(c0, c1);
  EXPECT_LT(c1, big);
  EXPECT_LT(big, f);
  EXPECT_LT(f, next);
  EXPECT_EQ(h, snapshot_prefix(5) + std::string(1, '\0'));

  snapshot_key k;
  ASSERT_TRUE(parse_snapshot_key(big, &k));
  EXPECT_EQ(k.id, 5u);
  EXPECT_EQ(k.tag, snapshot_chunk_tag);
  EXPECT_EQ(k.chunk, 1000000u);
  ASSERT_TRUE(parse_snapshot_key(f, &k));
  EXPECT_EQ(k.tag, snapshot_footer_tag);
  EXPECT_FALSE(parse_snapshot_key("short", &k));
}

TEST(JournalFormat, SnapshotValuesRoundTrip) {
  std::uint64_t seq = 0;
  const std::string h = encode_snapshot_header(3, 12345);
  ASSERT_TRUE(decode_snapshot_header(3, h, &seq).ok());
  EXPECT_EQ(seq, 12345u);
  EXPECT_EQ(decode_snapshot_header(4, h, &seq).code(), errc::corruption);

  std::string c;
  encode_snapshot_chunk(3, 2, "chunk-bytes", &c);
  std::string_view payload;
  ASSERT_TRUE(decode_snapshot_chunk(3, 2, c, &payload).ok());
  EXPECT_EQ(payload, "chunk-bytes");
  EXPECT_EQ(decode_snapshot_chunk(3, 1, c, &payload).code(), errc::corruption);  // moved
  c[chunk_header_size] ^= 0x20;
  EXPECT_EQ(decode_snapshot_chunk(3, 2, c, &payload).code(), errc::corruption);

  snapshot_footer f{4, 1000, 0xDEADBEEF};
  const std::string fv = encode_snapshot_footer(3, f);
  snapshot_footer g;
  ASSERT_TRUE(decode_snapshot_footer(3, fv, &g).ok());
  EXPECT_EQ(g.chunk_count, 4u);
  EXPECT_EQ(g.total_bytes, 1000u);
  EXPECT_EQ(g.content_checksum, 0xDEADBEEFu);
  EXPECT_EQ(decode_snapshot_footer(3, fv.substr(1), &g).code(), errc::corruption);
}

}  // namespace
}  // namespace ic::journal::format
