// report, evict, clear: tell the server what a replica holds; each prints the Ack.
#include <chrono>
#include <iostream>
#include <memory>

#include "tools/cli/args.hpp"
#include "tools/cli/format.hpp"
#include "tools/cli/verbs.hpp"
#include "tools/common/codec.hpp"

namespace ic::tools {
namespace {

std::string ack_line(const v1::Ack& ack) {
  return std::string("accepted: ") + (ack.accepted() ? "true" : "false") +
         "   reason: " + (ack.reason_code().empty() ? "-" : ack.reason_code());
}

int run_report(const verb_env& env, const report_options& o) {
  std::vector<v1::CacheStateUpdate> updates;
  std::string err;
  if (!build_report_updates(o, &updates, &err)) return env.usage(err);
  auto stub = env.stub();
  if (!stub) return exit_rpc;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::Ack ack;
  auto writer = stub->ReportCacheState(&ctx, &ack);
  for (const auto& u : updates)
    if (!writer->Write(u)) break;
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) return env.rpc_fail(st);
  if (o.json) std::cout << to_json(ack) << "\n";
  else std::cout << ack_line(ack) << "   updates sent: " << updates.size() << "\n";
  if (!ack.accepted()) return env.fail("the server refused the updates: " + ack.reason_code());
  return exit_ok;
}

int publish(const verb_env& env, v1::CacheEvent::Type type, const event_options& o) {
  if (o.replica.empty()) return env.usage("--replica is required");
  std::vector<std::string> hashes;
  std::string err;
  if (type == v1::CacheEvent::PREFIX_EVICTED) {
    if (o.hashes.empty()) return env.usage("--hashes is required");
    if (!parse_hashes(o.hashes, &hashes, &err)) return env.usage(err);
  } else {
    hashes.push_back("");
  }
  auto stub = env.stub();
  if (!stub) return exit_rpc;
  int rc = exit_ok;
  for (const auto& h : hashes) {
    v1::CacheEvent e;
    e.set_type(type);
    e.set_replica_id(o.replica);
    e.set_tenant_id(o.tenant);
    e.set_model_id(o.model);
    e.set_adapter_id(o.adapter);
    e.set_prefix_hash(h);
    e.set_timestamp_us(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    grpc::ClientContext ctx;
    env.set_deadline(ctx);
    v1::Ack ack;
    grpc::Status st = stub->PublishEvent(&ctx, e, &ack);
    if (!st.ok()) return env.rpc_fail(st);
    if (o.json) std::cout << to_json(ack) << "\n";
    else std::cout << ack_line(ack) << (h.empty() ? "" : "   hash: " + to_hex(h)) << "\n";
    if (!ack.accepted()) rc = env.fail("the server refused the event: " + ack.reason_code());
  }
  return rc;
}

}  // namespace

void add_ingest_verbs(CLI::App& app, verb_action* action) {
  auto ro = std::make_shared<report_options>();
  auto* report = app.add_subcommand("report", "Report what a replica caches (ReportCacheState)");
  report->add_option("--file", ro->file,
                     "JSON/JSONL file of CacheStateUpdate (protobuf JSON), '-' for stdin");
  report->add_option("--replica", ro->replica, "Replica id");
  report->add_option("--tenant", ro->tenant, "Tenant id")->capture_default_str();
  report->add_option("--model", ro->model, "Model id");
  report->add_option("--scheme", ro->scheme, "Hash scheme")->capture_default_str();
  report->add_option("--adapter", ro->adapter, "Adapter (LoRA) id");
  report->add_option("--hashes", ro->hashes, "Block hashes of one chain, hex or base64");
  report->add_option("--block-tokens", ro->block_tokens, "Tokens per block")->capture_default_str();
  report->add_option("--prefix", ro->prefix, "Exact prefix hash (hex or base64)");
  report->add_option("--prefix-tokens", ro->prefix_tokens, "Token count of --prefix");
  report->add_option("--tokens", ro->tokens,
                     "Token ids 1,2,3,... fingerprinted here into --block-tokens blocks");
  report->add_option("--tier", ro->tier, "Cache tier t1|t2|t3")->capture_default_str();
  report->add_flag("--json", ro->json, "Print the Ack as JSON");
  report->callback([action, ro] { *action = [ro](const verb_env& e) { return run_report(e, *ro); }; });

  auto ev = std::make_shared<event_options>();
  auto* evict = app.add_subcommand("evict", "Tell the server a replica evicted blocks (PREFIX_EVICTED)");
  evict->add_option("--replica", ev->replica, "Replica id");
  evict->add_option("--tenant", ev->tenant, "Tenant id")->capture_default_str();
  evict->add_option("--model", ev->model, "Model id");
  evict->add_option("--adapter", ev->adapter, "Adapter (LoRA) id");
  evict->add_option("--hashes", ev->hashes, "Evicted block/prefix hashes (one event each)");
  evict->add_flag("--json", ev->json, "Print the Ack as JSON");
  evict->callback([action, ev] {
    *action = [ev](const verb_env& e) { return publish(e, v1::CacheEvent::PREFIX_EVICTED, *ev); };
  });

  auto cl = std::make_shared<event_options>();
  auto* clear = app.add_subcommand("clear", "Tell the server a replica dropped its whole cache (ALL_CLEARED)");
  clear->add_option("--replica", cl->replica, "Replica id");
  clear->add_option("--tenant", cl->tenant, "Tenant id")->capture_default_str();
  clear->add_option("--model", cl->model, "Model id");
  clear->add_flag("--json", cl->json, "Print the Ack as JSON");
  clear->callback([action, cl] {
    *action = [cl](const verb_env& e) { return publish(e, v1::CacheEvent::ALL_CLEARED, *cl); };
  });
}

}  // namespace ic::tools
