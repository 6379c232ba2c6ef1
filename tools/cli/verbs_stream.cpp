// watch, metrics: the two server streams, until Ctrl-C, --count or --duration.
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "tools/cli/args.hpp"
#include "tools/cli/format.hpp"
#include "tools/cli/verbs.hpp"
#include "tools/common/codec.hpp"

namespace ic::tools {
namespace {

/// Set by SIGINT/SIGTERM instead of killing the process.
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

/// Cancels `ctx` on Ctrl-C or when `duration_s` (> 0) has passed; join before `ctx` dies.
class stream_guard {
 public:
  stream_guard(grpc::ClientContext* ctx, double duration_s) {
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    thread_ = std::thread([this, ctx, duration_s] {
      const auto start = std::chrono::steady_clock::now();
      while (!stop_.load()) {
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (g_interrupted.load() || (duration_s > 0 && elapsed >= duration_s)) {
          expired_.store(true);
          ctx->TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~stream_guard() {
    stop_.store(true);
    thread_.join();
  }
  /// True when the guard (not the server) ended the stream.
  bool expired() const { return expired_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> expired_{false};
  std::thread thread_;
};

/// Reads a server stream opened by `start` until `count` messages (0 = no limit), the
/// `duration` (empty = none) or the stream's end, printing each with `print`.
template <class Msg, class Start, class Print>
int read_stream(const verb_env& env, const std::string& duration_text, long count, Start start,
                Print print) {
  double duration = 0;
  if (!duration_text.empty()) {
    std::string err;
    auto d = parse_seconds(duration_text, &err);
    if (!d) return env.usage(err);
    duration = *d;
  }
  if (count < 0) return env.usage("--count must not be negative");
  auto stub = env.stub();
  if (!stub) return exit_rpc;
  grpc::ClientContext ctx;
  auto reader = start(*stub, ctx);
  stream_guard guard(&ctx, duration);
  Msg m;
  long seen = 0;
  while ((count == 0 || seen < count) && reader->Read(&m)) {
    ++seen;
    print(m);
  }
  if (count > 0 && seen >= count) {
    ctx.TryCancel();
    (void)reader->Finish();
    return exit_ok;
  }
  grpc::Status st = reader->Finish();
  if (guard.expired() || st.ok()) return exit_ok;
  return env.rpc_fail(st);
}

struct watch_options {
  std::string tenant, model, types, duration;
  long count = 0;
  bool json = false;
};

int run_watch(const verb_env& env, const watch_options& o) {
  v1::StreamEventsRequest req;
  req.set_tenant_id(o.tenant);
  req.set_model_id(o.model);
  for (const auto& t : split_list(o.types)) {
    v1::CacheEvent::Type type;
    if (!parse_event_type(t, &type))
      return env.usage("unknown event type '" + t + "' (added, evicted, updated, cleared)");
    req.add_types(type);
  }
  return read_stream<v1::CacheEvent>(
      env, o.duration, o.count,
      [&](v1::InferenceCache::Stub& stub, grpc::ClientContext& ctx) {
        return stub.StreamCacheEvents(&ctx, req);
      },
      [&](const v1::CacheEvent& e) {
        std::cout << (o.json ? to_json(e) : format_event_line(e)) << std::endl;
      });
}

struct metrics_options {
  std::string names, duration;
  long count = 0;
  bool json = false;
};

int run_metrics(const verb_env& env, const metrics_options& o) {
  v1::StreamMetricsRequest req;
  for (const auto& n : split_list(o.names)) req.add_names(n);
  return read_stream<v1::Metric>(
      env, o.duration, o.count,
      [&](v1::InferenceCache::Stub& stub, grpc::ClientContext& ctx) {
        return stub.StreamMetrics(&ctx, req);
      },
      [&](const v1::Metric& m) {
        std::cout << (o.json ? to_json(m) : format_metric_line(m)) << std::endl;
      });
}

}  // namespace

void add_stream_verbs(CLI::App& app, verb_action* action) {
  auto wo = std::make_shared<watch_options>();
  auto* watch = app.add_subcommand("watch", "Print index changes live (StreamCacheEvents) until Ctrl-C");
  watch->add_option("--tenant", wo->tenant, "Only this tenant");
  watch->add_option("--model", wo->model, "Only this model");
  watch->add_option("--types", wo->types, "Event types: added,evicted,updated,cleared");
  watch->add_option("--count", wo->count, "Stop after N events");
  watch->add_option("--duration", wo->duration, "Stop after this long (10s, 2m)");
  watch->add_flag("--json", wo->json, "One JSON object per line");
  watch->callback([action, wo] { *action = [wo](const verb_env& e) { return run_watch(e, *wo); }; });

  auto mo = std::make_shared<metrics_options>();
  auto* metrics = app.add_subcommand("metrics", "Print server metrics as they are streamed (StreamMetrics)");
  metrics->add_option("--names", mo->names, "Metric names or families, comma separated");
  metrics->add_option("--count", mo->count, "Stop after N metrics");
  metrics->add_option("--duration", mo->duration, "Stop after this long (10s, 2m)");
  metrics->add_flag("--json", mo->json, "One JSON object per line");
  metrics->callback([action, mo] { *action = [mo](const verb_env& e) { return run_metrics(e, *mo); }; });
}

}  // namespace ic::tools
