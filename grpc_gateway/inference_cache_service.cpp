#include "grpc_gateway/inference_cache_service.hpp"

#include <algorithm>
#include <atomic>
#include <limits>

#include "grpc_gateway/deadline.hpp"
#include "grpc_gateway/stream_channel.hpp"
#include "index/route_lookup.hpp"
#include "index/types.hpp"
#include "proto/translate.hpp"

namespace ic::grpc_gateway {

namespace v1 = inferencecache::v1alpha1;
using steady = std::chrono::steady_clock;

namespace {

const grpc::Status kRecovering(grpc::StatusCode::UNAVAILABLE, "index is recovering; retry shortly");

std::int64_t micros_since(steady::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - start).count();
}

bool is_reserved(const std::string& tenant) { return tenant == index::reserved_tenant; }

/// Fills a TIMEOUT answer: no scores, no adapter echo, the prompt's tokens when there are
/// some (spec/lookup.md H5/H9; a tokenization abandoned at the deadline has none).
void set_timeout(v1::LookupRouteResponse* resp, const std::vector<std::uint32_t>* echo) {
  resp->set_reason_code(std::string(index::reason::timeout));
  if (echo) resp->mutable_token_ids()->Add(echo->begin(), echo->end());
}

}  // namespace

/// The live server streams: closed together at shutdown; metrics streams get ticks.
class stream_registry {
 public:
  struct metrics_stream {
    std::weak_ptr<stream_channel<v1::Metric>> channel;
    std::vector<std::string> names;
  };

  /// Registers a stream; false (not registered) once `close_all` ran.
  bool add(std::weak_ptr<closable> c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    prune();
    all_.push_back(std::move(c));
    return true;
  }
  void add_metrics(metrics_stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.push_back(std::move(s));
  }
  std::vector<metrics_stream> metrics() {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.erase(std::remove_if(metrics_.begin(), metrics_.end(),
                                  [](const metrics_stream& s) { return s.channel.expired(); }),
                   metrics_.end());
    return metrics_;
  }
  void close_all(const grpc::Status& st) {
    std::vector<std::shared_ptr<closable>> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      for (auto& w : all_)
        if (auto c = w.lock()) live.push_back(std::move(c));
      all_.clear();
    }
    for (auto& c : live) c->close(st);
  }
 private:
  void prune() {
    all_.erase(std::remove_if(all_.begin(), all_.end(),
                              [](const std::weak_ptr<closable>& w) { return w.expired(); }),
               all_.end());
  }
  std::mutex mu_;
  std::vector<std::weak_ptr<closable>> all_;
  std::vector<metrics_stream> metrics_;
  bool closed_ = false;
};

namespace {

const grpc::Status kShuttingDown(grpc::StatusCode::UNAVAILABLE, "server shutting down");

/// Creates a server stream's channel and reactor. During shutdown the stream is ended at once
/// and no channel is returned; otherwise it is registered so that `close_streams` ends it.
template <class T>
std::pair<std::shared_ptr<stream_channel<T>>, channel_reactor<T>*> open_stream(
    stream_registry& registry, std::size_t buffer, owed_calls* owed) {
  auto channel = std::make_shared<stream_channel<T>>(buffer);
  auto* reactor = new channel_reactor<T>(channel, owed);
  if (!registry.add(channel)) {  // checked and registered under one lock
    channel->close(kShuttingDown);
    return {nullptr, reactor};
  }
  return {channel, reactor};
}

/// Sends every index change that passes the filter down one StreamCacheEvents stream.
class events_subscriber final : public actors::event_subscriber {
 public:
  events_subscriber(actors::event_filter filter, std::shared_ptr<stream_channel<v1::CacheEvent>> ch)
      : event_subscriber(std::move(filter)), channel_(std::move(ch)) {}
  bool offer(const index::cache_change& change) override {
    v1::CacheEvent e;
    proto::to_proto(change, &e);
    return channel_->push(std::move(e));
  }
  bool alive() const override { return !channel_->ended(); }
  bool overflowed() const override { return channel_->overflowed(); }
  /// A reload replaced the index: ABORTED (resubscribe, then re-read GetCacheState).
  void end(const std::string& why) override {
    channel_->close(grpc::Status(grpc::StatusCode::ABORTED, why));
  }

 private:
  std::shared_ptr<stream_channel<v1::CacheEvent>> channel_;
};

/// Returns true when `s` is selected by `names` (empty = every inferencecache_* series).
bool metric_selected(const metric_sample& s, const std::vector<std::string>& names) {
  if (names.empty()) return s.name.rfind("inferencecache_", 0) == 0;
  for (const auto& n : names)
    if (n == s.name || n == s.family) return true;
  return false;
}

void push_metrics(stream_channel<v1::Metric>& ch, const std::vector<metric_sample>& samples,
                  const std::vector<std::string>& names, std::int64_t now_us) {
  for (const auto& s : samples) {
    if (!metric_selected(s, names)) continue;
    v1::Metric m;
    m.set_name(s.name);
    m.set_type(s.type);
    for (const auto& [k, v] : s.labels) (*m.mutable_labels())[k] = v;
    m.set_value(s.value);
    m.set_timestamp_us(now_us);
    if (!ch.push(std::move(m))) return;
  }
}

std::int64_t unix_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// What a reactor shares with the runtime's callbacks (which may outlive it): the reactor
/// while it lives, and whether it was finished. Whoever claims it first (an Ack, a cancel)
/// finishes it; after OnDone nobody can.
template <class Reactor>
struct reactor_link {
  explicit reactor_link(Reactor* r) : reactor(r) {}
  /// Holding `mu`: marks the reactor finished and returns it, or nullptr when it already
  /// was finished or is gone.
  Reactor* claim() {
    if (finished || reactor == nullptr) return nullptr;
    finished = true;
    return reactor;
  }
  /// OnDone: the reactor is gone.
  void unlink() {
    std::lock_guard<std::mutex> lock(mu);
    reactor = nullptr;
  }
  std::mutex mu;
  Reactor* reactor;
  bool finished = false;
};

/// One ReportCacheState stream: reads messages, journals each, and sends the Ack once every
/// message is journaled and applied (spec/extensions.md §3–§4).
class report_reactor final : public grpc::ServerReadReactor<v1::CacheStateUpdate> {
 public:
  /// Starts reading; with no runtime yet (recovering) answers UNAVAILABLE at once.
  report_reactor(grpc::CallbackServerContext* ctx, v1::Ack* ack, actors::runtime* runtime,
                 gateway_probe* probe, std::size_t max_inflight, owed_calls* owed)
      : ctx_(ctx), ack_(ack), runtime_(runtime), probe_(probe), max_inflight_(max_inflight),
        owed_(owed), sink_(std::make_shared<sink>(this)) {
    owed_->open();
    if (runtime_ == nullptr) {
      sink_->finished = true;
      Finish(kRecovering);
      return;
    }
    StartRead(&msg_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::unique_lock<std::mutex> lock(sink_->mu);
      sink_->half_closed = true;
      sink_->cancelled = ctx_->IsCancelled();
      sink_->maybe_finish(lock);
      return;
    }
    const bool reserved = is_reserved(msg_.tenant_id());
    std::size_t slot;
    bool refused = false;
    {
      std::lock_guard<std::mutex> lock(sink_->mu);
      slot = sink_->next_slot++;
      // Once the journal refused one message, the rest of the stream is refused too, so the
      // stream never ends with a gap (an applied message after a refused one).
      refused = !sink_->refused_reason.empty();
      if (!refused && reserved) {
        // Never journaled: the index would skip it anyway (spec/lookup.md §2.8).
        sink_->note_drop(slot, std::string(index::drop_reason::reserved_tenant));
      } else if (!refused) {
        ++sink_->outstanding;
      }
    }
    if (refused) {
      // The Ack already says accepted:false with the first refusal.
    } else if (reserved) {
      if (probe_) probe_->on_dropped(std::string(index::drop_reason::reserved_tenant), 1);
    } else {
      runtime_->append(actors::record_kind::update, msg_.SerializeAsString(), sink_, slot);
    }
    std::unique_lock<std::mutex> lock(sink_->mu);
    if (sink_->outstanding >= max_inflight_) {
      sink_->paused = true;
      return;
    }
    lock.unlock();
    StartRead(&msg_);
  }

  /// A cancelled stream is finished at once: the Ack is not owed any more, and an append
  /// that never completes must not keep the RPC (and server shutdown) waiting.
  void OnCancel() override {
    std::unique_lock<std::mutex> lock(sink_->mu);
    if (sink_->claim() == nullptr) return;
    lock.unlock();
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled"));
  }

  void OnDone() override {
    sink_->unlink();
    owed_->close();
    delete this;
  }

 private:
  struct sink final : actors::append_sink, reactor_link<report_reactor> {
    explicit sink(report_reactor* r) : reactor_link(r) {}

    void on_applied(std::size_t slot, const actors::append_result& r) override {
      std::unique_lock<std::mutex> lock(mu);
      --outstanding;
      if (!r.accepted && slot < refused_slot) {
        refused_slot = slot;
        refused_reason = r.reason_code;
      } else if (r.accepted && !r.reason_code.empty()) {
        note_drop(slot, r.reason_code);
      }
      if (paused && reactor && !finished && outstanding < reactor->max_inflight_ && !half_closed) {
        paused = false;
        auto* rr = reactor;
        lock.unlock();
        rr->StartRead(&rr->msg_);
        return;
      }
      maybe_finish(lock);
    }

    /// Keeps the drop reason of the earliest message (extensions.md §4). Holds `mu`.
    void note_drop(std::size_t slot, std::string reason) {
      if (slot < drop_slot) {
        drop_slot = slot;
        drop_reason = std::move(reason);
      }
    }

    void maybe_finish(std::unique_lock<std::mutex>& lock) {
      if (!half_closed || outstanding != 0) return;
      auto* rr = claim();
      if (rr == nullptr) return;
      if (cancelled) {
        lock.unlock();
        rr->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled by the client"));
        return;
      }
      if (!refused_reason.empty()) {
        rr->ack_->set_accepted(false);
        rr->ack_->set_reason_code(refused_reason);
      } else {
        rr->ack_->set_accepted(true);
        rr->ack_->set_reason_code(drop_reason);
      }
      lock.unlock();
      rr->Finish(grpc::Status::OK);
    }

    std::size_t next_slot = 0;
    std::size_t outstanding = 0;
    bool half_closed = false;
    bool cancelled = false;
    bool paused = false;
    std::size_t drop_slot = std::numeric_limits<std::size_t>::max();
    std::string drop_reason;
    std::size_t refused_slot = std::numeric_limits<std::size_t>::max();
    std::string refused_reason;
  };

  grpc::CallbackServerContext* ctx_;
  v1::Ack* ack_;
  actors::runtime* runtime_;
  gateway_probe* probe_;
  std::size_t max_inflight_;
  owed_calls* owed_;
  v1::CacheStateUpdate msg_;
  std::shared_ptr<sink> sink_;
};

/// The reactor of one PublishEvent: finished by the Ack of its record, or at once when the
/// client cancels (so an append that never completes cannot hold the RPC).
class publish_reactor final : public grpc::ServerUnaryReactor {
 public:
  publish_reactor(v1::Ack* ack, owed_calls* owed)
      : owed_(owed), state_(std::make_shared<shared>(this, ack)) {
    owed_->open();
  }

  /// The sink to hand to the runtime.
  std::shared_ptr<actors::append_sink> sink() { return state_; }

  /// Answers at once (reserved tenant, recovering) with `ack` or a status.
  void finish_now(const grpc::Status& st, bool accepted = true, const std::string& reason = "") {
    state_->complete(st, accepted, reason);
  }

  void OnCancel() override {
    state_->complete(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"), false, "");
  }

  void OnDone() override {
    state_->unlink();
    owed_->close();
    delete this;
  }

 private:
  struct shared final : actors::append_sink, reactor_link<publish_reactor> {
    shared(publish_reactor* r, v1::Ack* a) : reactor_link(r), ack(a) {}
    void on_applied(std::size_t, const actors::append_result& r) override {
      complete(grpc::Status::OK, r.accepted, r.reason_code);
    }
    /// Finishes exactly once.
    void complete(const grpc::Status& st, bool accepted, const std::string& reason) {
      std::unique_lock<std::mutex> lock(mu);
      auto* r = claim();
      if (r == nullptr) return;
      if (st.ok()) {
        ack->set_accepted(accepted);
        ack->set_reason_code(reason);
      }
      lock.unlock();
      r->Finish(st);
    }
    v1::Ack* ack;
  };
  owed_calls* owed_;
  std::shared_ptr<shared> state_;
};

}  // namespace

inference_cache_service::inference_cache_service(
    gateway_probe* probe, std::function<std::vector<metric_sample>()> metrics_source,
    service_options options)
    : probe_(probe),
      metrics_source_(std::move(metrics_source)),
      options_(options),
      streams_(std::make_shared<stream_registry>()) {
  SetMessageAllocatorFor_LookupRoute(&lookup_messages_);
  ticker_ = std::thread([this] { metrics_ticker(); });
}

inference_cache_service::~inference_cache_service() { close_streams(); }

void inference_cache_service::close_streams() {
  {
    std::lock_guard<std::mutex> lock(ticker_mu_);
    ticker_stop_ = true;
  }
  ticker_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  streams_->close_all(kShuttingDown);
}

void inference_cache_service::metrics_ticker() {
  std::unique_lock<std::mutex> lock(ticker_mu_);
  while (!ticker_stop_) {
    ticker_cv_.wait_for(lock, options_.metrics_interval, [this] { return ticker_stop_; });
    if (ticker_stop_) break;
    auto subs = streams_->metrics();
    if (subs.empty() || !metrics_source_) continue;
    lock.unlock();
    auto samples = metrics_source_();
    auto now = unix_micros();
    for (auto& s : subs)
      if (auto ch = s.channel.lock()) push_metrics(*ch, samples, s.names, now);
    lock.lock();
  }
}

// RenderTemplate and LookupPDRoute: pd_handlers.cpp.

grpc::ServerUnaryReactor* inference_cache_service::LookupRoute(grpc::CallbackServerContext* ctx,
                                                               const v1::LookupRouteRequest* req,
                                                               v1::LookupRouteResponse* resp) {
  const auto start = steady::now();
  auto* reactor = open_unary(ctx);
  // H0: the reserved probe tenant short-circuits (latency 0, no adapter echo).
  if (is_reserved(req->tenant_id())) {
    resp->set_reason_code(std::string(index::reason::no_hint));
    if (probe_) probe_->on_lookup(req->model_id(), resp->reason_code(), false, 0.0);
    answer(reactor, grpc::Status::OK);
    return reactor;
  }
  actors::runtime* rt = runtime_or_recovering(reactor);
  if (rt == nullptr) return reactor;
  // H1: deadline = min(client deadline, now + the tenant's lookupTimeoutMs).
  const auto policy = rt->policy_of(req->tenant_id());
  const auto deadline = lookup_deadline(ctx, start, policy);
  auto request = proto::from_proto(*req);
  if (!index::needs_prompt_tokens(request, policy) || options_.tokenizer == nullptr) {
    ask_lookup(rt, std::move(request), deadline.value_or(start + options_.max_lookup_wait), reactor,
               resp, start);
    return reactor;
  }
  // H2/H5: tokenize on the service's threads under the deadline (5 s when there is none);
  // this thread returns at once. Without tokens the index fails the lookup open.
  const auto effective = deadline.value_or(start + options_.default_tokenize_bound);
  std::string text = request.prompt_text;
  const std::string model = request.model_id;
  options_.tokenizer->tokenize(
      model, std::move(text), effective,
      [this, rt, request = std::move(request), effective, reactor, resp,
       start](tokenizer::tokenize_result r) mutable {
        if (probe_) probe_->on_tokenize(tokenizer::outcome_name(r.outcome), r.seconds);
        if (r.outcome == tokenizer::tokenize_outcome::timeout) {  // abandoned: no echo
          set_timeout(resp, nullptr);
          finish_lookup(reactor, resp, request.model_id, start);
          return;
        }
        if (r.outcome == tokenizer::tokenize_outcome::ok) request.prompt_tokens = std::move(r.tokens);
        if (steady::now() >= effective) {  // H5: expired meanwhile, echo what was produced
          set_timeout(resp, request.prompt_tokens ? &*request.prompt_tokens : nullptr);
          finish_lookup(reactor, resp, request.model_id, start);
          return;
        }
        ask_lookup(rt, std::move(request), effective, reactor, resp, start);
      });
  return reactor;
}

void inference_cache_service::ask_lookup(actors::runtime* rt, index::lookup_route_request request,
                                         steady::time_point deadline,
                                         grpc::ServerUnaryReactor* reactor,
                                         v1::LookupRouteResponse* resp, steady::time_point start) {
  std::string model = request.model_id;
  // A TIMEOUT by the runtime's deadline timer echoes the prompt's tokens (H9).
  std::optional<std::vector<std::uint32_t>> echo = request.prompt_tokens;
  rt->lookup(std::move(request), deadline,
             [this, reactor, resp, start, model = std::move(model), echo = std::move(echo)](
                 std::optional<index::lookup_route_response> r) {
               if (r) proto::to_proto(*r, resp);
               else set_timeout(resp, echo ? &*echo : nullptr);
               finish_lookup(reactor, resp, model, start);
             });
}

void inference_cache_service::finish_lookup(grpc::ServerUnaryReactor* reactor,
                                            v1::LookupRouteResponse* resp, const std::string& model,
                                            steady::time_point start) {
  const auto us = micros_since(start);
  resp->set_lookup_latency_us(us);
  if (probe_)
    probe_->on_lookup(model, resp->reason_code(), resp->replica_scores_size() > 0,
                      static_cast<double>(us) / 1e6);
  answer(reactor, grpc::Status::OK);
}

grpc::ServerUnaryReactor* inference_cache_service::open_unary(grpc::CallbackServerContext* ctx) {
  owed_.open();
  return ctx->DefaultReactor();
}

actors::runtime* inference_cache_service::runtime_or_recovering(grpc::ServerUnaryReactor* reactor) {
  actors::runtime* rt = runtime_.load();
  if (rt == nullptr) answer(reactor, kRecovering);
  return rt;
}

void inference_cache_service::answer(grpc::ServerUnaryReactor* reactor, const grpc::Status& status) {
  reactor->Finish(status);
  owed_.close();
}

grpc::ServerUnaryReactor* inference_cache_service::GetCacheState(
    grpc::CallbackServerContext* ctx, const v1::GetCacheStateRequest* req,
    v1::GetCacheStateResponse* resp) {
  auto* reactor = open_unary(ctx);
  if (is_reserved(req->tenant_id())) {
    proto::to_proto(index::cache_state_view{}, resp);
    answer(reactor, grpc::Status::OK);
    return reactor;
  }
  actors::runtime* rt = runtime_or_recovering(reactor);
  if (rt == nullptr) return reactor;
  auto deadline = client_deadline(ctx).value_or(steady::now() + options_.state_timeout);
  rt->cache_state(req->tenant_id(), req->model_id(), deadline,
                       [this, reactor, resp](std::optional<index::cache_state_view> v) {
                         if (!v) {
                           answer(reactor, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                                        "the index did not answer in time"));
                           return;
                         }
                         proto::to_proto(*v, resp);
                         answer(reactor, grpc::Status::OK);
                       });
  return reactor;
}

grpc::ServerReadReactor<v1::CacheStateUpdate>* inference_cache_service::ReportCacheState(
    grpc::CallbackServerContext* ctx, v1::Ack* ack) {
  return new report_reactor(ctx, ack, runtime_.load(), probe_, options_.max_inflight_per_stream,
                            &owed_);
}

grpc::ServerUnaryReactor* inference_cache_service::PublishEvent(grpc::CallbackServerContext*,
                                                                const v1::CacheEvent* event,
                                                                v1::Ack* ack) {
  auto* reactor = new publish_reactor(ack, &owed_);
  if (is_reserved(event->tenant_id())) {
    if (probe_) probe_->on_dropped(std::string(index::drop_reason::reserved_tenant), 1);
    reactor->finish_now(grpc::Status::OK, true, std::string(index::drop_reason::reserved_tenant));
    return reactor;
  }
  actors::runtime* rt = runtime_.load();
  if (rt == nullptr) {
    reactor->finish_now(kRecovering);
    return reactor;
  }
  rt->append(actors::record_kind::event, event->SerializeAsString(), reactor->sink(), 0);
  return reactor;
}

grpc::ServerWriteReactor<v1::CacheEvent>* inference_cache_service::StreamCacheEvents(
    grpc::CallbackServerContext*, const v1::StreamEventsRequest* req) {
  auto [channel, reactor] = open_stream<v1::CacheEvent>(*streams_, options_.stream_buffer, &owed_);
  if (!channel) return reactor;
  actors::runtime* rt = runtime_.load();
  if (rt == nullptr) {
    channel->close(kRecovering);
    return reactor;
  }
  actors::event_filter filter;
  filter.tenant_id = req->tenant_id();
  filter.model_id = req->model_id();
  for (int t : req->types()) filter.types.push_back(t);
  rt->subscribe(std::make_shared<events_subscriber>(std::move(filter), channel));
  // Headers go out only once the subscription is on the runtime's event bus: a client that
  // waits for them knows every change it causes afterwards will be streamed.
  reactor->StartSendInitialMetadata();
  return reactor;
}

grpc::ServerWriteReactor<v1::Metric>* inference_cache_service::StreamMetrics(
    grpc::CallbackServerContext*, const v1::StreamMetricsRequest* req) {
  auto [channel, reactor] = open_stream<v1::Metric>(*streams_, options_.stream_buffer, &owed_);
  if (!channel) return reactor;
  std::vector<std::string> names(req->names().begin(), req->names().end());
  streams_->add_metrics({channel, names});
  if (metrics_source_) push_metrics(*channel, metrics_source_(), names, unix_micros());
  return reactor;
}

}  // namespace ic::grpc_gateway
