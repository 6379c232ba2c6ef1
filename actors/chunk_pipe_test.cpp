#include "actors/chunk_pipe.hpp"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ic::actors {
namespace {

TEST(ChunkPipe, DeliversEveryChunkInOrderThroughASmallBuffer) {
  chunk_pipe pipe(2);
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(pipe.push(std::to_string(i)));
    pipe.close();
  });
  std::vector<std::string> got;
  std::string c;
  while (pipe.pop(c)) got.push_back(c);
  producer.join();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i], std::to_string(i));
  EXPECT_TRUE(pipe.complete());
}

TEST(ChunkPipe, AbortUnblocksAFullProducer) {
  chunk_pipe pipe(1);
  ASSERT_TRUE(pipe.push("first"));
  std::thread consumer([&] { pipe.abort(); });
  // The pipe is full: this push waits until the abort, then fails.
  EXPECT_FALSE(pipe.push("second"));
  consumer.join();
  std::string c;
  EXPECT_FALSE(pipe.pop(c));
  EXPECT_FALSE(pipe.complete());
}

}  // namespace
}  // namespace ic::actors
