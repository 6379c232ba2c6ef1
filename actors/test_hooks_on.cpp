#include <cstdlib>

#include "actors/test_hooks.hpp"

namespace ic::actors {

std::chrono::milliseconds test_lookup_delay() {
  static const std::chrono::milliseconds delay = [] {
    const char* v = std::getenv("IC_TEST_LOOKUP_DELAY_MS");
    return std::chrono::milliseconds(v ? std::atoll(v) : 0);
  }();
  return delay;
}

}  // namespace ic::actors
