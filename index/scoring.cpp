#include "index/scoring.hpp"

namespace ic::index {

float freshness(micros now, micros t, std::chrono::nanoseconds ttl) {
  const std::int64_t ttl_ns = ttl.count();
  if (ttl_ns <= 0) return 0.0f;
  std::int64_t d = 0;
  std::int64_t age = 0;
  if (__builtin_sub_overflow(now, t, &d) || __builtin_mul_overflow(d, std::int64_t{1000}, &age)) {
    return now > t ? 0.0f : 1.0f;
  }
  if (age <= 0) return 1.0f;
  if (age >= ttl_ns) return 0.0f;
  return static_cast<float>(1.0 - static_cast<double>(age) / static_cast<double>(ttl_ns));
}

double distinguishing_power(std::int64_t m, std::int64_t total) {
  if (total <= 1 || m < 0) return 1.0;
  if (m >= total) return 0.0;
  return 1.0 - static_cast<double>(m) / static_cast<double>(total);
}

}  // namespace ic::index
