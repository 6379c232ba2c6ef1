#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "actors/shared.hpp"
#include "actors/test_hooks.hpp"
#include "journal/fault_env.hpp"

namespace ic::actors {

std::chrono::milliseconds test_lookup_delay() {
  static const std::chrono::milliseconds delay = [] {
    const char* v = std::getenv("IC_TEST_LOOKUP_DELAY_MS");
    return std::chrono::milliseconds(v ? std::atoll(v) : 0);
  }();
  return delay;
}

std::chrono::milliseconds test_follow_delay() {
  static const std::chrono::milliseconds delay = [] {
    const char* v = std::getenv("IC_TEST_FOLLOW_DELAY_MS");
    return std::chrono::milliseconds(v ? std::atoll(v) : 0);
  }();
  return delay;
}

std::function<std::int64_t()> test_clock() {
  const char* v = std::getenv("IC_TEST_CLOCK_OFFSET_MS");
  if (v == nullptr || *v == '\0') return {};
  const std::int64_t offset_us = std::atoll(v) * 1000;
  return [offset_us] { return system_micros() + offset_us; };
}

rocksdb::Env* test_journal_env() {
  static rocksdb::Env* env = []() -> rocksdb::Env* {
    const char* v = std::getenv("IC_TEST_JOURNAL_FAULT_FILE");
    if (v == nullptr || *v == '\0') return nullptr;
    // Never destroyed: the watcher runs until the process exits.
    auto* faults = new journal::fault_env();
    std::thread([faults, path = std::string(v)] {
      for (;;) {
        std::error_code ec;
        faults->set(std::filesystem::exists(path, ec) ? journal::fault::no_space
                                                      : journal::fault::none);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }).detach();
    return faults->env();
  }();
  return env;
}

}  // namespace ic::actors
