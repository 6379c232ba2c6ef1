#include "state/snapshot_io.hpp"

#include <cstring>

namespace ic::state {
namespace {

constexpr char kMagic[8] = {'I', 'C', 'S', 'N', 'A', 'P', '0', '1'};
constexpr std::uint32_t kVersion = 4;
constexpr char kStoreTag = 'S';
constexpr char kTenantTag = 'T';
constexpr char kDataTag = 'D';

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

bool fail(std::string* error, std::string why) {
  if (error) *error = std::move(why);
  return false;
}

}  // namespace

bool write_state_snapshot(const policy::policy_store& policies, const store_section_list& stores,
                          index::micros effective_time,
                          const std::vector<const tenant_state*>& tenants,
                          const std::function<bool(std::string_view)>& sink,
                          std::size_t chunk_bytes) {
  std::string header(kMagic, sizeof kMagic);
  put_le(header, kVersion, 4);
  const std::string policy = policies.to_bytes();
  put_le(header, policy.size(), 8);
  header += policy;
  put_le(header, static_cast<std::uint64_t>(effective_time), 8);
  if (!sink(header)) return false;
  std::string buf;
  for (const auto& [kind, payload] : stores) {
    buf.assign(1, kStoreTag);
    put_le(buf, static_cast<std::uint32_t>(kind), 4);
    buf += payload;
    if (!sink(buf)) return false;
  }
  for (const tenant_state* t : tenants) {
    buf.assign(1, kTenantTag);
    buf += t->tenant();
    if (!sink(buf)) return false;
    const bool ok = index::write_snapshot(
        t->index(),
        [&](std::string_view c) {
          buf.assign(1, kDataTag);
          buf.append(c.data(), c.size());
          return sink(buf);
        },
        chunk_bytes);
    if (!ok) return false;
  }
  return true;
}

bool write_state_snapshot(const tenant_set& set, const std::function<bool(std::string_view)>& sink,
                          std::size_t chunk_bytes) {
  std::vector<const tenant_state*> tenants;
  for (const auto& [_, t] : set.tenants()) tenants.push_back(t.get());
  return write_state_snapshot(*set.policies(), store_sections(*set.stores()),
                              set.effective_time(), tenants, sink, chunk_bytes);
}

state_loader::state_loader(state_options options)
    : options_(options), set_(std::make_unique<tenant_set>(options)) {}

state_loader::~state_loader() = default;

bool state_loader::finish_tenant(std::string* error) {
  if (!loader_) return true;
  if (!loader_->finish(error)) return false;
  loader_.reset();
  set_->adopt(std::make_unique<tenant_state>(tenant_, std::move(index_), options_, set_->policies()));
  return true;
}

bool state_loader::feed(std::string_view chunk, std::string* error) {
  if (failed_) return fail(error, "snapshot: an earlier chunk was invalid");
  auto bad = [&](std::string why) {
    failed_ = true;
    return fail(error, std::move(why));
  };
  if (version_ == 0) {
    // The header is always a chunk of its own.
    if (chunk.size() < sizeof kMagic + 12 || std::memcmp(chunk.data(), kMagic, sizeof kMagic) != 0)
      return bad("snapshot header: bad magic");
    const auto version = static_cast<std::uint32_t>(get_le(chunk.data() + 8, 4));
    if (version < 1 || version > kVersion)
      return bad("snapshot header: unsupported version " + std::to_string(version));
    const std::uint64_t len = get_le(chunk.data() + 12, 8);
    const std::size_t clock_bytes = version >= 4 ? 8 : 0;
    if (len > chunk.size() || chunk.size() != sizeof kMagic + 12 + len + clock_bytes)
      return bad("snapshot header: policy length does not match the chunk");
    policy_json_.assign(chunk.data() + sizeof kMagic + 12, len);
    if (clock_bytes > 0)
      set_->set_effective_time(
          static_cast<index::micros>(get_le(chunk.data() + sizeof kMagic + 12 + len, 8)));
    auto store = apply_policy_record(policy::policy_store(options_.default_ttl), policy_json_);
    if (!store.has_value()) return bad("snapshot policy set: " + store.error());
    set_->set_policies(std::move(store).value());
    version_ = version;
    if (version_ == 1) {
      // One combined index in the stream: each tenant is loaded into an index of its own,
      // under its policy and quota (policies are not in the index bytes).
      loader_ = std::make_unique<index::snapshot_loader>(
          [this](std::string_view tenant) -> index::tenant_index* {
            const std::string name(tenant);
            auto idx = std::make_unique<index::tenant_index>(
                name, tenant_index_options(options_, set_->facts().get()));
            idx->set_policy(set_->policies()->resolve(name));
            idx->set_quota(set_->policies()->quota(name));
            v1_tenants_.emplace_back(name, std::move(idx));
            return v1_tenants_.back().second.get();
          });
    }
    return true;
  }
  if (version_ == 1) {
    if (!loader_->feed(chunk, error)) return bad(error ? *error : "snapshot: bad index chunk");
    return true;
  }
  if (chunk.empty()) return bad("snapshot: empty chunk");
  const std::string_view body = chunk.substr(1);
  if (chunk[0] == kStoreTag) {
    if (version_ < 3 || loader_ || body.size() < 4)
      return bad("snapshot: misplaced or short store chunk");
    const auto kind = static_cast<std::uint32_t>(get_le(body.data(), 4));
    proto::decoded_record rec;
    if (kind == static_cast<std::uint32_t>(proto::record_kind::topology)) {
      rec.payload = proto::topology_record{std::string(body.substr(4))};
    } else if (kind == static_cast<std::uint32_t>(proto::record_kind::templates)) {
      rec.payload = proto::templates_record{std::string(body.substr(4))};
    } else {
      return bad("snapshot: store chunk of unknown kind " + std::to_string(kind));
    }
    std::string why;
    if (!apply_store_record(*set_->stores(), rec, &why)) return bad("snapshot " + why);
    return true;
  }
  if (chunk[0] == kTenantTag) {
    if (!finish_tenant(error)) return bad("snapshot tenant " + tenant_ + ": " + (error ? *error : ""));
    tenant_.assign(body.data(), body.size());
    index_ = std::make_unique<index::tenant_index>(tenant_,
                                                   tenant_index_options(options_, set_->facts().get()));
    loader_ = std::make_unique<index::snapshot_loader>(*index_);
    return true;
  }
  if (chunk[0] != kDataTag || !loader_) return bad("snapshot: chunk outside a tenant section");
  if (!loader_->feed(body, error))
    return bad("snapshot tenant " + tenant_ + ": " + (error ? *error : ""));
  return true;
}

std::unique_ptr<tenant_set> state_loader::finish(std::string* error) {
  if (failed_) {
    fail(error, "snapshot: an earlier chunk was invalid");
    return nullptr;
  }
  if (version_ == 0) {
    fail(error, "snapshot has no header");
    return nullptr;
  }
  if (version_ == 1) {
    if (!loader_->finish(error)) return nullptr;
    loader_.reset();
    for (auto& [name, idx] : v1_tenants_)
      set_->adopt(std::make_unique<tenant_state>(name, std::move(idx), options_, set_->policies()));
    v1_tenants_.clear();
    return std::move(set_);
  }
  std::string why;
  if (!finish_tenant(&why)) {
    fail(error, "snapshot tenant " + tenant_ + ": " + why);
    return nullptr;
  }
  return std::move(set_);
}

}  // namespace ic::state
