#include "ir/dim.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace ggflow::ir {
namespace {
std::atomic<uint32_t> g_next{1};
std::mutex g_mu;
std::unordered_map<uint32_t, std::string>& names() {
  static std::unordered_map<uint32_t, std::string> m;
  return m;
}
}  // namespace

Symbol Symbol::named(std::string_view name) {
  Symbol s(g_next.fetch_add(1));
  std::lock_guard<std::mutex> lock(g_mu);
  names()[s.id_] = std::string(name);
  return s;
}

Symbol Symbol::fresh() { return Symbol(g_next.fetch_add(1)); }

std::string Symbol::name() const {
  if (id_ == 0) return "null";
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = names().find(id_);
    if (it != names().end()) return it->second;
  }
  return "s" + std::to_string(id_);
}

std::string Dim::str() const { return is_static() ? std::to_string(value_) : "?" + sym_.name(); }

Shape Shape::from(const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d : dims) s.dims_.push_back(Dim(d));
  return s;
}

bool Shape::is_static() const {
  if (!rank_known_) return false;
  for (const Dim& d : dims_)
    if (d.is_dynamic()) return false;
  return true;
}

std::vector<int64_t> Shape::to_vector() const {
  std::vector<int64_t> v;
  for (const Dim& d : dims_) v.push_back(d.value());
  return v;
}

std::string Shape::str() const {
  if (!rank_known_) return "[...]";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) s += (i ? "," : "") + dims_[i].str();
  return s + "]";
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

}  // namespace ggflow::ir
