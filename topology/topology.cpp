#include "topology/topology.hpp"

#include <algorithm>

namespace ic::topology {
namespace {

std::string normal_vendor(std::string_view v) {
  const auto b = v.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = v.find_last_not_of(" \t\r\n");
  std::string out(v.substr(b, e - b + 1));
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

const accelerator_type* type_of(const topology& t, const pool& p) {
  if (p.accelerator_type.empty()) return nullptr;
  for (const auto& a : t.accelerator_types) {
    if (a.name == p.accelerator_type) return &a;
  }
  return nullptr;
}

bool ascend_family(const std::string& v) { return v == "huawei" || v == "ascend"; }

}  // namespace

std::optional<std::string_view> derive_transport(const topology& t, const pool& prefill,
                                                 const pool& decode) {
  const accelerator_type* a = type_of(t, prefill);
  const accelerator_type* b = type_of(t, decode);
  if (a == nullptr || b == nullptr) return std::nullopt;
  if (!a->transport.empty() && a->transport == b->transport) {
    for (auto known : {transport::mooncake, transport::nixl, transport::direct}) {
      if (a->transport == known) return known;
    }
  }
  const std::string va = normal_vendor(a->vendor);
  const std::string vb = normal_vendor(b->vendor);
  if (va == "nvidia" && vb == "nvidia") return transport::nixl;
  if (ascend_family(va) && ascend_family(vb)) return transport::mooncake;
  return std::nullopt;
}

}  // namespace ic::topology
