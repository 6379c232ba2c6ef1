#include "tokenizer/tokenize_service.hpp"

namespace ic::tokenizer {

std::string_view outcome_name(tokenize_outcome o) {
  switch (o) {
    case tokenize_outcome::ok: return "ok";
    case tokenize_outcome::unknown_model: return "unknown_model";
    case tokenize_outcome::text_too_large: return "text_too_large";
    case tokenize_outcome::busy: return "busy";
    case tokenize_outcome::failed: return "failed";
    case tokenize_outcome::timeout: return "timeout";
  }
  return "failed";
}

namespace {

tokenize_result outcome(tokenize_outcome o, std::vector<std::uint32_t> tokens = {}, std::string error = {}) {
  tokenize_result r;
  r.outcome = o;
  r.tokens = std::move(tokens);
  r.error = std::move(error);
  return r;
}

}  // namespace

/// One call: answered once, by whoever claims it first (worker, timer, shutdown).
struct tokenize_service::call {
  std::shared_ptr<const prompt_tokenizer> model;
  std::string text;
  clock::time_point start, deadline;
  std::mutex mu;
  std::function<void(tokenize_result)> done;

  /// Answers unless someone already did.
  void answer(tokenize_result r) {
    std::function<void(tokenize_result)> fn;
    {
      std::lock_guard<std::mutex> g(mu);
      fn.swap(done);
    }
    if (!fn) return;
    r.seconds = std::chrono::duration<double>(clock::now() - start).count();
    fn(std::move(r));
  }
  bool answered() {
    std::lock_guard<std::mutex> g(mu);
    return !done;
  }
};

bool tokenize_service::later::operator()(const std::shared_ptr<call>& a,
                                         const std::shared_ptr<call>& b) const {
  return a->deadline > b->deadline;
}

tokenize_service::tokenize_service(model_registry models, options opts)
    : models_(std::move(models)), opts_(opts) {
  for (std::size_t n = 0; n < std::max<std::size_t>(1, opts_.workers); ++n)
    workers_.emplace_back([this] { work(); });
  timer_ = std::thread([this] { watch(); });
}

tokenize_service::~tokenize_service() {
  std::deque<std::shared_ptr<call>> pending;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    pending.swap(queue_);
  }
  work_cv_.notify_all();
  timer_cv_.notify_all();
  for (auto& w : workers_) w.join();
  timer_.join();
  for (auto& c : pending) c->answer(outcome(tokenize_outcome::failed, {}, "shutting down"));
  while (!timers_.empty()) {
    timers_.top()->answer(outcome(tokenize_outcome::failed, {}, "shutting down"));
    timers_.pop();
  }
}

void tokenize_service::tokenize(const std::string& model_id, std::string text,
                                clock::time_point deadline, std::function<void(tokenize_result)> done) {
  auto c = std::make_shared<call>();
  c->start = clock::now();
  c->deadline = deadline;
  c->done = std::move(done);
  if (text.size() > opts_.max_text_bytes) return c->answer(outcome(tokenize_outcome::text_too_large));
  c->model = models_.find(model_id);
  if (!c->model) return c->answer(outcome(tokenize_outcome::unknown_model));
  if (deadline <= c->start) return c->answer(outcome(tokenize_outcome::timeout));
  c->text = std::move(text);
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) {
      c->answer(outcome(tokenize_outcome::failed, {}, "shutting down"));
      return;
    }
    if (in_flight_ >= opts_.max_concurrent) {
      // answered outside the lock below
    } else {
      ++in_flight_;
      queue_.push_back(c);
      const bool earliest = timers_.empty() || deadline < timers_.top()->deadline;
      timers_.push(c);
      work_cv_.notify_one();
      if (earliest) timer_cv_.notify_one();
      return;
    }
  }
  c->answer(outcome(tokenize_outcome::busy));
}

void tokenize_service::release_slot() {
  std::lock_guard<std::mutex> g(mu_);
  --in_flight_;
}

void tokenize_service::work() {
  for (;;) {
    std::shared_ptr<call> c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      c = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!c->answered()) {  // not timed out while queued
      auto r = c->model->tokenize(c->text);
      if (r) c->answer(outcome(tokenize_outcome::ok, std::move(*r)));
      else c->answer(outcome(tokenize_outcome::failed, {}, r.error()));
    }
    // The timer may hold the call until its deadline: keep only the small parts.
    std::string().swap(c->text);
    c->model.reset();
    release_slot();
  }
}

void tokenize_service::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (timers_.empty()) {
      timer_cv_.wait(lock);
      continue;
    }
    auto next = timers_.top();
    if (next->answered()) {  // answered by its worker: forget it
      timers_.pop();
      continue;
    }
    if (clock::now() < next->deadline) {
      timer_cv_.wait_until(lock, next->deadline);
      continue;
    }
    timers_.pop();
    lock.unlock();
    next->answer(outcome(tokenize_outcome::timeout));
    lock.lock();
  }
}

}  // namespace ic::tokenizer
