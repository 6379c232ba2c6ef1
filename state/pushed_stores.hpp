// The controller-pushed stores besides policy: `/topology` and `/templates`
// (pd-templates.md §2.2, §3.1), and the one rule that applies their journal records.
//
// Both stores are replace-on-write pointer swaps (topology/topology_store.hpp,
// templates/template_store.hpp): one writer applies a record, readers on any thread take the
// current immutable snapshot and never wait. `apply_store_record` is the one application of
// a topology / templates record: the coordinator (live), `tenant_set::apply` (replay) and
// the snapshot loader all call it, so a journaled push replays to the same store.
//
//   state::pushed_stores stores;
//   std::string why;
//   if (!state::apply_store_record(stores, record, &why)) ...;   // a body that no longer decodes
//   auto snap = stores.topologies.current();                      // a lookup's view
#pragma once

#include <memory>
#include <string>

#include "proto/record_codec.hpp"
#include "templates/template_store.hpp"
#include "topology/topology_store.hpp"

namespace ic::state {

/// The two stores; one writer (the coordinator, or replay), readers from any thread.
struct pushed_stores {
  topology::topology_store topologies;
  templates::template_store templates;
};

/// Shared by the runtime's coordinator (writer), tenant actors and gateway (readers).
using stores_ptr = std::shared_ptr<pushed_stores>;

/// Returns true when `record` is a topology or templates record.
bool is_store_record(const proto::decoded_record& record);

/// Applies a topology or templates record to `stores` (replace-on-write). Returns false with
/// `error` set, changing nothing, when the bytes no longer decode or the record is of
/// another kind.
bool apply_store_record(pushed_stores& stores, const proto::decoded_record& record,
                        std::string* error);

/// Replaces both sets of `live` with those of `from` (replace-on-write; a reload after a
/// stream gap installs the stores of the state it loaded).
void adopt_stores(pushed_stores& live, const pushed_stores& from);

/// Returns the canonical payload of each store that holds a non-empty set, as the record it
/// would be journaled as (the snapshot's store sections, state/snapshot_io.hpp).
std::vector<std::pair<proto::record_kind, std::string>> store_sections(const pushed_stores& stores);

}  // namespace ic::state
