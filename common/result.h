// Error model shared by the launcher, agent and rendezvous (see docs/architecture.md).
//
// Expected failures (bad input, a peer gone, a timeout, a child that died) travel as values:
// `Status` when there is nothing to return, `Result<T>` otherwise. Every message says what
// happened, where, and, when it helps, what to do. Broken invariants are not errors: they
// crash loudly (assert / std::abort). Exceptions do not cross these components' APIs.
#pragma once

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace ddprun {

// What kind of failure a Status holds, so that callers decide by kind, never by message text
// (leveldb's Status::IsNotFound() style). Pick the most specific kind that fits.
enum class ErrorKind {
  kOk,
  kFailed,           // anything not covered below (an operation that did not work)
  kInvalidArgument,  // bad input from a user: a flag, a config file, a request's values
  kMalformed,        // bytes from a peer that break the protocol (framing, limits, syntax)
  kClosed,           // the peer hung up or the connection ended
  kTimedOut,         // a deadline passed
  kUnavailable,      // a peer or resource cannot be reached (connection refused, lost)
  kNotFound,         // something named does not exist
  kRefused,          // the peer understood and said no (versions, limits, authentication)
  kExcluded,         // the peer keeps this node out for now (a rendezvous refusing a host that
                     // left a job unfit to train, for its cool-down): exit 69, not a failure
};

// The outcome of an operation that returns nothing. Cheap to copy; ok() when default-built.
class [[nodiscard]] Status {
 public:
  Status() = default;
  // A failure of kind kFailed; the named constructors below give the other kinds.
  static Status error(std::string message) {
    return Status(ErrorKind::kFailed, std::move(message));
  }
  static Status error(ErrorKind kind, std::string message) {
    assert(kind != ErrorKind::kOk && "an error needs a failure kind");
    return Status(kind, std::move(message));
  }
  static Status invalid_argument(std::string m) {
    return error(ErrorKind::kInvalidArgument, std::move(m));
  }
  static Status malformed(std::string m) { return error(ErrorKind::kMalformed, std::move(m)); }
  static Status closed(std::string m) { return error(ErrorKind::kClosed, std::move(m)); }
  static Status timed_out(std::string m) { return error(ErrorKind::kTimedOut, std::move(m)); }
  static Status unavailable(std::string m) { return error(ErrorKind::kUnavailable, std::move(m)); }
  static Status not_found(std::string m) { return error(ErrorKind::kNotFound, std::move(m)); }
  static Status refused(std::string m) { return error(ErrorKind::kRefused, std::move(m)); }
  static Status excluded(std::string m) { return error(ErrorKind::kExcluded, std::move(m)); }

  bool ok() const { return kind_ == ErrorKind::kOk; }
  explicit operator bool() const { return ok(); }
  ErrorKind kind() const { return kind_; }
  bool is_invalid_argument() const { return kind_ == ErrorKind::kInvalidArgument; }
  bool is_malformed() const { return kind_ == ErrorKind::kMalformed; }
  bool is_closed() const { return kind_ == ErrorKind::kClosed; }
  bool is_timed_out() const { return kind_ == ErrorKind::kTimedOut; }
  bool is_unavailable() const { return kind_ == ErrorKind::kUnavailable; }
  bool is_not_found() const { return kind_ == ErrorKind::kNotFound; }
  bool is_refused() const { return kind_ == ErrorKind::kRefused; }
  bool is_excluded() const { return kind_ == ErrorKind::kExcluded; }
  // The human-readable error; empty when ok().
  const std::string& message() const { return message_; }

  // Adds context in front of the message: "reading config: <message>". Keeps the kind.
  Status with_context(const std::string& context) const {
    return ok() ? *this : Status(kind_, context + ": " + message_);
  }
  // The same failure seen as another kind, by a caller that knows what it means to its own
  // caller (a file that a flag names and that cannot be read: the user's input). ok() stays ok.
  Status with_kind(ErrorKind kind) const {
    assert(kind != ErrorKind::kOk && "an error needs a failure kind");
    return ok() ? *this : Status(kind, message_);
  }

 private:
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  ErrorKind kind_ = ErrorKind::kOk;
  std::string message_;
};

namespace detail {
// value() of an error Result: a programming error, reported with the error in every build
// type (an assert would vanish from Release builds and leave std::bad_variant_access).
[[noreturn]] inline void value_of_error(const Status& error) {
  (void)std::fprintf(stderr, "fatal: Result::value() called on an error: %s\n",
                     error.message().c_str());
  std::abort();
}
}  // namespace detail

// A value of T or an error Status. Accessing value() of an error is a programming error: it
// aborts with the error's message.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design, like expected<T>
  Result(Status error) : state_(std::move(error)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(state_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    check_value();
    return std::get<T>(state_);
  }
  const T& value() const& {
    check_value();
    return std::get<T>(state_);
  }
  T&& value() && {
    check_value();
    return std::get<T>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The error; an ok Status when this holds a value.
  Status status() const { return ok() ? Status() : std::get<Status>(state_); }
  const std::string& error_message() const {
    static const std::string empty;
    return ok() ? empty : std::get<Status>(state_).message();
  }

 private:
  void check_value() const {
    if (!ok()) detail::value_of_error(std::get<Status>(state_));
  }
  std::variant<T, Status> state_;
};

}  // namespace ddprun
