#include "actors/test_hooks.hpp"

namespace ic::actors {

std::chrono::milliseconds test_lookup_delay() { return std::chrono::milliseconds(0); }

}  // namespace ic::actors
