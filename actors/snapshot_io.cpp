#include "actors/snapshot_io.hpp"

#include <cstring>

namespace ic::actors {
namespace {

constexpr char kMagic[8] = {'I', 'C', 'S', 'N', 'A', 'P', '0', '1'};
constexpr std::uint32_t kVersion = 1;

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

}  // namespace

bool write_state_snapshot(const index_state& state,
                          const std::function<bool(std::string_view)>& sink,
                          std::size_t chunk_bytes) {
  std::string header(kMagic, sizeof kMagic);
  put_le(header, kVersion, 4);
  const std::string policy = state.policies().to_bytes();
  put_le(header, policy.size(), 8);
  header += policy;
  if (!sink(header)) return false;
  return index::write_snapshot(state.index(), sink, chunk_bytes);
}

state_loader::state_loader(index_state_options options)
    : state_(std::make_shared<index_state>(options)),
      loader_(std::make_unique<index::snapshot_loader>(state_->mutable_index())) {}

bool state_loader::feed(std::string_view chunk, std::string* error) {
  if (header_seen_) return loader_->feed(chunk, error);
  // The header is always a chunk of its own.
  if (chunk.size() < sizeof kMagic + 12 || std::memcmp(chunk.data(), kMagic, sizeof kMagic) != 0) {
    if (error) *error = "snapshot header: bad magic";
    return false;
  }
  const std::uint32_t version = static_cast<std::uint32_t>(get_le(chunk.data() + 8, 4));
  if (version != kVersion) {
    if (error) *error = "snapshot header: unsupported version " + std::to_string(version);
    return false;
  }
  const std::uint64_t len = get_le(chunk.data() + 12, 8);
  if (chunk.size() != sizeof kMagic + 12 + len) {
    if (error) *error = "snapshot header: policy length does not match the chunk";
    return false;
  }
  policy_json_.assign(chunk.data() + sizeof kMagic + 12, len);
  header_seen_ = true;
  return true;
}

std::shared_ptr<index_state> state_loader::finish(std::string* error) {
  if (!header_seen_) {
    if (error) *error = "snapshot has no header";
    return nullptr;
  }
  if (!loader_->finish(error)) return nullptr;
  decoded_record policy;
  policy.payload = policy_record{policy_json_};
  auto out = state_->apply(policy);
  if (!out.ok) {
    if (error) *error = "snapshot policy set: " + out.error;
    return nullptr;
  }
  return std::move(state_);
}

}  // namespace ic::actors
