// The status vocabulary of the plain components (policy/, admin_json/, tokenizer/, ...): a
// minimal `expected`. A fallible function returns `result<T>` (the value, or an `error`), or
// `status` when it has no value (success, or an `error`); the message is one line fit for an
// HTTP 400 body or a startup "exit 2" line. Both are [[nodiscard]]: a dropped error does not
// compile silently. No exception escapes a component's API. Fail-open outcomes (NO_HINT,
// TIMEOUT, a probe stage that failed) are domain values, never errors.
//
//   auto d = ic::policy::parse_duration("90s");
//   if (!d) { std::cerr << d.error() << '\n'; return 2; }
//   use(*d);
//
//   status load_model(const json& m) { if (bad) return error{"model.type is not BPE"}; return {}; }
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

/// Success (default-constructed) or an `error`; test with `ok()` / `operator bool`.
class [[nodiscard]] status {
 public:
  /// Success.
  status() = default;
  /// Wraps an error.
  status(::ic::policy::error e) : failed_(true), message_(std::move(e.message)) {}  // NOLINT

  /// Returns true on success.
  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }

  /// Returns the error message; precondition: `!ok()`.
  const std::string& error() const {
    assert(!ok());
    return message_;
  }

 private:
  bool failed_ = false;
  std::string message_;
};

}  // namespace ic::policy
