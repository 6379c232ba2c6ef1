// Writes the binary seeds of fuzz/corpus/ (record codec, journal framing, snapshots, proto
// translation, the subscriber's msgpack batches) from the real encoders, so the committed seeds are valid inputs the fuzzers
// mutate from. The text seeds (JSON, durations, flags) are written by hand.
//
//   build-fuzz/fuzz/fuzz_make_seeds fuzz/corpus
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "proto/record_codec.hpp"
#include "index/testing/combined_index.hpp"
#include "index/snapshot_codec.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "journal/format.hpp"
#include "tools/kvevent_subscriber/fake_engine.hpp"

namespace v1 = inferencecache::v1alpha1;
namespace fmt = ic::journal::format;

namespace {

std::filesystem::path root;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
  auto dir = root / target;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string be64(std::uint64_t v) { return fmt::be64(v); }

v1::CacheStateUpdate sample_update() {
  v1::CacheStateUpdate u;
  u.set_replica_id("replica-a");
  u.set_model_id("llama");
  u.set_tenant_id("team-a");
  u.set_hash_scheme("vllm");
  u.set_timestamp_us(1700000000000000);
  auto* p = u.add_prefixes();
  p->set_prefix_hash(std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  p->set_token_count(32);
  p->add_block_hashes(std::string("\x11\x12\x13\x14\x15\x16\x17\x18", 8));
  p->add_block_hashes(std::string("\x21\x22\x23\x24\x25\x26\x27\x28", 8));
  p->add_block_token_counts(16);
  p->add_block_token_counts(32);
  p->set_tier(v1::CACHE_TIER_T1);
  u.mutable_stats()->set_replica_id("replica-a");
  return u;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_seeds CORPUS_DIR\n";
    return 2;
  }
  root = argv[1];
  const auto update = sample_update().SerializeAsString();
  v1::CacheEvent event;
  event.set_type(v1::CacheEvent::PREFIX_EVICTED);
  event.set_replica_id("replica-a");
  event.set_model_id("llama");
  event.set_prefix_hash(std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  const auto event_bytes = event.SerializeAsString();
  v1::LookupRouteRequest lookup;
  lookup.set_model_id("llama");
  lookup.set_tenant_id("team-a");
  lookup.set_hash_scheme("vllm");
  lookup.add_block_hashes(std::string("\x11\x12\x13\x14\x15\x16\x17\x18", 8));
  lookup.add_block_token_counts(16);
  lookup.add_token_ids(42);
  const auto lookup_bytes = lookup.SerializeAsString();

  // fuzz_record_codec: selector byte (kind - 1), then the record bytes.
  using ic::proto::record_kind;
  const std::string policy = R"({"version":7,"policies":[{"namespace":"a"}]})";
  write("fuzz_record_codec", "update", std::string(1, '\0') +
                                           ic::proto::encode_record(record_kind::update, 17, update));
  write("fuzz_record_codec", "event", std::string(1, '\1') +
                                          ic::proto::encode_record(record_kind::event, 18, event_bytes));
  write("fuzz_record_codec", "policy", std::string(1, '\2') +
                                           ic::proto::encode_record(record_kind::policy, 19, policy));
  write("fuzz_record_codec", "sweep", std::string(1, '\3') +
                                          ic::proto::encode_record(record_kind::sweep, 20, ""));

  // fuzz_journal_format: which byte, id be64, index be64, value.
  std::string rec;
  fmt::encode_record(5, 1, update, &rec);
  write("fuzz_journal_format", "record", std::string(1, '\0') + be64(5) + be64(0) + rec);
  write("fuzz_journal_format", "key", std::string(1, '\1') + be64(0) + be64(0) + fmt::snapshot_chunk_key(3, 2));
  write("fuzz_journal_format", "header",
        std::string(1, '\2') + be64(3) + be64(0) + fmt::encode_snapshot_header(3, 99));
  std::string chunk;
  fmt::encode_snapshot_chunk(3, 2, "chunk payload", &chunk);
  write("fuzz_journal_format", "chunk", std::string(1, '\3') + be64(3) + be64(2) + chunk);
  write("fuzz_journal_format", "footer",
        std::string(1, '\4') + be64(3) + be64(0) + fmt::encode_snapshot_footer(3, {2, 26, 12345}));

  // fuzz_snapshot_load: chunk-size byte, then a snapshot of a small index.
  ic::index::combined_index idx;
  {
    auto u = sample_update();
    ic::index::cache_state_update plain;
    plain.replica_id = u.replica_id();
    plain.model_id = u.model_id();
    plain.tenant_id = u.tenant_id();
    plain.hash_scheme = u.hash_scheme();
    ic::index::prefix_entry e;
    e.prefix_hash = u.prefixes(0).prefix_hash();
    e.token_count = 32;
    e.block_hashes = {u.prefixes(0).block_hashes(0), u.prefixes(0).block_hashes(1)};
    e.block_token_counts = {16, 32};
    plain.prefixes.push_back(e);
    idx.ingest(plain, 1700000000000000);
    plain.replica_id = "replica-b";
    plain.tenant_id = "team-b";
    idx.ingest(plain, 1700000000000100);
  }
  std::string snapshot;
  ic::index::write_snapshot(idx, [&](std::string_view c) {
    snapshot.append(c);
    return true;
  });
  write("fuzz_snapshot_load", "two_replicas", std::string(1, '\x07') + snapshot);
  ic::index::combined_index empty;
  std::string empty_snapshot;
  ic::index::write_snapshot(empty, [&](std::string_view c) {
    empty_snapshot.append(c);
    return true;
  });
  write("fuzz_snapshot_load", "empty", std::string(1, '\x3f') + empty_snapshot);

  // fuzz_translate: which byte (0 lookup, 1 update, 2 event), then the message.
  write("fuzz_translate", "lookup", std::string(1, '\0') + lookup_bytes);
  write("fuzz_translate", "update", std::string(1, '\1') + update);
  write("fuzz_translate", "event", std::string(1, '\2') + event_bytes);

  // fuzz_kvevent_batch: knobs byte (bit 0 SGLang, 1 routing block 32, 2 LoRA name as
  // adapter, 3 keep extra keys), then one msgpack KVEventBatch (msgpack-cxx, fake_engine).
  {
    using namespace ic::kvevent::fake;
    write("fuzz_kvevent_batch", "vllm_positional",
          std::string(1, '\0') + encode(batch(1000.0, {stored({0xE000, 0xE001}, nil(), tokens(0, 32), 16),
                                                       removed({0xE000}), cleared()})));
    write("fuzz_kvevent_batch", "vllm_lora_extra",
          std::string(1, '\x0e') +
              encode(batch(1000.5, {stored({1, 2}, mv(7), tokens(0, 32), 16, mv(1),
                                          {mv("GPU"), mv("lora-a"), arr({nil(), arr({mv("salt")})}), mv(0)}),
                                   removed({1}, {mv("GPU"), mv(0)})})));
    write("fuzz_kvevent_batch", "sglang_metadata",
          std::string(1, '\x01') +
              encode(batch(2.0, {arr({mv("BlockStored"), hashes({1}), nil(), tokens(0, 16), mv(16), nil(),
                                      mv("GPU"), map({{"cache_salt", "s"}})})},
                           nil())));
    write("fuzz_kvevent_batch", "map_envelope",
          std::string(1, '\x02') +
              encode(map({{"ts", mv(3.0)},
                          {"events", arr({map({{"type", "BlockStored"}, {"block_hashes", hashes({3, 4})},
                                               {"block_size", 16}, {"token_ids", tokens(0, 32)},
                                               {"medium", "CPU"}}),
                                          map({{"type", "BlockRemoved"}, {"block_hashes", hashes({3})}})})},
                          {"data_parallel_rank", mv(0)}})));
  }
  return 0;
}
