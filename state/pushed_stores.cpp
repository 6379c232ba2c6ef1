#include "state/pushed_stores.hpp"

#include <variant>

#include "templates/template_json.hpp"

namespace ic::state {

bool is_store_record(const proto::decoded_record& record) {
  return std::holds_alternative<proto::topology_record>(record.payload) ||
         std::holds_alternative<proto::templates_record>(record.payload);
}

bool apply_store_record(pushed_stores& stores, const proto::decoded_record& record,
                        std::string* error) {
  auto fail = [&](std::string why) {
    if (error) *error = std::move(why);
    return false;
  };
  if (const auto* t = std::get_if<proto::topology_record>(&record.payload)) {
    auto set = topology::topology_store::from_bytes(t->canonical_json);
    if (!set.has_value()) return fail("topology record: " + set.error());
    stores.topologies.apply(std::move(set).value());
    return true;
  }
  if (const auto* m = std::get_if<proto::templates_record>(&record.payload)) {
    auto set = templates::template_store::from_bytes(m->canonical_json);
    if (!set.has_value()) return fail("templates record: " + set.error());
    stores.templates.apply(std::move(set).value());
    return true;
  }
  return fail("not a topology or templates record");
}

std::vector<std::pair<proto::record_kind, std::string>> store_sections(const pushed_stores& stores) {
  std::vector<std::pair<proto::record_kind, std::string>> out;
  const auto topo = stores.topologies.current();
  if (!topo->set().topologies.empty()) out.emplace_back(proto::record_kind::topology, topo->canonical());
  const auto tmpl = stores.templates.current();
  if (!tmpl->set().templates.empty())
    out.emplace_back(proto::record_kind::templates, templates::encode_template_set(tmpl->set()));
  return out;
}

void adopt_stores(pushed_stores& live, const pushed_stores& from) {
  live.topologies.apply(from.topologies.current()->set());
  live.templates.apply(from.templates.current()->set());
}

}  // namespace ic::state
