// Error values for every boundary of ggflow (files, HTTP, CLI). Library code never exits or
// aborts on bad input: it returns an Error that says what is wrong and how to fix it.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ggflow {

struct Error {
  std::string what;  // what is wrong, with context (field, byte offset, limit, node name, ...)
  std::string hint;  // how to fix it; may be empty

  std::string str() const { return hint.empty() ? what : what + " (hint: " + hint + ")"; }
};

inline Error make_error(std::string what, std::string hint = {}) {
  return Error{std::move(what), std::move(hint)};
}

// A value or an Error. `if (!r) return r.error();` propagates; `*r` / `r.value()` read the value.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace ggflow
