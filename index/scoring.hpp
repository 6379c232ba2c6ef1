// The §3.6 ranking formula in one place: freshness, pressure factor, the SLO bias, the
// score itself and the distinguishing power that scales it. The chain walk and exact match
// score `matched tokens` with the entry's freshness; TENANT_HOT scores the replica's hit rate
// with its stats recency in the freshness slot (spec/lookup.md §3.7).
//
//   const float f = freshness(now, last_seen, ttl);
//   const float s = score(static_cast<float>(matched), f, pressure_factor(p, w), slo);
#pragma once

#include <chrono>
#include <cstdint>

#include "index/types.hpp"

namespace ic::index {

/// Returns freshness(now, t, ttl) of §3.6 (float64 on nanoseconds, narrowed to float32).
float freshness(micros now, micros t, std::chrono::nanoseconds ttl);
/// Returns DP(m, total) of §3.6 (float64).
double distinguishing_power(std::int64_t m, std::int64_t total);

/// Returns clamp(1 − w·p, 0, 1), the §3.6 pressure factor of a replica's pressure `p`.
inline float pressure_factor(float p, float w) {
  float v = 1.0f - w * p;
  if (v < 0.0f) return 0.0f;
  if (v > 1.0f) return 1.0f;
  return v;
}

/// Returns the SLO bias coefficient of a lookup: `bias` when its TTFT target is tight
/// (0 < ttft_ms < tight_ms) and biasing is on, else 0.
inline float slo_coefficient(std::int32_t ttft_ms, std::int32_t tight_ms, float bias) {
  if (tight_ms > 0 && bias > 0 && ttft_ms > 0 && ttft_ms < tight_ms) return bias;
  return 0.0f;
}

/// Returns the §3.6 score base·f·pf·(1 + f·slo), evaluated left to right in float32 (the
/// order fixes the bits that equal scores compare by).
inline float score(float base, float f, float pf, float slo_coef) {
  return base * f * pf * (1.0f + f * slo_coef);
}

}  // namespace ic::index
