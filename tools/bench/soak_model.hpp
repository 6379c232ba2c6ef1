// The checking half of `inferencecache-bench soak` (issue #16), free of gRPC so it is unit
// tested on its own: an exact model of which chains the server must hold, the rule that
// decides whether a lookup answer agrees with it, and the per-minute table with its verdict.
//
// Model. Every chain of the soak's pool has one placement (tenant, replica) and is changed
// only by the producer thread that owns that placement, one operation at a time: a report
// (chain held), an eviction of every block (chain absent) or an ALL_CLEARED of the placement
// (all its chains absent). An operation marks its chains busy; when it ends acknowledged the
// chain takes the operation's outcome, else (refused, stream cut, server killed) it becomes
// `unknown` until its next acknowledged operation. A checker reads a chain's entry before
// and after its lookup; only when the chain was idle and unchanged in between is the answer
// decidable, and then it must agree: `held` → PREFIX_MATCH with the chain's replica first and
// every token matched (else the acknowledged update is *lost*); `absent` → no replica with a
// matched token and no PREFIX_MATCH (else the answer is *wrong*). Chains share no blocks, so
// nothing else can change a chain's answer; TTLs are far longer than the run.
//
//   soak_model m(8192);
//   m.begin({7});  /* ... the Ack ... */  m.end({7}, /*acked=*/true, chain_state::held);
//   auto before = m.read(7); /* lookup */ auto after = m.read(7);
//   if (decidable(before, after)) verdict v = check_answer(before.state, "r-1", 256, answer);
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ic::tools::bench {

/// What the server must hold for one chain.
enum class chain_state : std::uint8_t { unknown, held, absent };

/// A chain's model entry as one read saw it.
struct chain_view {
  chain_state state = chain_state::unknown;
  std::uint64_t version = 0;  ///< bumped by every begin()
  bool busy = false;          ///< an operation on it is in flight
};

/// True when a lookup between `before` and `after` must agree with `before.state`.
bool decidable(const chain_view& before, const chain_view& after);

/// The exact model of the pool's chains (thread-safe).
class soak_model {
 public:
  explicit soak_model(std::size_t chains) : entries_(chains) {}

  std::size_t size() const { return entries_.size(); }

  /// Marks `chains` busy (an operation on them starts).
  void begin(const std::vector<std::uint64_t>& chains);
  /// Ends the operation: `outcome` when acknowledged, else `unknown`; clears busy.
  void end(const std::vector<std::uint64_t>& chains, bool acked, chain_state outcome);
  /// The current entry of `chain`.
  chain_view read(std::uint64_t chain) const;
  /// How many chains are in each state (held, absent, unknown).
  struct counts {
    std::uint64_t held = 0, absent = 0, unknown = 0;
  };
  counts count() const;

 private:
  mutable std::mutex mu_;
  std::vector<chain_view> entries_;
};

/// A lookup answer reduced to what the check needs.
struct answer_view {
  bool rpc_ok = false;
  std::string reason;                                ///< reason_code
  std::vector<std::pair<std::string, int>> replicas;  ///< (replica id, matched tokens), in order
};

/// How an answer compares with the model.
enum class verdict : std::uint8_t { agree, lost, wrong, not_decidable };

/// Compares `a` (the lookup of a whole chain of `whole_tokens` tokens placed on `replica`)
/// with `expected`; `*why` (may be null) describes a disagreement. An RPC error is not a
/// verdict on the data (`not_decidable`); the caller counts it as an error.
verdict check_answer(chain_state expected, const std::string& replica, int whole_tokens,
                     const answer_view& a, std::string* why);

/// One row of the per-minute table.
struct soak_row {
  int minute = 0;
  std::int64_t rss_bytes = -1;
  int open_fds = -1;
  std::uint64_t journal_bytes = 0;
  std::uint64_t acked = 0;    ///< acknowledged operations so far
  std::uint64_t lookups = 0;  ///< checked lookups so far
  std::uint64_t errors = 0;
  std::uint64_t lost = 0;
  int server_pid = 0;
};

/// The header and one line of the table (fixed-width text).
std::string table_header();
std::string table_line(const soak_row& r);
/// The same as a Markdown table row ("| 1 | 41.2 | ... |"), and its header.
std::string markdown_header();
std::string markdown_line(const soak_row& r);

/// RSS growth after warm-up: the row of minute `warmup_minutes` is the baseline, the largest
/// RSS of any later row is compared with it. `applicable` is false when there is no such
/// pair of rows (a run shorter than warm-up + 1 minute).
struct rss_growth {
  bool applicable = false;
  std::int64_t baseline = 0, peak = 0;
  double growth = 0;  ///< peak / baseline − 1
};
rss_growth rss_growth_after(const std::vector<soak_row>& rows, int warmup_minutes);

/// The run's verdict: "" when it passed, else one line naming every failed condition
/// (errors, lost updates, wrong answers, RSS growth ≥ `max_growth`).
std::string soak_verdict(const soak_row& last, std::uint64_t wrong, const rss_growth& g,
                         double max_growth);

}  // namespace ic::tools::bench
