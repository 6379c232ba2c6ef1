#include "journal/jetstream/replica_duties.hpp"

#include <algorithm>

#include "journal/format.hpp"
#include "journal/record_log.hpp"

namespace ic::journal::jetstream {
namespace {

constexpr std::string_view blob_magic = "ICSB";
constexpr std::uint32_t blob_version = 1;
constexpr std::size_t blob_header = 4 + 4 + 8;

}  // namespace

std::string encode_snapshot_blob(std::uint64_t covering_position,
                                 const std::vector<std::string>& chunks) {
  std::size_t size = blob_header;
  for (const auto& c : chunks) size += 4 + c.size();
  std::string out;
  out.reserve(size);
  out.append(blob_magic);
  format::put_be32(&out, blob_version);
  format::put_be64(&out, covering_position);
  for (const auto& c : chunks) append_blob_chunk(&out, c);
  return out;
}

void append_blob_chunk(std::string* blob, std::string_view chunk) {
  format::put_be32(blob, static_cast<std::uint32_t>(chunk.size()));
  blob->append(chunk);
}

status decode_snapshot_blob(std::string_view blob, std::uint64_t* covering_position,
                            const std::function<status(std::string_view)>& on_chunk) {
  if (blob.size() < blob_header || blob.substr(0, 4) != blob_magic)
    return {errc::corruption, "shared snapshot: not an ICSB blob"};
  const std::uint32_t version = format::get_be32(blob.data() + 4);
  if (version != blob_version)
    return {errc::incompatible, "shared snapshot: blob version " + std::to_string(version) +
                                    " is newer than this build's " + std::to_string(blob_version)};
  *covering_position = format::get_be64(blob.data() + 8);
  std::size_t at = blob_header;
  while (at < blob.size()) {
    if (blob.size() - at < 4) return {errc::corruption, "shared snapshot: torn chunk frame"};
    const std::uint32_t len = format::get_be32(blob.data() + at);
    at += 4;
    if (blob.size() - at < len)
      return {errc::corruption, "shared snapshot: chunk of " + std::to_string(len) +
                                    " bytes past the end at offset " + std::to_string(at)};
    status s = on_chunk(blob.substr(at, len));
    if (!s.ok()) return s;
    at += len;
  }
  return {};
}

std::uint64_t needed_from(std::uint64_t position) {
  return std::max<std::uint64_t>(1, stream_seq_of(position + 1));
}

std::uint64_t not_needed_through(std::uint64_t position) { return needed_from(position) - 1; }

std::uint64_t purge_bound_of(std::optional<std::uint64_t> committed_covering,
                             std::optional<std::uint64_t> lowest_mark, std::uint64_t margin) {
  if (!committed_covering) return 0;
  const std::uint64_t low =
      lowest_mark ? std::min(*committed_covering, *lowest_mark) : *committed_covering;
  return low > margin ? low - margin : 0;
}

start_plan plan_start(std::optional<std::uint64_t> local_covering, std::uint64_t stream_first,
                      std::optional<std::uint64_t> manifest_covering) {
  // Everything below the stream's first sequence is gone (a never-written stream reports
  // 0 or 1; one purged empty reports last + 1). A state at position p needs needed_from(p).
  const std::uint64_t first = std::max<std::uint64_t>(1, stream_first);
  auto held = [&](std::uint64_t need) { return first <= need; };
  const bool shared_ok = manifest_covering && held(*manifest_covering + 1);
  start_plan p;
  if (local_covering && held(needed_from(*local_covering))) {
    p.source = start_source::local;
    return p;
  }
  p.gap = local_covering.has_value();
  if (shared_ok)
    p.source = start_source::shared;
  else
    p.source = !p.gap && held(1) ? start_source::stream : start_source::uncovered;
  return p;
}

std::optional<std::pair<std::string, std::uint64_t>> replica_holding_the_state(
    const std::vector<std::pair<std::string, std::uint64_t>>& marks, const std::string& self,
    std::uint64_t stream_first) {
  for (const auto& m : marks)
    if (m.first != self && m.second + 2 >= stream_first) return m;
  return std::nullopt;
}

lease_keeper::action lease_keeper::next(clock::time_point now) const {
  if (last_try_ && now - *last_try_ < every_) return action::none;
  return held_ ? action::renew : action::acquire;
}

void lease_keeper::acquired(const std::optional<lease>& got, clock::time_point now) {
  held_ = got;
  last_try_ = now;
}

void lease_keeper::renewed(const std::optional<lease>& got, clock::time_point now) {
  held_ = got;  // nullopt: lost, step down at once
  last_try_ = now;
}

void lease_keeper::failed(clock::time_point now) {
  held_.reset();
  last_try_ = now;
}

}  // namespace ic::journal::jetstream
