#include "tools/bench/stats.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
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

double read_cpu_seconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return -1;
  std::istringstream ss(text.substr(paren + 1));
  std::string field;
  double utime = -1, stime = -1;
  for (int i = 3; i <= 15 && ss >> field; ++i) {  // field 3 is the state; 14 utime, 15 stime
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (utime < 0 || stime < 0 || hz <= 0) return -1;
  return (utime + stime) / static_cast<double>(hz);
}

}  // namespace ic::tools::bench
