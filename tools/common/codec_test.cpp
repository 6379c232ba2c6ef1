// Codecs the tools parse user input with: hashes, lists, addresses, durations.
#include "tools/common/codec.hpp"

#include <gtest/gtest.h>

namespace ic::tools {
namespace {

TEST(Codec, HexRoundTripsAndAcceptsThePrefix) {
  std::string err;
  auto b = from_hex("0x00ff10", &err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(*b, std::string("\x00\xff\x10", 3));
  EXPECT_EQ(to_hex(*b), "00ff10");
  EXPECT_FALSE(from_hex("abc", &err));
  EXPECT_FALSE(from_hex("zz", &err));
}

TEST(Codec, Base64RoundTripsWithAndWithoutPadding) {
  std::string err;
  for (std::string s : {std::string("a"), std::string("ab"), std::string("abc"),
                        std::string("\x00\x01\x02\x03\x04\x05\x06\x07", 8)}) {
    auto back = from_base64(to_base64(s), &err);
    ASSERT_TRUE(back) << err;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(to_base64("abc"), "YWJj");
  EXPECT_EQ(*from_base64("YQ", &err), "a");
  EXPECT_FALSE(from_base64("!!!!", &err));
}

TEST(Codec, DecodeHashPrefersHexAndHonoursTheBase64Prefix) {
  std::string err;
  EXPECT_EQ(*decode_hash("0000000000000001", &err), be64(1));
  EXPECT_EQ(*decode_hash("b64:AAAAAAAAAAE=", &err), be64(1));
  EXPECT_EQ(*decode_hash("AAAAAAAAAAE=", &err), be64(1));  // not hex: falls back to base64
  EXPECT_FALSE(decode_hash("not a hash!", &err));
  EXPECT_FALSE(err.empty());
}

TEST(Codec, ListsAndTokens) {
  EXPECT_EQ(split_list(" a, b,,c "), (std::vector<std::string>{"a", "b", "c"}));
  std::string err;
  auto toks = parse_u32_list("1,2, 4294967295", &err);
  ASSERT_TRUE(toks) << err;
  EXPECT_EQ(toks->back(), 4294967295u);
  EXPECT_FALSE(parse_u32_list("1,-2", &err));
  EXPECT_FALSE(parse_u32_list("4294967296", &err));
}

TEST(Codec, HostPortAndLoopback) {
  std::string err;
  auto hp = parse_host_port("127.0.0.1:9090", &err);
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 9090);
  auto v6 = parse_host_port("[::1]:80", &err);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_FALSE(parse_host_port("localhost", &err));
  EXPECT_FALSE(parse_host_port("h:99999", &err));
  EXPECT_TRUE(is_loopback_host("127.0.0.2"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
}

TEST(Codec, Durations) {
  std::string err;
  EXPECT_DOUBLE_EQ(*parse_seconds("500ms", &err), 0.5);
  EXPECT_DOUBLE_EQ(*parse_seconds("2", &err), 2.0);
  EXPECT_DOUBLE_EQ(*parse_seconds("1.5s", &err), 1.5);
  EXPECT_DOUBLE_EQ(*parse_seconds("3m", &err), 180.0);
  EXPECT_FALSE(parse_seconds("soon", &err));
  EXPECT_FALSE(parse_seconds("-1s", &err));
}

}  // namespace
}  // namespace ic::tools
