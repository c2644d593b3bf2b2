#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace ggflow::gguf {

namespace {
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
void put_str(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
}  // namespace

Writer::Writer(uint32_t version, uint64_t alignment) : version_(version), alignment_(alignment) {
  if (alignment != 32) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void Writer::set_scalar(const std::string& k, ValueType t, const void* p, size_t n) {
  std::vector<uint8_t> payload(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  for (auto& kv : kvs_)
    if (kv.key == k) { kv.type = t; kv.payload = std::move(payload); return; }
  kvs_.push_back({k, t, std::move(payload)});
}

#define GGFLOW_SETTER(fn, T, VT) \
  void Writer::fn(const std::string& k, T v) { set_scalar(k, ValueType::VT, &v, sizeof(v)); }
GGFLOW_SETTER(set_u8, uint8_t, UINT8)
GGFLOW_SETTER(set_i8, int8_t, INT8)
GGFLOW_SETTER(set_u16, uint16_t, UINT16)
GGFLOW_SETTER(set_i16, int16_t, INT16)
GGFLOW_SETTER(set_u32, uint32_t, UINT32)
GGFLOW_SETTER(set_i32, int32_t, INT32)
GGFLOW_SETTER(set_u64, uint64_t, UINT64)
GGFLOW_SETTER(set_i64, int64_t, INT64)
GGFLOW_SETTER(set_f32, float, FLOAT32)
GGFLOW_SETTER(set_f64, double, FLOAT64)
#undef GGFLOW_SETTER

void Writer::set_bool(const std::string& k, bool v) {
  const uint8_t b = v ? 1 : 0;
  set_scalar(k, ValueType::BOOL, &b, 1);
}

void Writer::set_str(const std::string& k, const std::string& v) {
  std::vector<uint8_t> p;
  put_str(p, v);
  set_scalar(k, ValueType::STRING, p.data(), p.size());
}

void Writer::set_arr_str(const std::string& k, const std::vector<std::string>& v) {
  std::vector<uint8_t> p;
  put<uint32_t>(p, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(p, v.size());
  for (const auto& s : v) put_str(p, s);
  set_scalar(k, ValueType::ARRAY, p.data(), p.size());
}

template <class E>
static std::vector<uint8_t> array_payload(ValueType t, const std::vector<E>& v) {
  std::vector<uint8_t> p;
  put<uint32_t>(p, static_cast<uint32_t>(t));
  put<uint64_t>(p, v.size());
  for (const E& e : v) put<E>(p, e);
  return p;
}

void Writer::set_arr_i32(const std::string& k, const std::vector<int32_t>& v) {
  auto p = array_payload(ValueType::INT32, v);
  set_scalar(k, ValueType::ARRAY, p.data(), p.size());
}
void Writer::set_arr_f32(const std::string& k, const std::vector<float>& v) {
  auto p = array_payload(ValueType::FLOAT32, v);
  set_scalar(k, ValueType::ARRAY, p.data(), p.size());
}
void Writer::set_arr_u8(const std::string& k, const std::vector<uint8_t>& v) {
  auto p = array_payload(ValueType::UINT8, v);
  set_scalar(k, ValueType::ARRAY, p.data(), p.size());
}
void Writer::set_arr_bool(const std::string& k, const std::vector<uint8_t>& v) {
  auto p = array_payload(ValueType::BOOL, v);  // one byte per bool, 0 or 1
  set_scalar(k, ValueType::ARRAY, p.data(), p.size());
}

Status Writer::add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne,
                          std::span<const uint8_t> data) {
  const TypeTraits& tr = traits(type);
  if (ne.empty() || ne.size() > 4) return make_error(fmt::format("tensor '{}': {} dims, expected 1..4", name, ne.size()));
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  if (ne[0] % tr.block_size != 0)
    return make_error(fmt::format("tensor '{}': ne[0] = {} is not a multiple of the {} block size", name, ne[0], tr.name));
  const uint64_t bytes = row_bytes(type, n);
  if (bytes != data.size())
    return make_error(fmt::format("tensor '{}': {} {} elements need {} bytes, got {}", name, n, tr.name, bytes, data.size()));
  for (const auto& t : tensors_)
    if (t.name == name) return make_error(fmt::format("tensor '{}' added twice", name));
  tensors_.push_back({name, type, std::move(ne), std::vector<uint8_t>(data.begin(), data.end())});
  return {};
}

Status Writer::add_tensor_f32(const std::string& name, std::vector<uint64_t> ne, std::span<const float> data) {
  return add_tensor(name, GgmlType::F32, std::move(ne),
                    {reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float)});
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out;
  out.insert(out.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(out, version_);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kvs_.size());
  for (const auto& kv : kvs_) {
    put_str(out, kv.key);
    put<uint32_t>(out, static_cast<uint32_t>(kv.type));
    out.insert(out.end(), kv.payload.begin(), kv.payload.end());
  }
  auto align = [&](uint64_t x) { return x + (alignment_ - x % alignment_) % alignment_; };
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_str(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(out, d);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset = align(offset + t.data.size());
  }
  out.resize(align(out.size()), 0);
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align(out.size()), 0);
  }
  return out;
}

Status Writer::write(const std::string& path) const {
  const auto bytes = to_bytes();
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return make_error("cannot write '" + path + "': " + std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return make_error("short write to '" + path + "'", "check free disk space");
  return {};
}

}  // namespace ggflow::gguf
