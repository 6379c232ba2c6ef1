// Output formatting of every verb, in one place: the table (default) and `--json`.
//
// Conventions (tools/README.md): a table is a `reason:` line followed by aligned columns with
// upper-case headers; `-` stands for an empty field; `--json` is the protobuf JSON mapping of
// the response with every field present (camelCase names), one object per line. Pure
// functions over messages and JSON text, unit-tested in tools/cli/cli_test.cpp.
#pragma once

#include <string>

#include <google/protobuf/message.h>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "tools/common/http_client.hpp"

namespace ic::tools {

namespace v1 = inferencecache::v1alpha1;

/// The protobuf JSON mapping with default-valued fields printed, on one line.
std::string to_json(const google::protobuf::Message& m);

std::string tier_name(v1::CacheTier t);

std::string format_lookup_table(const v1::LookupRouteResponse& resp);
std::string format_state_table(const v1::GetCacheStateResponse& resp);
std::string format_event_line(const v1::CacheEvent& e);
std::string format_metric_line(const v1::Metric& m);

/// True when the answer names a prefill/decode pair (PREFIX_MATCH, AFFINITY_HINT,
/// LOCAL_PREFILL, or any future positive code: the server sets all three fields or none).
bool pd_route_has_pair(const v1::LookupPDRouteResponse& resp);
std::string format_pd_route_table(const v1::LookupPDRouteResponse& resp);

/// RenderTemplate's table: reason, revision, namespace, the stable-prefix hash as hex, then
/// the rendered text verbatim.
std::string format_render_table(const v1::RenderTemplateResponse& resp);
/// RenderTemplate as JSON: the protobuf JSON names, but the text fields (`renderedPrompt`,
/// `tenantNamespace`) as strings and `stablePrefixHash` as hex, not base64 (invalid UTF-8 is
/// replaced by U+FFFD).
std::string render_to_json(const v1::RenderTemplateResponse& resp);

/// `topology show`: one row per topology from a GET /topology body (spec pd-templates §2.2);
/// empty when the body is not such a document (the caller then prints it as received).
std::string format_topology_table(const std::string& body);
/// `templates show`: one row per template from a GET /templates body (§3.1).
std::string format_templates_table(const std::string& body);

/// The body pretty-printed when it is JSON, else as received.
std::string pretty_json(const std::string& body);

/// "HTTP <status>: <first line of the body>" (one line, whatever the server sent).
std::string http_reason_line(const http_response& res);

}  // namespace ic::tools
