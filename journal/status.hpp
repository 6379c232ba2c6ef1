// Errors as values for the journal: a `status` (code + one-line message) and a `result<T>`
// that holds either a value or a non-ok status. Nothing in journal/ throws across its API.
//
//   ic::journal::result<std::uint64_t> seq = log->append(records);
//   if (!seq.ok()) {
//     if (seq.status().code() == ic::journal::errc::unavailable) { /* JOURNAL_UNAVAILABLE */ }
//     return seq.status();
//   }
//   use(*seq);
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ic::journal {

/// What went wrong; callers branch on the code, humans read the message.
enum class errc {
  ok = 0,
  /// The caller broke a precondition (bad sequence, unknown snapshot id, ...).
  invalid_argument,
  /// The thing asked for does not exist (no snapshot, missing key).
  not_found,
  /// Asked to read records that were truncated away (a snapshot older than the truncation).
  out_of_range,
  /// Stored bytes fail a checksum or structural check; never retried, never skipped.
  corruption,
  /// The directory is not a journal, or its format version is newer than this code reads.
  incompatible,
  /// Disk full, I/O error or RocksDB read-only background-error mode: retry later; the
  /// write did not happen.
  unavailable,
  /// A conditional append lost: another batch of the same scope was stored after the last
  /// one this replica saw (replicated log, spec/scaleout.md §3.4 policy pushes).
  conflict,
  /// Anything else (a bug or an unexpected RocksDB status).
  internal,
};

/// Returns the code's stable lower-case name ("unavailable", ...).
std::string_view to_string(errc c);

/// The outcome of an operation: ok, or a code with a one-line message.
class [[nodiscard]] status {
 public:
  /// Constructs ok.
  status() = default;
  /// Constructs a status with `code` and `message` (the message is ignored for ok).
  status(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  /// Returns an ok status.
  static status success() { return {}; }

  bool ok() const { return code_ == errc::ok; }
  errc code() const { return code_; }
  const std::string& message() const { return message_; }
  /// Returns "ok" or "<code>: <message>".
  std::string to_string() const;

 private:
  errc code_ = errc::ok;
  std::string message_;
};

/// Either a `T` or a non-ok `status`; `value()` on an error is a programming error.
template <class T>
class [[nodiscard]] result {
 public:
  /// Constructs a result holding `value`.
  result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  /// Constructs an error result; `error` must not be ok.
  result(journal::status error) : status_(std::move(error)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return value_.has_value(); }
  const journal::status& status() const { return status_; }

  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::optional<T> value_;
  journal::status status_;
};

}  // namespace ic::journal
