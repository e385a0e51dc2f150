// Status and Result<T>: the one error type of every fallible call in trace.
//
// Ownership: values; a Status owns its message. Thread safety: immutable after
// construction, safe to share. Errors: no exceptions cross module borders; a
// failing call returns a non-ok Status whose message is one line that names the
// file, run id, tensor or field concerned and what was wrong.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace trace {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad flag, bad request field)
  kNotFound,         // unknown run id, missing file, missing tensor
  kAlreadyExists,
  kCorruption,          // a file or row that exists but cannot be decoded
  kUnsupported,         // a valid input we do not handle (architecture, dtype, construct)
  kIOError,             // the OS said no (open, read, write, mmap, socket)
  kFailedPrecondition,  // state does not allow it (store from a newer schema, ...)
  kUnavailable,         // a device or service that is not there (no GPU, upstream down)
  kInternal,            // a bug in trace
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "not found: run 01J... does not exist" style, one line.
  std::string ToString() const;

  // Prefixes context: Status(kNotFound, "x").WithContext("loading y") -> "loading y: x".
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status AlreadyExists(std::string m) {
  return {StatusCode::kAlreadyExists, std::move(m)};
}
inline Status Corruption(std::string m) {
  return {StatusCode::kCorruption, std::move(m)};
}
inline Status Unsupported(std::string m) {
  return {StatusCode::kUnsupported, std::move(m)};
}
inline Status IOError(std::string m) {
  return {StatusCode::kIOError, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}
inline Status Internal(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}

// Result<T>: a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace trace

#define TRACE_CONCAT_INNER_(a, b) a##b
#define TRACE_CONCAT_(a, b) TRACE_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when `expr` is not ok.
#define TRACE_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::trace::Status _trace_st = (expr);    \
    if (!_trace_st.ok()) return _trace_st; \
  } while (0)

// `TRACE_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define TRACE_ASSIGN_OR_RETURN(lhs, expr) \
  TRACE_ASSIGN_OR_RETURN_IMPL_(TRACE_CONCAT_(_trace_res_, __LINE__), lhs, expr)
#define TRACE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
