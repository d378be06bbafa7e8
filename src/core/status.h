// Status and Result<T>: how errors cross module boundaries (I/O, config, MPI,
// checkpoints). A Status is cheap when ok (no allocation). Messages start with
// the operation's name in brackets, e.g. "[ckpt] manifest checksum mismatch".
// Only main() turns an error into an exit code (bad input -> 2).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace crucible {

enum class Code { kOk = 0, kInvalidArgument, kNotFound, kCorrupt, kIo, kInternal, kUnavailable };

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(Code code, std::string msg) { return Status(code, std::move(msg)); }
  static Status invalid(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status not_found(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status corrupt(std::string msg) { return Status(Code::kCorrupt, std::move(msg)); }
  static Status io(std::string msg) { return Status(Code::kIo, std::move(msg)); }
  static Status internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool is_ok() const { return state_ == nullptr; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return state_ ? state_->first : Code::kOk; }
  const std::string& message() const {
    static const std::string empty;
    return state_ ? state_->second : empty;
  }

 private:
  Status(Code code, std::string msg)
      : state_(std::make_shared<std::pair<Code, std::string>>(code, std::move(msg))) {}
  std::shared_ptr<const std::pair<Code, std::string>> state_;
};

// Result<T>: a value or a non-ok Status (std::expected is C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {
    if (std::get<Status>(v_).is_ok()) {
      std::fprintf(stderr, "[core] Result constructed from an ok Status\n");
      std::abort();
    }
  }
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status ok_status;
    return is_ok() ? ok_status : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace crucible

#define CRUCIBLE_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::crucible::Status _st = (expr);            \
    if (!_st.is_ok()) return _st;               \
  } while (0)
