// A value-or-error return type for the policy component (a minimal `expected`).
//
// Every fallible function in `policy/` returns `result<T>`: either the value, or an `error`
// whose message is one line fit for an HTTP 400 body or a startup "exit 2" line. No
// exception escapes the component's API.
//
//   auto d = ic::policy::parse_duration("90s");
//   if (!d) { std::cerr << d.error() << '\n'; return 2; }
//   use(*d);
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ic::policy {

/// A failure reason: one human-readable line, no trailing newline.
struct error {
  std::string message;
};

/// Holds either a `T` or an `error`; test with `has_value()` / `operator bool`.
template <class T>
class [[nodiscard]] result {
 public:
  /// Wraps a value.
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit on purpose
  /// Wraps an error.
  result(::ic::policy::error e) : v_(std::in_place_index<1>, std::move(e)) {}  // NOLINT

  /// Returns true when a value is held.
  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  /// Returns the value; precondition: `has_value()`.
  const T& value() const& { assert(has_value()); return *std::get_if<0>(&v_); }
  /// Returns the value; precondition: `has_value()`.
  T& value() & { assert(has_value()); return *std::get_if<0>(&v_); }
  /// Moves the value out; precondition: `has_value()`.
  T&& value() && { assert(has_value()); return std::move(*std::get_if<0>(&v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  /// Returns the error message; precondition: `!has_value()`.
  const std::string& error() const {
    assert(!has_value());
    return std::get_if<1>(&v_)->message;
  }

 private:
  std::variant<T, ::ic::policy::error> v_;
};

}  // namespace ic::policy
