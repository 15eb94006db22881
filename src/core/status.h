// Error policy (one for the whole code base):
//  * Status / Result<T> for failures a user can cause or fix: bad files, bad requests,
//    budgets. The message says what went wrong and what to do about it.
//  * HYPIC_CHECK for programmer errors (broken invariants); it aborts with file:line.
//  * Exceptions are not used across module boundaries.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace hypic {

enum class StatusCode { kOk = 0, kInvalidArgument, kNotFound, kIoError, kCorrupt, kUnsupported,
                        kOutOfRange, kResourceExhausted, kInternal, kCancelled,
                        kUnavailable };

const char* status_code_name(StatusCode c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string to_string() const;
  // Prepends context ("loading model.safetensors: ...").
  Status with_context(const std::string& ctx) const {
    if (is_ok()) return *this;
    return {code_, ctx + ": " + msg_};
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string msg_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or an error Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}                   // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {               // NOLINT
    if (std::get<Status>(v_).is_ok()) std::abort();   // an ok Status carries no value
  }
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace hypic

#define HYPIC_CONCAT_INNER(a, b) a##b
#define HYPIC_CONCAT(a, b) HYPIC_CONCAT_INNER(a, b)

// Return early with the error of a Status expression.
#define HYPIC_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::hypic::Status _st = (expr);                \
    if (!_st.is_ok()) return _st;                \
  } while (0)

// `HYPIC_ASSIGN_OR_RETURN(auto x, f());` unwraps a Result or returns its error.
#define HYPIC_ASSIGN_OR_RETURN(lhs, expr) \
  HYPIC_ASSIGN_OR_RETURN_IMPL(HYPIC_CONCAT(_res_, __LINE__), lhs, expr)
#define HYPIC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

// Programmer-error assertion, active in every build type.
#define HYPIC_CHECK(cond, ...)                                                         \
  do {                                                                                 \
    if (!(cond)) ::hypic::check_failed(__FILE__, __LINE__, #cond, std::string{__VA_ARGS__}); \
  } while (0)
