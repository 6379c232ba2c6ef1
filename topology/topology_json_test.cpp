// /topology decoding, validation, normalisation and the canonical round trip (§2.2).
#include "topology/topology_json.hpp"

#include <atomic>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "topology/topology_store.hpp"

namespace ic::topology {
namespace {

std::string body_with(const std::string& topology_fields) {
  return R"({"version":1,"topologies":[{"namespace":"serving","name":"pd","hashScheme":"vllm",)" +
         topology_fields + "}]}";
}

const std::string pools =
    R"("prefillPools":[{"name":"p","acceleratorType":"h100","replicaIds":["p-2","p-0","p-1","p-0"]}],)"
    R"("decodePools":[{"name":"d","acceleratorType":"h100","replicaIdPatterns":["d-*"]}],)"
    R"("acceleratorTypes":[{"name":"h100","vendor":" NVIDIA ","model":"H100"}])";

std::string error_of(const std::string& body) {
  auto r = parse_topology_body(body);
  return r ? std::string("<accepted>") : r.error();
}

TEST(TopologyJson, AcceptsTheSpecExampleAndNormalises) {
  const std::string spec_example = R"({ "version": 1,
  "topologies": [{
    "namespace": "serving", "name": "llama3-pd", "hashScheme": "vllm",
    "models": ["meta-llama/Llama-3.1-8B-Instruct"], "transport": "NIXL",
    "prefillPools": [{ "name": "prefill-a", "acceleratorType": "h100",
                       "replicaIds": ["vllm-p-0"], "replicaIdPatterns": ["vllm-p-*"],
                       "replicas": 4, "matchLabels": {"role": "prefill"} }],
    "decodePools":  [{ "name": "decode-a", "acceleratorType": "h100", "replicaIdPatterns": ["vllm-d-*"] }],
    "acceleratorTypes": [{ "name": "h100", "vendor": "nvidia", "model": "H100",
                           "transport": "NIXL", "matchLabels": {"accelerator": "nvidia-h100"} }],
    "selection": { "statsMaxAgeMs": 60000, "maxDecodePressure": 1.0, "maxPrefillPressure": 1.0,
                   "localPrefillMaxUncachedTokens": 0, "localPrefillWhenPrefillBusy": false }
  }]})";
  auto set = parse_topology_body(spec_example);
  ASSERT_TRUE(set) << set.error();
  ASSERT_EQ(set->topologies.size(), 1u);
  EXPECT_EQ(set->topologies[0].prefill_pools[0].replicas, 4);
  EXPECT_EQ(set->topologies[0].prefill_pools[0].match_labels.at("role"), "prefill");
  EXPECT_EQ(encode_topology_set(*set),
            R"({"version":1,"topologies":[{"namespace":"serving","name":"llama3-pd","hashScheme":"vllm",)"
            R"("models":["meta-llama/Llama-3.1-8B-Instruct"],"transport":"NIXL",)"
            R"("prefillPools":[{"name":"prefill-a","acceleratorType":"h100","replicaIds":["vllm-p-0"],)"
            R"("replicaIdPatterns":["vllm-p-*"],"replicas":4,"matchLabels":{"role":"prefill"}}],)"
            R"("decodePools":[{"name":"decode-a","acceleratorType":"h100","replicaIdPatterns":["vllm-d-*"]}],)"
            R"("acceleratorTypes":[{"name":"h100","vendor":"nvidia","model":"H100","transport":"NIXL",)"
            R"("matchLabels":{"accelerator":"nvidia-h100"}}],)"
            R"("selection":{"statsMaxAgeMs":60000,"maxDecodePressure":1.0,"maxPrefillPressure":1.0,)"
            R"("localPrefillMaxUncachedTokens":0,"localPrefillWhenPrefillBusy":false}}]})");
}

TEST(TopologyJson, CanonicalEncodingIsAByteStableRoundTrip) {
  const std::string two =
      R"({"version":1,"topologies":[{"namespace":"zz","name":"b","hashScheme":"sglang",)" + pools +
      R"(,"selection":{"maxDecodePressure":0.7}},{"namespace":"serving","name":"pd","hashScheme":"vllm",)" +
      pools + "}]}";
  auto set = parse_topology_body(two);
  ASSERT_TRUE(set) << set.error();
  EXPECT_EQ(set->topologies[0].namespace_name, "serving");  // sorted by (namespace, name)
  EXPECT_EQ(set->topologies[0].prefill_pools[0].replica_ids,
            (std::vector<std::string>{"p-0", "p-1", "p-2"}));  // sorted, unique
  const std::string once = encode_topology_set(*set);
  auto again = decode_topology_set(once);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(*again, *set);
  EXPECT_EQ(encode_topology_set(*again), once);
  EXPECT_NE(once.find(R"("maxDecodePressure":0.7,)"), std::string::npos) << once;
}

// Scenario 43: unknown field / version 2 / dup ref / pool without ids or patterns /
// dangling acceleratorType / empty hashScheme → 400 each, one line naming the field.
TEST(TopologyJson, Scenario43_EachPushErrorIsOneLineNamingTheField) {
  EXPECT_EQ(error_of(body_with(pools + R"(,"colour":"red")")),
            R"(decode topology: topologies[0].colour: unknown field "colour")");
  EXPECT_EQ(error_of(R"({"version":2,"topologies":[]})"),
            "decode topology: version: unsupported topology version 2 (accepted 1)");
  EXPECT_EQ(error_of(R"({"topologies":[]})"),
            "decode topology: version: unsupported topology version 0 (accepted 1)");
  const std::string one = R"({"namespace":"serving","name":"pd","hashScheme":"vllm",)" + pools + "}";
  EXPECT_EQ(error_of(R"({"version":1,"topologies":[)" + one + "," + one + "]}"),
            R"(invalid topology: topologies[1]: duplicate ref "serving/pd")");
  EXPECT_EQ(error_of(body_with(
                R"("prefillPools":[{"name":"p"}],"decodePools":[{"name":"d","replicaIds":["d-0"]}],"transport":"NIXL")")),
            "invalid topology: topologies[0].prefillPools[0]: needs replicaIds or replicaIdPatterns");
  EXPECT_EQ(error_of(body_with(
                R"("prefillPools":[{"name":"p","acceleratorType":"a100","replicaIds":["p-0"]}],)"
                R"("decodePools":[{"name":"d","replicaIds":["d-0"]}],"transport":"NIXL")")),
            R"(invalid topology: topologies[0].prefillPools[0].acceleratorType: names no acceleratorTypes entry "a100")");
  auto empty_scheme = body_with(pools);
  empty_scheme.replace(empty_scheme.find(R"("vllm")"), 6, R"("")");
  EXPECT_EQ(error_of(empty_scheme), "invalid topology: topologies[0].hashScheme: must not be empty");
  for (const auto& bad : {body_with(pools + R"(,"colour":"red")"), std::string(R"({"version":2})")}) {
    EXPECT_EQ(error_of(bad).find('\n'), std::string::npos);
  }
}

// Scenario 31: prefill vendor nvidia, decode vendor amd, no transport → 400 naming (p, d).
TEST(TopologyJson, Scenario31_UnderivableTransportNamesThePoolPair) {
  const std::string mixed =
      R"("prefillPools":[{"name":"p","acceleratorType":"h100","replicaIds":["p-0"]}],)"
      R"("decodePools":[{"name":"d","acceleratorType":"mi300","replicaIds":["d-0"]}],)"
      R"("acceleratorTypes":[{"name":"h100","vendor":"nvidia"},{"name":"mi300","vendor":"amd"}])";
  EXPECT_EQ(error_of(body_with(mixed)),
            R"(invalid topology: topologies[0].transport: unset and not derivable for pool pair ("p", "d"))");
  EXPECT_EQ(error_of(body_with(mixed + R"(,"transport":"Mooncake")")), "<accepted>");
  // "Old store kept": a refused push never reaches the store.
  topology_store store;
  store.apply(*parse_topology_body(body_with(pools)));
  const std::string before = store.to_json();
  auto refused = parse_topology_body(body_with(mixed));
  ASSERT_FALSE(refused);
  EXPECT_EQ(store.to_json(), before);
}

TEST(TopologyJson, RefusesWhatItDoesNotUnderstand) {
  EXPECT_EQ(error_of(""), "decode topology: empty body");
  EXPECT_NE(error_of("{").find("decode topology: "), std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"topologies":[]} x)").find("decode topology: "), std::string::npos);
  EXPECT_EQ(error_of(R"({"version":1.0,"topologies":[]})"),
            "decode topology: version: expected integer, got number 1.0");
  EXPECT_EQ(error_of(R"({"version":"1"})"), R"(decode topology: version: expected integer, got string)");
  EXPECT_EQ(error_of(std::string(max_topology_body_bytes + 1, ' ')),
            "decode topology: body larger than 1048576 bytes");
  EXPECT_EQ(error_of(body_with(pools + R"(,"selection":{"statsMaxAgeMs":0})")),
            "decode topology: topologies[0].selection.statsMaxAgeMs: out of range 1..3600000");
  EXPECT_EQ(error_of(body_with(pools + R"(,"selection":{"maxPrefillPressure":0})")),
            "decode topology: topologies[0].selection.maxPrefillPressure: must be in (0, 1000000]");
  EXPECT_EQ(error_of(body_with(pools + R"(,"selection":{"localPrefillMaxUncachedTokens":-1})")),
            "decode topology: topologies[0].selection.localPrefillMaxUncachedTokens: out of range 0..2147483647");
  EXPECT_EQ(error_of(body_with(pools + R"(,"transport":"nixl")")),
            R"(invalid topology: topologies[0].transport: must be "Mooncake", "NIXL" or "Direct")");
  auto slash = body_with(pools);
  slash.replace(slash.find(R"("pd")"), 4, R"("a/b")");
  EXPECT_EQ(error_of(slash), "invalid topology: topologies[0].name: must not contain '/'");
  EXPECT_EQ(error_of(body_with(
                R"("prefillPools":[],"decodePools":[{"name":"d","replicaIds":["d-0"]}],"transport":"NIXL")")),
            "invalid topology: topologies[0].prefillPools: needs at least one pool");
  EXPECT_EQ(error_of(body_with(
                R"("prefillPools":[{"name":"p","replicaIds":["a"]},{"name":"p","replicaIds":["b"]}],)"
                R"("decodePools":[{"name":"d","replicaIds":["d-0"]}],"transport":"NIXL")")),
            R"(invalid topology: topologies[0].prefillPools[1].name: duplicate pool name "p")");
}

TEST(TopologyJson, TransportDerivesFromAcceleratorTypesThenVendors) {
  topology t;
  t.accelerator_types = {{"h100", "nvidia", "", "", {}}, {"a3", "Huawei", "", "", {}},
                         {"910b", " ascend", "", "", {}}, {"x", "amd", "", "Mooncake", {}},
                         {"y", "nvidia", "", "Mooncake", {}}};
  auto pool_of = [](std::string type) { pool p; p.accelerator_type = std::move(type); return p; };
  EXPECT_EQ(derive_transport(t, pool_of("h100"), pool_of("h100")), transport::nixl);
  EXPECT_EQ(derive_transport(t, pool_of("a3"), pool_of("910b")), transport::mooncake);
  EXPECT_EQ(derive_transport(t, pool_of("x"), pool_of("y")), transport::mooncake);  // agree
  EXPECT_EQ(derive_transport(t, pool_of("h100"), pool_of("a3")), std::nullopt);  // mixed
  EXPECT_EQ(derive_transport(t, pool_of(""), pool_of("h100")), std::nullopt);     // missing
}

TEST(TopologyStore, ReadersSeeTheOldOrTheNewSnapshotDuringPushes) {
  auto a = parse_topology_body(body_with(pools));
  auto b = parse_topology_body(R"({"version":1,"topologies":[]})");
  ASSERT_TRUE(a && b);
  const std::string a_json = encode_topology_set(*a);
  const std::string b_json = encode_topology_set(*b);
  topology_store store;
  store.apply(*a);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!done.load()) {
      auto snap = store.current();
      const bool has = snap->find("serving", "pd") != nullptr;
      if (snap->canonical() != (has ? a_json : b_json)) ++bad;
    }
  });
  for (int i = 0; i < 2000; ++i) store.apply(i % 2 == 0 ? *b : *a);
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(store.to_json(), a_json);
}

}  // namespace
}  // namespace ic::topology
