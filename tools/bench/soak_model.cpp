#include "tools/bench/soak_model.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ic::tools::bench {

bool decidable(const chain_view& before, const chain_view& after) {
  return !before.busy && !after.busy && before.version == after.version &&
         before.state != chain_state::unknown;
}

void soak_model::begin(const std::vector<std::uint64_t>& chains) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto c : chains) {
    auto& e = entries_.at(c);
    e.busy = true;
    ++e.version;
  }
}

void soak_model::end(const std::vector<std::uint64_t>& chains, bool acked, chain_state outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto c : chains) {
    auto& e = entries_.at(c);
    e.busy = false;
    e.state = acked ? outcome : chain_state::unknown;
  }
}

chain_view soak_model::read(std::uint64_t chain) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.at(chain);
}

soak_model::counts soak_model::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  counts n;
  for (const auto& e : entries_) {
    if (e.state == chain_state::held) ++n.held;
    else if (e.state == chain_state::absent) ++n.absent;
    else ++n.unknown;
  }
  return n;
}

verdict check_answer(chain_state expected, const std::string& replica, int whole_tokens,
                     const answer_view& a, std::string* why) {
  auto say = [&](const std::string& s) {
    if (why) *why = s;
  };
  if (!a.rpc_ok || expected == chain_state::unknown) return verdict::not_decidable;
  std::ostringstream got;
  got << a.reason;
  for (const auto& [id, matched] : a.replicas) got << " " << id << ":" << matched;
  if (expected == chain_state::held) {
    const bool ok = a.reason == "PREFIX_MATCH" && !a.replicas.empty() &&
                    a.replicas.front().first == replica && a.replicas.front().second == whole_tokens;
    if (ok) return verdict::agree;
    say("acknowledged as held on " + replica + " (" + std::to_string(whole_tokens) +
        " tokens), answered \"" + got.str() + "\"");
    return verdict::lost;
  }
  const bool any_match = std::any_of(a.replicas.begin(), a.replicas.end(),
                                     [](const auto& r) { return r.second > 0; });
  if (a.reason != "PREFIX_MATCH" && !any_match) return verdict::agree;
  say("acknowledged as removed, answered \"" + got.str() + "\"");
  return verdict::wrong;
}

namespace {
std::string mib(std::int64_t bytes) {
  if (bytes < 0) return "?";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

std::string table_header() {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%6s %8s %9s %5s %11s %10s %10s %7s %5s", "minute", "pid",
                "rss_MiB", "fds", "journal_MiB", "acked", "lookups", "errors", "lost");
  return buf;
}

std::string table_line(const soak_row& r) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%6d %8d %9s %5d %11s %10llu %10llu %7llu %5llu", r.minute,
                r.server_pid, mib(r.rss_bytes).c_str(), r.open_fds,
                mib(static_cast<std::int64_t>(r.journal_bytes)).c_str(),
                static_cast<unsigned long long>(r.acked), static_cast<unsigned long long>(r.lookups),
                static_cast<unsigned long long>(r.errors), static_cast<unsigned long long>(r.lost));
  return buf;
}

std::string markdown_header() {
  return "| minute | server pid | RSS MiB | open fds | journal MiB | acked updates | lookups | "
         "errors | lost |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
}

std::string markdown_line(const soak_row& r) {
  std::ostringstream s;
  s << "| " << r.minute << " | " << r.server_pid << " | " << mib(r.rss_bytes) << " | " << r.open_fds
    << " | " << mib(static_cast<std::int64_t>(r.journal_bytes)) << " | " << r.acked << " | "
    << r.lookups << " | " << r.errors << " | " << r.lost << " |";
  return s.str();
}

rss_growth rss_growth_after(const std::vector<soak_row>& rows, int warmup_minutes) {
  rss_growth g;
  const soak_row* base = nullptr;
  for (const auto& r : rows)
    if (r.minute == warmup_minutes && r.rss_bytes > 0) base = &r;
  if (base == nullptr) return g;
  for (const auto& r : rows)
    if (r.minute > warmup_minutes && r.rss_bytes > 0) {
      g.applicable = true;
      g.peak = std::max(g.peak, r.rss_bytes);
    }
  if (!g.applicable) return g;
  g.baseline = base->rss_bytes;
  g.growth = static_cast<double>(g.peak) / static_cast<double>(g.baseline) - 1.0;
  return g;
}

std::string soak_verdict(const soak_row& last, std::uint64_t wrong, const rss_growth& g,
                         double max_growth) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  if (last.errors > 0) add(std::to_string(last.errors) + " errors");
  if (last.lost > 0) add(std::to_string(last.lost) + " lost acknowledged updates");
  if (wrong > 0) add(std::to_string(wrong) + " answers disagreeing with the model");
  if (g.applicable && g.growth >= max_growth) {
    char buf[120];
    std::snprintf(buf, sizeof(buf), "RSS grew %.1f %% after warm-up (%s -> %s MiB)", g.growth * 100,
                  mib(g.baseline).c_str(), mib(g.peak).c_str());
    add(buf);
  }
  return out;
}

}  // namespace ic::tools::bench
