// Runs prompt_text tokenizations off the caller's thread, bounded by a deadline and by a
// number of concurrent calls (spec/lookup.md §3.2 step 3: 64 slots, try-acquire).
//
//   tokenize_service svc(std::move(models));
//   svc.tokenize("qwen3", text, deadline, [](tokenize_result r) { ... });  // returns at once
//
// `done` runs exactly once: before `tokenize` returns for the outcomes decided at once
// (unknown model, text too large, no free slot, deadline already past), else on a worker
// thread with the tokens or the failure, or on the timer thread with `timeout` when the
// deadline passes first (the work then finishes in the background and is dropped; its slot
// stays taken until it does, so slow work cannot pile up past the limit). Destruction
// answers every pending call with `failed` ("shutting down") and joins the threads.
// The timer is its own small heap rather than actors/deadline_timer: this folder stays plain
// C++ with no dependency on the actor layer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tokenizer/prompt_tokenizer.hpp"

namespace ic::tokenizer {

/// How one tokenization ended; the name is the metric label.
enum class tokenize_outcome { ok, unknown_model, text_too_large, busy, failed, timeout };

/// Returns the metric label of `o` ("ok", "unknown_model", ...).
std::string_view outcome_name(tokenize_outcome o);

struct tokenize_result {
  tokenize_outcome outcome = tokenize_outcome::failed;
  std::vector<std::uint32_t> tokens;  ///< set when `ok`
  std::string error;                  ///< set when `failed`
  double seconds = 0;                 ///< from `tokenize` to the answer
};

class tokenize_service {
 public:
  using clock = std::chrono::steady_clock;
  struct options {
    /// Worker threads. Default 2.
    std::size_t workers = 2;
    /// Calls queued or running at once before `busy`. Default 64.
    std::size_t max_concurrent = 64;
    /// Texts longer than this (bytes) are `text_too_large`, not tokenized. Default 1 MiB.
    std::size_t max_text_bytes = 1u << 20;
  };

  explicit tokenize_service(model_registry models) : tokenize_service(std::move(models), options{}) {}
  tokenize_service(model_registry models, options opts);
  ~tokenize_service();
  tokenize_service(const tokenize_service&) = delete;
  tokenize_service& operator=(const tokenize_service&) = delete;

  /// Tokenizes `text` for `model_id`; see the file comment for when `done` runs.
  void tokenize(const std::string& model_id, std::string text, clock::time_point deadline,
                std::function<void(tokenize_result)> done);

  /// Returns the number of loaded models.
  std::size_t models() const { return models_.size(); }

 private:
  struct call;
  void work();
  void watch();
  void release_slot();

  model_registry models_;
  options opts_;
  std::mutex mu_;
  std::condition_variable work_cv_, timer_cv_;
  std::deque<std::shared_ptr<call>> queue_;
  struct later {
    bool operator()(const std::shared_ptr<call>& a, const std::shared_ptr<call>& b) const;
  };
  std::priority_queue<std::shared_ptr<call>, std::vector<std::shared_ptr<call>>, later> timers_;
  std::size_t in_flight_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
  std::thread timer_;
};

}  // namespace ic::tokenizer
