// A cache of prometheus-cpp series by label values, for metrics updated on every request.
// `Family<T>::Add(labels, args...)` builds a whole new metric (a histogram with every
// bucket) and a label map before it looks the labels up, so calling it per lookup costs a
// dozen allocations and frees; `get` finds an existing series without allocating (shared
// lock, label values compared as string_views) and calls Add only the first time.
// Families here never remove series, so the cached pointers stay valid.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include <prometheus/family.h>

namespace ic::server {

template <class T, std::size_t N>
class series_cache {
 public:
  using values = std::array<std::string_view, N>;

  series_cache(prometheus::Family<T>* family, std::array<const char*, N> label_names)
      : family_(family), names_(label_names) {}

  /// Returns the series of `label_values` (created with `args` the first time).
  template <class... Args>
  T& get(const values& label_values, const Args&... args) {
    {
      std::shared_lock<std::shared_mutex> g(mu_);
      auto it = series_.find(label_values);
      if (it != series_.end()) return *it->second;
    }
    std::unique_lock<std::shared_mutex> g(mu_);
    auto it = series_.find(label_values);
    if (it != series_.end()) return *it->second;
    prometheus::Labels labels;
    key k;
    for (std::size_t i = 0; i < N; ++i) {
      k[i] = std::string(label_values[i]);
      labels.emplace(names_[i], k[i]);
    }
    T& metric = family_->Add(labels, args...);
    series_.emplace(std::move(k), &metric);
    return metric;
  }

 private:
  using key = std::array<std::string, N>;
  /// Orders keys and looks them up by string_view values (no key built for a lookup).
  struct less {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      for (std::size_t i = 0; i < N; ++i) {
        const std::string_view x(a[i]), y(b[i]);
        if (x != y) return x < y;
      }
      return false;
    }
  };

  prometheus::Family<T>* family_;
  std::array<const char*, N> names_;
  std::shared_mutex mu_;
  std::map<key, T*, less> series_;
};

}  // namespace ic::server
