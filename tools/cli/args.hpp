// Verb options and the requests built from them: pure functions (no I/O except reading the
// files a flag names), so argument handling is unit-tested without a server
// (tools/cli/cli_test.cpp). Every `build_*` returns false with a one-line `*err` on bad
// input, which the verb reports as a usage error (exit 2).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::tools {

namespace v1 = inferencecache::v1alpha1;

struct lookup_options {
  std::string tenant = "default", model, scheme = "vllm", adapter;
  std::string tokens, hashes, prefix, prompt;
  int block_tokens = 16;
  int prefix_tokens = 0;
  bool json = false;
  bool fail_on_no_hint = false;
};

struct report_options {
  std::string file;
  std::string replica, tenant = "default", model, scheme = "vllm", adapter;
  std::string hashes, prefix, tokens, tier = "t1";
  int block_tokens = 16;
  int prefix_tokens = 0;
  bool json = false;
};

struct event_options {
  std::string replica, tenant = "default", model, adapter, hashes;
  bool json = false;
};

/// `pd-route`: the LookupPDRouteRequest fields, or token ids fingerprinted here into the
/// deepest full block (prefix_hash = its chain hash, prefix_token_count = the blocks' tokens).
struct pd_route_options {
  std::string tenant = "default", model, topology;
  std::string prefix, tokens;
  int prefix_tokens = 0;
  int block_tokens = 16;
  bool json = false;
  bool fail_on_no_hint = false;
};

/// `render`: template_ref = NAMESPACE/NAME (or the bare NAME, resolved in the tenant),
/// tenant_id = --tenant, defaulting to --namespace.
struct render_options {
  std::string tenant, namespace_name, name;
  std::vector<std::string> vars;       ///< "key=value", repeatable
  std::vector<std::string> var_files;  ///< "key=FILE": the value is the file's bytes
  bool json = false;
  bool prompt_only = false;
};

/// Parses a comma list of block hashes (hex or base64); false and `*err` on a bad item.
bool parse_hashes(const std::string& text, std::vector<std::string>* out, std::string* err);

/// "t1"/"T1".. "t3"; false on anything else.
bool parse_tier(const std::string& text, v1::CacheTier* out);

/// "added"/"PREFIX_ADDED", "evicted", "updated", "cleared" (any case); false on anything else.
bool parse_event_type(const std::string& name, v1::CacheEvent::Type* out);

/// Parses a file of CacheStateUpdate in protobuf JSON: one object, an array, or JSONL.
bool parse_update_file(const std::string& text, std::vector<v1::CacheStateUpdate>* out,
                       std::string* err);

bool build_lookup_request(const lookup_options& o, v1::LookupRouteRequest* req, std::string* err);

/// The updates `report` sends: from --file, or one update from the flags.
bool build_report_updates(const report_options& o, std::vector<v1::CacheStateUpdate>* out,
                          std::string* err);

bool build_pd_route_request(const pd_route_options& o, v1::LookupPDRouteRequest* req,
                            std::string* err);

bool build_render_request(const render_options& o, v1::RenderTemplateRequest* req,
                          std::string* err);

}  // namespace ic::tools
