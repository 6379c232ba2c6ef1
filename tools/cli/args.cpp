#include "tools/cli/args.hpp"

#include <cctype>
#include <chrono>
#include <set>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "index/fingerprint.hpp"
#include "tools/cli/grpc_connect.hpp"
#include "tools/common/codec.hpp"

namespace ic::tools {

bool parse_hashes(const std::string& text, std::vector<std::string>* out, std::string* err) {
  for (const auto& item : split_list(text)) {
    auto h = decode_hash(item, err);
    if (!h) return false;
    out->push_back(*h);
  }
  if (out->empty()) {
    *err = "--hashes needs at least one hash";
    return false;
  }
  return true;
}

bool parse_tier(const std::string& t, v1::CacheTier* out) {
  if (t == "t1" || t == "T1") *out = v1::CACHE_TIER_T1;
  else if (t == "t2" || t == "T2") *out = v1::CACHE_TIER_T2;
  else if (t == "t3" || t == "T3") *out = v1::CACHE_TIER_T3;
  else return false;
  return true;
}

bool parse_event_type(const std::string& name, v1::CacheEvent::Type* out) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (n == "ADDED" || n == "PREFIX_ADDED") *out = v1::CacheEvent::PREFIX_ADDED;
  else if (n == "EVICTED" || n == "PREFIX_EVICTED") *out = v1::CacheEvent::PREFIX_EVICTED;
  else if (n == "UPDATED" || n == "REPLICA_UPDATED") *out = v1::CacheEvent::REPLICA_UPDATED;
  else if (n == "CLEARED" || n == "ALL_CLEARED") *out = v1::CacheEvent::ALL_CLEARED;
  else return false;
  return true;
}

bool parse_update_file(const std::string& text, std::vector<v1::CacheStateUpdate>* out,
                       std::string* err) {
  auto convert = [&](const std::string& one, const std::string& where) {
    v1::CacheStateUpdate u;
    auto st = google::protobuf::util::JsonStringToMessage(one, &u);
    if (!st.ok()) {
      *err = where + ": " + std::string(st.message());
      return false;
    }
    out->push_back(std::move(u));
    return true;
  };
  auto whole = nlohmann::json::parse(text, nullptr, false);
  if (!whole.is_discarded()) {
    if (whole.is_array()) {
      for (std::size_t i = 0; i < whole.size(); ++i)
        if (!convert(whole[i].dump(), "item " + std::to_string(i))) return false;
      return true;
    }
    return convert(whole.dump(), "update");
  }
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!convert(line, "line " + std::to_string(n))) return false;
  }
  if (out->empty()) {
    *err = "no updates in the file";
    return false;
  }
  return true;
}

namespace {

/// Fingerprints `--tokens` into `block_tokens` blocks as an engine adapter would (the
/// server's --engine-block-size must equal `block_tokens` for the hashes to match).
bool fingerprint_tokens(const std::string& tokens, int block_tokens,
                        std::vector<std::uint64_t>* chain, std::string* err) {
  auto toks = parse_u32_list(tokens, err);
  if (!toks) return false;
  if (block_tokens <= 0) {
    *err = "--block-tokens must be positive";
    return false;
  }
  *chain = ic::index::fingerprint_chain(toks->data(), toks->size(), block_tokens);
  if (chain->empty()) {
    *err = "--tokens holds no full block of --block-tokens tokens";
    return false;
  }
  return true;
}

bool fail_with(std::string* err, std::string msg) {
  *err = std::move(msg);
  return false;
}

/// `--hashes` with `--block-tokens` each: the blocks of a LookupRouteRequest or of a
/// CachedPrefix (both carry block_hashes + block_token_counts).
template <class Msg>
bool add_hash_blocks(const std::string& hashes, int block_tokens, Msg* m, std::string* err) {
  std::vector<std::string> hs;
  if (!parse_hashes(hashes, &hs, err)) return false;
  if (block_tokens <= 0) return fail_with(err, "--block-tokens must be positive");
  for (auto& h : hs) {
    m->add_block_hashes(h);
    m->add_block_token_counts(block_tokens);
  }
  return true;
}

}  // namespace

bool build_lookup_request(const lookup_options& o, v1::LookupRouteRequest* req, std::string* err) {
  req->set_tenant_id(o.tenant);
  req->set_model_id(o.model);
  req->set_hash_scheme(o.scheme);
  req->set_adapter_id(o.adapter);
  if (o.tokens.empty() && o.hashes.empty() && o.prefix.empty() && o.prompt.empty())
    return fail_with(err, "give --tokens, --hashes, --prefix or --prompt");
  if (!o.tokens.empty() && !o.hashes.empty())
    return fail_with(err, "--tokens and --hashes cannot be combined");
  if (!o.prompt.empty() && (!o.tokens.empty() || !o.hashes.empty() || !o.prefix.empty()))
    return fail_with(err, "--prompt cannot be combined with --tokens, --hashes or --prefix");
  // The server applies the model's chat template to it (one user message) and tokenizes it.
  req->set_prompt_text(o.prompt);
  if (!o.tokens.empty()) {
    auto toks = parse_u32_list(o.tokens, err);
    if (!toks) return false;
    for (auto t : *toks) req->add_token_ids(t);
  }
  if (!o.hashes.empty() && !add_hash_blocks(o.hashes, o.block_tokens, req, err)) return false;
  if (!o.prefix.empty()) {
    auto p = decode_hash(o.prefix, err);
    if (!p) return false;
    req->set_prefix_hash(*p);
    req->set_prefix_token_count(o.prefix_tokens);
  }
  return true;
}

bool build_report_updates(const report_options& o, std::vector<v1::CacheStateUpdate>* out,
                          std::string* err) {
  if (!o.file.empty()) {
    if (!o.hashes.empty() || !o.prefix.empty() || !o.tokens.empty())
      return fail_with(err, "--file cannot be combined with --hashes, --tokens or --prefix");
    std::string text;
    if (!read_file(o.file, &text, err)) return false;
    return parse_update_file(text, out, err);
  }
  if (o.replica.empty()) return fail_with(err, "--replica is required (or give --file)");
  if (o.hashes.empty() && o.prefix.empty() && o.tokens.empty())
    return fail_with(err, "give --hashes, --tokens or --prefix");
  if (!o.hashes.empty() && !o.tokens.empty())
    return fail_with(err, "--hashes and --tokens cannot be combined");
  v1::CacheTier tier;
  if (!parse_tier(o.tier, &tier)) return fail_with(err, "--tier must be t1, t2 or t3");
  v1::CacheStateUpdate u;
  u.set_replica_id(o.replica);
  u.set_tenant_id(o.tenant);
  u.set_model_id(o.model);
  u.set_hash_scheme(o.scheme);
  u.set_adapter_id(o.adapter);
  u.set_timestamp_us(std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
  auto* p = u.add_prefixes();
  p->set_tier(tier);
  p->set_adapter_id(o.adapter);
  if (!o.hashes.empty() && !add_hash_blocks(o.hashes, o.block_tokens, p, err)) return false;
  if (!o.tokens.empty()) {
    std::vector<std::uint64_t> chain;
    if (!fingerprint_tokens(o.tokens, o.block_tokens, &chain, err)) return false;
    for (auto h : chain) {
      p->add_block_hashes(ic::index::to_wire(h));
      p->add_block_token_counts(o.block_tokens);
    }
  }
  if (!o.prefix.empty()) {
    auto ph = decode_hash(o.prefix, err);
    if (!ph) return false;
    p->set_prefix_hash(*ph);
    p->set_token_count(o.prefix_tokens);
  }
  out->push_back(std::move(u));
  return true;
}

bool build_pd_route_request(const pd_route_options& o, v1::LookupPDRouteRequest* req,
                            std::string* err) {
  if (o.topology.empty()) return fail_with(err, "--topology is required (NAMESPACE/NAME or NAME)");
  if (o.prefix.empty() == o.tokens.empty()) return fail_with(err, "give one of --prefix or --tokens");
  if (o.prefix_tokens < 0) return fail_with(err, "--prefix-tokens must not be negative");
  req->set_tenant_id(o.tenant);
  req->set_model_id(o.model);
  req->set_pd_topology_ref(o.topology);
  if (!o.prefix.empty()) {
    auto p = decode_hash(o.prefix, err);
    if (!p) return false;
    req->set_prefix_hash(*p);
    req->set_prefix_token_count(o.prefix_tokens);
    return true;
  }
  if (o.prefix_tokens != 0) return fail_with(err, "--prefix-tokens goes with --prefix, not --tokens");
  // As the server derives it for token_ids: the deepest full block's chain hash and the
  // cumulative token count of the full blocks (spec pd-templates §2.1).
  std::vector<std::uint64_t> chain;
  if (!fingerprint_tokens(o.tokens, o.block_tokens, &chain, err)) return false;
  req->set_prefix_hash(ic::index::to_wire(chain.back()));
  req->set_prefix_token_count(static_cast<std::int32_t>(chain.size()) * o.block_tokens);
  return true;
}

namespace {

/// Splits "key=value" at the first '='; false when there is none or the key is empty.
bool split_assignment(const std::string& text, const std::string& flag, std::string* key,
                      std::string* value, std::string* err) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return fail_with(err, flag + " '" + text + "' is not KEY=VALUE");
  *key = text.substr(0, eq);
  *value = text.substr(eq + 1);
  return true;
}

}  // namespace

bool build_render_request(const render_options& o, v1::RenderTemplateRequest* req,
                          std::string* err) {
  if (o.name.empty()) return fail_with(err, "--name is required");
  if (o.name.find('/') != std::string::npos)
    return fail_with(err, "--name must not contain '/' (give the namespace with --namespace)");
  if (o.namespace_name.find('/') != std::string::npos)
    return fail_with(err, "--namespace must not contain '/'");
  req->set_template_ref(o.namespace_name.empty() ? o.name : o.namespace_name + "/" + o.name);
  req->set_tenant_id(o.tenant.empty() ? o.namespace_name : o.tenant);
  auto& vars = *req->mutable_variables();
  auto add = [&](const std::string& key, std::string value) {
    if (!vars.insert({key, std::move(value)}).second)
      return fail_with(err, "variable '" + key + "' given twice");
    return true;
  };
  std::string key, value;
  for (const auto& v : o.vars) {
    if (!split_assignment(v, "--var", &key, &value, err) || !add(key, value)) return false;
  }
  for (const auto& v : o.var_files) {
    if (!split_assignment(v, "--var-file", &key, &value, err)) return false;
    std::string bytes;
    if (!read_file(value, &bytes, err) || !add(key, std::move(bytes))) return false;
  }
  return true;
}

}  // namespace ic::tools
