// The options of the server's tenant state, from its flags. Each default is written once,
// in the layer that owns the behaviour (index/), and derived here; the runtime embeds these
// options and the server's flag defaults read them.
#pragma once

#include <chrono>
#include <cstdint>

#include "index/index_types.hpp"
#include "index/fingerprint.hpp"

namespace ic::state {

/// Construction parameters of every tenant's state (from the server's flags).
struct state_options {
  /// `--max-index-entries`; 0 = unbounded. Default: index_options' (1,000,000).
  std::int64_t max_entries = index::index_options{}.max_entries;
  /// `--default-ttl`. Default: index_options' (30 min).
  std::chrono::nanoseconds default_ttl = index::index_options{}.default_ttl;
  /// `--engine-block-size`; <= 0 means the default. Default: index::default_block_size (16).
  int block_size = index::default_block_size;
};

}  // namespace ic::state
