#include "tools/bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

namespace ic::tools::bench {

latency_summary summarize(std::vector<double>& samples) {
  latency_summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = samples.size();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.count);
  auto rank = [&](double q) {
    auto idx = static_cast<std::size_t>(std::ceil(q * static_cast<double>(s.count)));
    idx = std::clamp<std::size_t>(idx, 1, s.count);
    return samples[idx - 1];
  };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  s.p999 = rank(0.999);
  s.max = samples.back();
  return s;
}

std::int64_t read_rss_bytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream ss(line.substr(6));
      std::int64_t kb = -1;
      ss >> kb;
      return kb < 0 ? -1 : kb * 1024;
    }
  }
  return -1;
}

}  // namespace ic::tools::bench
