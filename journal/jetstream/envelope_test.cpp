// Envelope codec: round trips, the pinned byte layout, and every kind of damage refused.
#include "journal/jetstream/envelope.hpp"

#include <gtest/gtest.h>

#include "journal/format.hpp"

namespace ic::journal::jetstream {
namespace {

std::string encode(const batch_id& id, const std::vector<record_in>& r) {
  std::string out;
  encode_envelope(id, r.data(), r.size(), &out);
  return out;
}

TEST(Envelope, RoundTripsRecordsInOrder) {
  const batch_id id{"r1", 1764620000000000ULL, 7};
  const std::string big(70000, 'x');
  const std::string body = encode(id, {{1, "a"}, {42, ""}, {7, big}});
  EXPECT_EQ(body.size(), envelope_size(2, 3, 1 + 0 + big.size()));
  envelope_view v;
  ASSERT_TRUE(decode_envelope(body, &v).ok());
  EXPECT_EQ(v.version, envelope_version);
  EXPECT_EQ(v.id.origin, "r1");
  EXPECT_EQ(v.id.epoch, id.epoch);
  EXPECT_EQ(v.id.counter, 7u);
  ASSERT_EQ(v.records.size(), 3u);
  EXPECT_EQ(v.records[0].type, 1u);
  EXPECT_EQ(v.records[0].payload, "a");
  EXPECT_EQ(v.records[1].type, 42u);
  EXPECT_TRUE(v.records[1].payload.empty());
  EXPECT_EQ(v.records[2].payload, big);
  EXPECT_EQ(msg_id(id), "r1.1764620000000000.7");
}

TEST(Envelope, LayoutIsPinned) {
  const std::string body = encode({"ab", 1, 2}, {{3, "xy"}});
  std::string want("ICJE\x01\x02" "ab", 8);
  want += format::be64(1) + format::be64(2);
  format::put_be32(&want, 1);
  format::put_be32(&want, 3);
  format::put_be32(&want, 2);
  want += "xy";
  format::put_be64(&want, format::checksum("ICJE", want));
  EXPECT_EQ(format::hex(body), format::hex(want));
}

// Bytes committed once (2026-12-01) from this build: every later build must write and read
// exactly these; a change to the layout needs envelope version 2, not an edit here.
TEST(Envelope, MatchesTheCommittedFixture) {
  const std::string fixture =
      "49434a4501027231000644e99c437800000000000000002a000000020000000700000003616263000003e8"
      "0000000065e8e61f5f3327bf";
  const std::vector<record_in> recs = {{7, "abc"}, {1000, ""}};
  EXPECT_EQ(format::hex(encode({"r1", 1764620000000000ULL, 42}, recs)), fixture);
  std::string bytes;
  for (std::size_t i = 0; i < fixture.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(fixture.substr(i, 2), nullptr, 16)));
  }
  envelope_view v;
  ASSERT_TRUE(decode_envelope(bytes, &v).ok());
  EXPECT_EQ(msg_id(v.id), "r1.1764620000000000.42");
  ASSERT_EQ(v.records.size(), 2u);
  EXPECT_EQ(v.records[0].payload, "abc");
  EXPECT_EQ(v.records[1].type, 1000u);
}

TEST(Envelope, RefusesDamage) {
  const std::string good = encode({"r1", 5, 9}, {{1, "hello"}, {2, "world"}});
  envelope_view v;
  EXPECT_EQ(decode_envelope("", &v).code(), errc::corruption);
  EXPECT_EQ(decode_envelope(good.substr(0, good.size() - 1), &v).code(), errc::corruption);
  std::string flipped = good;
  flipped[30] ^= 1;
  EXPECT_EQ(decode_envelope(flipped, &v).code(), errc::corruption);
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_EQ(decode_envelope(magic, &v).code(), errc::corruption);
  EXPECT_EQ(decode_envelope("some foreign publisher's text payload", &v).code(),
            errc::corruption);
}

TEST(Envelope, RefusesNewerVersionAsIncompatible) {
  std::string body = encode({"r1", 5, 9}, {{1, "x"}});
  body[4] = 2;
  body.resize(body.size() - 8);
  format::put_be64(&body, format::checksum("ICJE", body));
  envelope_view v;
  const status s = decode_envelope(body, &v);
  EXPECT_EQ(s.code(), errc::incompatible) << s.to_string();
}

TEST(Envelope, ValidatesOrigin) {
  EXPECT_TRUE(validate_origin("pod-7_a").ok());
  EXPECT_EQ(validate_origin("").code(), errc::invalid_argument);
  EXPECT_EQ(validate_origin("a.b").code(), errc::invalid_argument);  // would split the Msg-Id
  EXPECT_EQ(validate_origin(std::string(256, 'a')).code(), errc::invalid_argument);
}

}  // namespace
}  // namespace ic::journal::jetstream
