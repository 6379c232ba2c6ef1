// The LookupRoute message pool: holders are reused with cleared messages, and a call that
// held more than max_kept_bytes gets new ones.
#include "grpc_gateway/lookup_messages.hpp"

#include <string>

#include <gtest/gtest.h>

namespace ic::grpc_gateway {
namespace {

namespace v1 = inferencecache::v1alpha1;

void fill_chain_call(v1::LookupRouteRequest* q, v1::LookupRouteResponse* r) {
  q->set_tenant_id("t");
  q->set_model_id("m");
  q->set_hash_scheme("xxh3_64_v1");
  for (int i = 0; i < 64; ++i) {
    q->add_block_hashes(std::string(8, static_cast<char>('a' + i % 26)));
    q->add_block_token_counts(16);
  }
  for (int i = 0; i < 8; ++i) {
    auto* s = r->add_replica_scores();
    s->set_replica_id("replica-" + std::to_string(i));
    s->set_score(0.5F);
  }
  r->set_reason_code("PREFIX_MATCH");
  r->set_lookup_latency_us(7);
}

TEST(LookupMessagePool, AReleasedHolderComesBackWithEmptyMessages) {
  lookup_message_pool pool;
  auto* h = pool.AllocateMessages();
  fill_chain_call(h->request(), h->response());
  h->Release();
  auto* again = pool.AllocateMessages();
  EXPECT_EQ(again, h);
  EXPECT_EQ(pool.created(), 1u);
  EXPECT_EQ(again->request()->ByteSizeLong(), 0u);
  EXPECT_EQ(again->response()->ByteSizeLong(), 0u);
  EXPECT_EQ(again->request()->block_hashes_size(), 0);
  EXPECT_EQ(again->response()->replica_scores_size(), 0);
  // Parsing into the reused request gives exactly the wire message.
  v1::LookupRouteRequest wire;
  wire.set_tenant_id("u");
  wire.add_block_hashes("12345678");
  wire.add_block_token_counts(16);
  ASSERT_TRUE(again->request()->ParseFromString(wire.SerializeAsString()));
  EXPECT_EQ(again->request()->SerializeAsString(), wire.SerializeAsString());
  again->Release();
}

TEST(LookupMessagePool, TwoCallsInFlightGetTwoHolders) {
  lookup_message_pool pool;
  auto* a = pool.AllocateMessages();
  auto* b = pool.AllocateMessages();
  EXPECT_NE(a, b);
  EXPECT_NE(a->request(), b->request());
  EXPECT_EQ(pool.created(), 2u);
  a->Release();
  b->Release();
}

TEST(LookupMessagePool, ALargeCallsMessagesAreReplacedNotKept) {
  lookup_message_pool pool;
  auto* h = pool.AllocateMessages();
  h->request()->set_prompt_text(std::string(lookup_message_pool::max_kept_bytes * 4, 'x'));
  for (int i = 0; i < 100000; ++i) h->response()->add_token_ids(static_cast<std::uint32_t>(i));
  h->Release();
  auto* again = pool.AllocateMessages();
  EXPECT_EQ(again, h);  // the holder is kept, its messages are new
  EXPECT_LT(again->request()->prompt_text().capacity(), lookup_message_pool::max_kept_bytes);
  EXPECT_LT(again->response()->token_ids().Capacity(), 1000);
  EXPECT_EQ(again->request()->ByteSizeLong(), 0u);
  EXPECT_EQ(again->response()->ByteSizeLong(), 0u);
  again->Release();
}

TEST(LookupMessagePool, ALongChainIsReplacedAndAUsualOneKeepsItsMemory) {
  lookup_message_pool pool;
  // A 64-block chain is kept: the cleared request still holds its 64 hash strings.
  auto* h = pool.AllocateMessages();
  fill_chain_call(h->request(), h->response());
  const auto* kept = h->request();
  h->Release();
  auto* again = pool.AllocateMessages();
  EXPECT_EQ(again->request(), kept);
  EXPECT_GE(again->request()->block_hashes().Capacity(), 64);
  // A chain of 4 096 blocks (no long string anywhere) is over the bound: new messages.
  for (int i = 0; i < 4096; ++i) {
    again->request()->add_block_hashes("12345678");
    again->request()->add_block_token_counts(16);
  }
  again->Release();
  auto* third = pool.AllocateMessages();
  EXPECT_EQ(third, again);
  EXPECT_LT(third->request()->block_hashes().Capacity(), 4096);
  EXPECT_EQ(third->request()->ByteSizeLong(), 0u);
  third->Release();
}

TEST(LookupMessagePool, AtMostMaxIdleHoldersAreKept) {
  lookup_message_pool pool(1);
  auto* a = pool.AllocateMessages();
  auto* b = pool.AllocateMessages();
  a->Release();
  b->Release();  // freed: one idle holder already kept
  auto* c = pool.AllocateMessages();
  EXPECT_EQ(c, a);
  auto* d = pool.AllocateMessages();
  EXPECT_EQ(pool.created(), 3u);
  c->Release();
  d->Release();
}

}  // namespace
}  // namespace ic::grpc_gateway
