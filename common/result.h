// Error model shared by the launcher, agent and rendezvous (see docs/architecture.md).
//
// Expected failures (bad input, a peer gone, a timeout, a child that died) travel as values:
// `Status` when there is nothing to return, `Result<T>` otherwise. Every message says what
// happened, where, and, when it helps, what to do. Broken invariants are not errors: they
// crash loudly (assert / std::abort). Exceptions do not cross these components' APIs.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ddprun {

// The outcome of an operation that returns nothing. Cheap to copy; ok() when default-built.
class Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  // The human-readable error; empty when ok().
  const std::string& message() const { return message_; }

  // Adds context in front of the message: "reading config: <message>".
  Status with_context(const std::string& context) const {
    return ok() ? *this : Status(context + ": " + message_);
  }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

// A value of T or an error Status. Accessing value() of an error is a programming error.
template <class T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design, like expected<T>
  Result(Status error) : state_(std::move(error)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(state_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<T>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The error; an ok Status when this holds a value.
  Status status() const { return ok() ? Status() : std::get<Status>(state_); }
  const std::string& error_message() const {
    static const std::string kEmpty;
    return ok() ? kEmpty : std::get<Status>(state_).message();
  }

 private:
  std::variant<T, Status> state_;
};

}  // namespace ddprun
