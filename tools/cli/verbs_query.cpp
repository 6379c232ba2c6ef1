// lookup, pd-route, render, state, health: one unary call each, table or --json.
#include <iostream>
#include <memory>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/cli/args.hpp"
#include "tools/cli/format.hpp"
#include "tools/cli/verbs.hpp"

namespace ic::tools {
namespace {

namespace health = grpc::health::v1;

int run_lookup(const verb_env& env, const lookup_options& o) {
  v1::LookupRouteRequest req;
  std::string err;
  if (!build_lookup_request(o, &req, &err)) return env.usage(err);
  auto stub = env.stub();
  if (!stub) return exit_rpc;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::LookupRouteResponse resp;
  grpc::Status st = stub->LookupRoute(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  std::cout << (o.json ? to_json(resp) + "\n" : format_lookup_table(resp));
  // Like the reference gateway client, only PREFIX_MATCH with a replica is a routing hint.
  if (o.fail_on_no_hint && (resp.reason_code() != "PREFIX_MATCH" || resp.replica_scores_size() == 0))
    return exit_no_hint;
  return exit_ok;
}

int run_pd_route(const verb_env& env, const pd_route_options& o) {
  v1::LookupPDRouteRequest req;
  std::string err;
  if (!build_pd_route_request(o, &req, &err)) return env.usage(err);
  auto stub = env.stub();
  if (!stub) return exit_rpc;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::LookupPDRouteResponse resp;
  grpc::Status st = stub->LookupPDRoute(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  std::cout << (o.json ? to_json(resp) + "\n" : format_pd_route_table(resp));
  if (o.fail_on_no_hint && !pd_route_has_pair(resp)) return exit_no_hint;
  return exit_ok;
}

int run_render(const verb_env& env, const render_options& o) {
  v1::RenderTemplateRequest req;
  std::string err;
  if (!build_render_request(o, &req, &err)) return env.usage(err);
  auto stub = env.stub();
  if (!stub) return exit_rpc;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::RenderTemplateResponse resp;
  grpc::Status st = stub->RenderTemplate(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  if (o.prompt_only) std::cout << resp.rendered_prompt();
  else std::cout << (o.json ? render_to_json(resp) + "\n" : format_render_table(resp));
  std::cout.flush();
  // No prompt was rendered (TEMPLATE_NOT_FOUND, RENDER_ERROR, or a code this client does
  // not know, which the reference maps to RENDER_ERROR): the server refused.
  if (resp.reason_code() != "OK") return env.fail("the server did not render: " + resp.reason_code());
  return exit_ok;
}

struct state_options {
  std::string tenant = "default", model;
  bool json = false;
};

int run_state(const verb_env& env, const state_options& o) {
  auto stub = env.stub();
  if (!stub) return exit_rpc;
  v1::GetCacheStateRequest req;
  req.set_tenant_id(o.tenant);
  req.set_model_id(o.model);
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::GetCacheStateResponse resp;
  grpc::Status st = stub->GetCacheState(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  std::cout << (o.json ? to_json(resp) + "\n" : format_state_table(resp));
  return exit_ok;
}

int run_health(const verb_env& env, const std::string& service) {
  std::string err;
  auto ch = make_channel(env.g->conn, &err);
  if (!ch) return env.fail(err);
  auto stub = health::Health::NewStub(ch);
  health::HealthCheckRequest req;
  req.set_service(service);
  health::HealthCheckResponse resp;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  grpc::Status st = stub->Check(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  std::cout << health::HealthCheckResponse::ServingStatus_Name(resp.status()) << "\n";
  return resp.status() == health::HealthCheckResponse::SERVING ? exit_ok : exit_rpc;
}

}  // namespace

void add_query_verbs(CLI::App& app, verb_action* action) {
  auto lo = std::make_shared<lookup_options>();
  auto* lookup = app.add_subcommand("lookup", "Ask which replica holds a prompt's prefix (LookupRoute)");
  lookup->add_option("--tenant", lo->tenant, "Tenant id")->capture_default_str();
  lookup->add_option("--model", lo->model, "Model id");
  lookup->add_option("--scheme", lo->scheme, "Hash scheme")->capture_default_str();
  lookup->add_option("--adapter", lo->adapter, "Adapter (LoRA) id");
  lookup->add_option("--tokens", lo->tokens, "Token ids 1,2,3,... (the server fingerprints them)");
  lookup->add_option("--hashes", lo->hashes, "Block hashes, hex or base64, comma separated");
  lookup->add_option("--block-tokens", lo->block_tokens, "Tokens per block for --hashes")
      ->capture_default_str();
  lookup->add_option("--prefix", lo->prefix, "Exact prefix hash (hex or base64)");
  lookup->add_option("--prefix-tokens", lo->prefix_tokens, "Token count of --prefix");
  lookup->add_option("--prompt", lo->prompt,
                     "Prompt text: the server renders the model's chat template and tokenizes it "
                     "(needs --tokenizer-models-dir on the server)");
  lookup->add_flag("--json", lo->json, "Print the response as JSON");
  lookup->add_flag("--fail-on-no-hint", lo->fail_on_no_hint, "Exit 3 unless the answer is PREFIX_MATCH");
  lookup->callback([action, lo] { *action = [lo](const verb_env& e) { return run_lookup(e, *lo); }; });

  auto po = std::make_shared<pd_route_options>();
  auto* pd = app.add_subcommand("pd-route", "Ask for a prefill/decode replica pair (LookupPDRoute)");
  pd->add_option("--tenant", po->tenant, "Tenant id")->capture_default_str();
  pd->add_option("--model", po->model, "Model id");
  pd->add_option("--topology", po->topology, "PD topology ref NAMESPACE/NAME (or NAME: in the tenant)");
  pd->add_option("--prefix", po->prefix, "Prefix hash: the deepest block's chain hash (hex or base64)");
  pd->add_option("--prefix-tokens", po->prefix_tokens, "Cumulative token count of --prefix");
  pd->add_option("--tokens", po->tokens,
                 "Token ids 1,2,3,... fingerprinted here: prefix = the last full block's hash");
  pd->add_option("--block-tokens", po->block_tokens, "Tokens per block for --tokens")
      ->capture_default_str();
  pd->add_flag("--json", po->json, "Print the response as JSON");
  pd->add_flag("--fail-on-no-hint", po->fail_on_no_hint, "Exit 3 unless the answer names a pair");
  pd->callback([action, po] { *action = [po](const verb_env& e) { return run_pd_route(e, *po); }; });

  auto ro = std::make_shared<render_options>();
  auto* render = app.add_subcommand("render", "Render a prompt template (RenderTemplate)");
  render->add_option("--namespace", ro->namespace_name, "Template namespace (ref NAMESPACE/NAME)");
  render->add_option("--name", ro->name, "Template name");
  render->add_option("--tenant", ro->tenant, "Tenant id (default: --namespace)");
  render->add_option("--var", ro->vars, "Slot value KEY=VALUE (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  render->add_option("--var-file", ro->var_files, "Slot value KEY=FILE ('-' = stdin; repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  render->add_flag("--json", ro->json, "Print the response as JSON (hash as hex)");
  render->add_flag("--prompt-only", ro->prompt_only, "Print only the rendered prompt's bytes");
  render->callback([action, ro] { *action = [ro](const verb_env& e) { return run_render(e, *ro); }; });

  auto so = std::make_shared<state_options>();
  auto* state = app.add_subcommand("state", "Show replicas and index summary (GetCacheState)");
  state->add_option("--tenant", so->tenant, "Tenant id (matched literally)")->capture_default_str();
  state->add_option("--model", so->model, "Model id (matched literally; empty is a model id too)");
  state->add_flag("--json", so->json, "Print the response as JSON");
  state->callback([action, so] { *action = [so](const verb_env& e) { return run_state(e, *so); }; });

  auto service = std::make_shared<std::string>();
  auto* hc = app.add_subcommand("health", "Check the server's gRPC health (grpc.health.v1.Health/Check)");
  hc->add_option("--service", *service, "Service name (empty: the whole server)");
  hc->callback([action, service] {
    *action = [service](const verb_env& e) { return run_health(e, *service); };
  });
}

}  // namespace ic::tools
