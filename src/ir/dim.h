// Dimensions and shapes with dynamic lengths.
//
// A Dim is either a static length (>= 0) or dynamic. A dynamic Dim always carries a Symbol: two
// dynamic dims with the same symbol are known to be the same length at run time (the token count
// `T` flowing through a graph), two with different symbols are not known to be equal. Symbols
// are process-wide ids with a display name ("T", "B"); `Symbol::fresh()` makes an anonymous one.
// A Shape is a list of Dims, or of dynamic rank (nothing known). Shapes print outermost first:
// `[1,?T,576]`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggflow::ir {

class Symbol {
 public:
  Symbol() = default;                              // the null symbol (id 0)
  static Symbol named(std::string_view name);      // a new symbol with a display name
  static Symbol fresh();                           // a new anonymous symbol ("s17")
  uint32_t id() const { return id_; }
  bool valid() const { return id_ != 0; }
  std::string name() const;
  friend bool operator==(Symbol a, Symbol b) { return a.id_ == b.id_; }
  friend bool operator<(Symbol a, Symbol b) { return a.id_ < b.id_; }

 private:
  explicit Symbol(uint32_t id) : id_(id) {}
  uint32_t id_ = 0;
};

class Dim {
 public:
  Dim() : Dim(Symbol::fresh()) {}                  // dynamic, anonymous
  Dim(int64_t v) : value_(v) {}                    // static  NOLINT(implicit)
  Dim(int v) : value_(v) {}                        // static  NOLINT(implicit)
  Dim(Symbol s) : value_(-1), sym_(s) {}           // dynamic with symbol  NOLINT(implicit)
  static Dim dynamic() { return Dim(Symbol::fresh()); }

  bool is_static() const { return value_ >= 0; }
  bool is_dynamic() const { return value_ < 0; }
  int64_t value() const { return value_; }         // -1 when dynamic
  Symbol symbol() const { return sym_; }
  bool is(int64_t v) const { return value_ == v; }  // static and equal to v
  std::string str() const;                         // "576" or "?T"
  // Known to be the same length: equal static values, or the same symbol.
  friend bool operator==(const Dim& a, const Dim& b) {
    return a.value_ == b.value_ && (a.value_ >= 0 || a.sym_ == b.sym_);
  }

 private:
  int64_t value_;
  Symbol sym_;
};

class Shape {
 public:
  Shape() = default;                               // rank 0 (a scalar)
  Shape(std::initializer_list<Dim> dims) : dims_(dims) {}
  explicit Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {}
  static Shape from(const std::vector<int64_t>& dims);
  static Shape dynamic_rank() { Shape s; s.rank_known_ = false; return s; }

  bool rank_known() const { return rank_known_; }
  size_t rank() const { return dims_.size(); }     // 0 when the rank is unknown
  bool is_static() const;
  const Dim& operator[](size_t i) const { return dims_[i]; }
  Dim& operator[](size_t i) { return dims_[i]; }
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& dims() { return dims_; }
  std::vector<int64_t> to_vector() const;          // static shapes only (-1 for dynamic dims)
  std::string str() const;                         // "[1,?T,576]" or "[...]"
  friend bool operator==(const Shape& a, const Shape& b) {
    return a.rank_known_ == b.rank_known_ && a.dims_ == b.dims_;
  }

 private:
  std::vector<Dim> dims_;
  bool rank_known_ = true;
};

int64_t product(const std::vector<int64_t>& dims);

}  // namespace ggflow::ir
