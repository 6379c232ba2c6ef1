#include "actors/read_gate.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace ic::actors {
namespace {

using namespace std::chrono_literals;

TEST(ReadGate, ReadersShareTheGateAndKeepTheWriterOut) {
  read_gate g;
  ASSERT_TRUE(g.try_read());
  ASSERT_TRUE(g.try_read());  // a second reader at once
  EXPECT_FALSE(g.try_write());
  g.end_read();
  g.end_read();
  ASSERT_TRUE(g.try_write());
  EXPECT_FALSE(g.try_read());  // never waits: fails while the writer is inside
  EXPECT_FALSE(g.try_write());
  g.end_write();
  EXPECT_TRUE(g.try_read());
  g.end_read();
}

TEST(ReadGate, AWaitingWriterTurnsNewReadersAwaySoReadersCannotStarveIt) {
  read_gate g;
  ASSERT_TRUE(g.try_read());  // a reader inside
  std::atomic<bool> wrote{false};
  std::thread writer([&] {
    g.write();  // waits for the reader
    wrote = true;
    g.end_write();
  });
  // Once the writer waits, a new reader is refused (writer preference), although only a
  // reader is inside.
  bool refused = false;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       !refused && std::chrono::steady_clock::now() < until;) {
    if (g.try_read()) {
      g.end_read();
      std::this_thread::sleep_for(1ms);
    } else {
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_FALSE(wrote.load());
  g.end_read();  // the last reader leaves: the writer goes in
  writer.join();
  EXPECT_TRUE(wrote.load());
  EXPECT_TRUE(g.try_read());
  g.end_read();
}

}  // namespace
}  // namespace ic::actors
