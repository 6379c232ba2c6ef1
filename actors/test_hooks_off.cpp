#include "actors/test_hooks.hpp"

namespace ic::actors {

std::chrono::milliseconds test_lookup_delay() { return std::chrono::milliseconds(0); }

std::chrono::milliseconds test_follow_delay() { return std::chrono::milliseconds(0); }

rocksdb::Env* test_journal_env() { return nullptr; }

std::function<std::int64_t()> test_clock() { return {}; }

}  // namespace ic::actors
