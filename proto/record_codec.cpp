#include "proto/record_codec.hpp"

#include "inferencecache/journal/v1/journal.pb.h"
#include "proto/translate.hpp"

namespace ic::proto {
namespace {

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Appends a length-delimited field (wire type 2) holding `bytes`.
void put_bytes_field(std::string& out, int field, std::string_view bytes) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

}  // namespace

std::string encode_credits(const std::vector<lfu_credit>& credits) {
  inferencecache::journal::v1::LfuCredits m;
  for (const auto& c : credits) {
    auto* x = m.add_credits();
    x->set_tenant_id(c.tenant);
    x->set_model_id(c.hit.model);
    x->set_hash_scheme(c.hit.scheme);
    x->set_adapter_id(c.hit.adapter);
    x->set_key(c.hit.key);
    x->set_replica_id(c.hit.replica);
    x->set_count(c.count);
  }
  return m.SerializeAsString();
}

const char* kind_name(std::uint32_t kind) {
  switch (static_cast<record_kind>(kind)) {
    case record_kind::update: return "update";
    case record_kind::event: return "event";
    case record_kind::policy: return "policy";
    case record_kind::sweep: return "sweep";
    case record_kind::topology: return "topology";
    case record_kind::templates: return "templates";
    case record_kind::lfu_credits: return "lfu_credits";
  }
  return "unknown";
}

std::string encode_record(record_kind kind, index::micros applied_at_us, std::string_view payload) {
  // Record{applied_at_us = 1; update = 2; event = 3; policy = 4; sweep = 5; topology = 16;
  // templates = 17}, written by hand so
  // the payload's bytes are embedded without a parse/serialize round trip.
  std::string out;
  out.reserve(payload.size() + 24);
  if (applied_at_us != 0) {
    put_varint(out, 1 << 3 | 0);
    put_varint(out, static_cast<std::uint64_t>(applied_at_us));
  }
  switch (kind) {
    case record_kind::update: put_bytes_field(out, 2, payload); break;
    case record_kind::event: put_bytes_field(out, 3, payload); break;
    case record_kind::policy:
    case record_kind::topology:
    case record_kind::templates: {
      // PolicyPush / StorePush: canonical_json = 1.
      std::string push;
      put_bytes_field(push, 1, payload);
      put_bytes_field(out, kind == record_kind::policy ? 4 : kind == record_kind::topology ? 16 : 17,
                      push);
      break;
    }
    case record_kind::sweep: put_bytes_field(out, 5, {}); break;
    case record_kind::lfu_credits: put_bytes_field(out, 18, payload); break;
  }
  return out;
}

std::optional<decoded_record> decode_record(std::uint32_t kind, std::string_view bytes,
                                            std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<decoded_record> {
    if (error) *error = why;
    return std::nullopt;
  };
  inferencecache::journal::v1::Record rec;
  if (!rec.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return fail("record does not parse as inferencecache.journal.v1.Record");
  decoded_record out;
  out.applied_at_us = rec.applied_at_us();
  switch (static_cast<record_kind>(kind)) {
    case record_kind::update:
      if (!rec.has_update()) return fail("update record without an update payload");
      out.payload = proto::from_proto(rec.update());
      return out;
    case record_kind::event:
      if (!rec.has_event()) return fail("event record without an event payload");
      out.payload = proto::from_proto(rec.event());
      return out;
    case record_kind::policy:
      if (!rec.has_policy()) return fail("policy record without a policy payload");
      out.payload = policy_record{rec.policy().canonical_json()};
      return out;
    case record_kind::sweep:
      if (!rec.has_sweep()) return fail("sweep record without a sweep payload");
      out.payload = sweep_record{};
      return out;
    case record_kind::topology:
      if (!rec.has_topology()) return fail("topology record without a topology payload");
      out.payload = topology_record{rec.topology().canonical_json()};
      return out;
    case record_kind::templates:
      if (!rec.has_templates()) return fail("templates record without a templates payload");
      out.payload = templates_record{rec.templates().canonical_json()};
      return out;
    case record_kind::lfu_credits: {
      if (!rec.has_lfu_credits()) return fail("lfu_credits record without an lfu_credits payload");
      credit_record c;
      c.credits.reserve(static_cast<std::size_t>(rec.lfu_credits().credits_size()));
      for (const auto& x : rec.lfu_credits().credits())
        c.credits.push_back(lfu_credit{
            x.tenant_id(),
            index::named_hit{x.model_id(), x.hash_scheme(), x.adapter_id(), x.key(), x.replica_id()},
            x.count()});
      out.payload = std::move(c);
      return out;
    }
  }
  return fail("unknown record type " + std::to_string(kind));
}

}  // namespace ic::proto
