// GGUF parsing with every size checked before use. The Parser keeps a cursor into the bytes;
// each read names the field it reads, so an error can say which field, at which byte offset,
// broke which limit. Arithmetic on sizes from the file uses the checked helpers below.
#include "gguf/file.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "gguf/bytes.h"

namespace ggflow::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxAlignment = 1u << 20;
constexpr uint64_t kMaxNameLength = 1024;  // tensor names (GGML uses 64; be lenient, but bounded)
constexpr uint64_t kMaxElements = uint64_t{1} << 62;

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }

const char* kDamaged = "the file is damaged or truncated; download or convert it again";

}  // namespace

class Parser {
 public:
  static Result<File> parse(std::shared_ptr<const Bytes> bytes, std::string path, const ParseLimits& limits);

 private:
  Parser(File& f, std::span<const uint8_t> b, const ParseLimits& l) : f_(f), b_(b), lim_(l) {}

  Status run() {
    if (b_.size() < 4 || std::memcmp(b_.data(), "GGUF", 4) != 0) {
      return make_error(fmt::format("not a GGUF file: the 4 bytes at byte offset 0 are not the magic \"GGUF\" "
                                    "(file size {} bytes)", b_.size()),
                        "pass a .gguf model file");
    }
    pos_ = 4;
    uint32_t version;
    if (auto s = read(version, "version"); !s) return s;
    if (version == 1)
      return make_error("GGUF version 1 is not supported (field 'version' at byte offset 4)",
                        "convert the model again with a current llama.cpp/gguf tool (v3)");
    if ((version & 0xFFFF) == 0 && version != 0)
      return make_error(fmt::format("GGUF version field at byte offset 4 is {:#x}: this looks like a big-endian file", version),
                        "only little-endian GGUF files are supported");
    if (version != 2 && version != 3)
      return make_error(fmt::format("unsupported GGUF version {} (field 'version' at byte offset 4; "
                                    "supported: 2 and 3)", version), kDamaged);
    f_.version_ = version;

    uint64_t n_tensors, n_kv;
    const uint64_t at_nt = pos_;
    if (auto s = read(n_tensors, "n_tensors"); !s) return s;
    const uint64_t at_nkv = pos_;
    if (auto s = read(n_kv, "n_kv"); !s) return s;
    // A key/value needs at least 8 (key length) + 4 (type) + 1 (smallest value) bytes, a tensor
    // info at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
    if (n_kv > remaining() / 13)
      return limit_error("n_kv", at_nkv, n_kv, remaining() / 13, "key/values that fit in the rest of the file");
    if (n_tensors > remaining() / 24)
      return limit_error("n_tensors", at_nt, n_tensors, remaining() / 24, "tensor infos that fit in the rest of the file");

    f_.kvs_.reserve(n_kv);
    for (uint64_t k = 0; k < n_kv; ++k)
      if (auto s = read_kv(k); !s) return s;
    if (auto s = read_alignment(); !s) return s;

    f_.tensors_.reserve(n_tensors);
    for (uint64_t t = 0; t < n_tensors; ++t)
      if (auto s = read_tensor_info(t); !s) return s;

    uint64_t data = align_up(pos_, f_.alignment_);
    if (data > b_.size()) {
      if (n_tensors != 0)
        return make_error(fmt::format("data section starts at byte offset {} (after tensor infos, aligned to {}) "
                                      "but the file has only {} bytes", data, f_.alignment_, b_.size()), kDamaged);
      data = b_.size();  // vocabulary-only files may end right after the header
    }
    f_.data_offset_ = data;
    return check_tensor_ranges();
  }

  uint64_t remaining() const { return b_.size() - pos_; }
  static uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

  Error limit_error(std::string_view field, uint64_t at, uint64_t value, uint64_t limit, std::string_view what) {
    return make_error(fmt::format("field '{}' at byte offset {} is {}, over the limit {} ({})",
                                  field, at, value, limit, what), kDamaged);
  }

  Status need(uint64_t n, std::string_view field) {
    if (n > remaining())
      return make_error(fmt::format("field '{}' at byte offset {} needs {} bytes but only {} remain "
                                    "(file size {})", field, pos_, n, remaining(), b_.size()), kDamaged);
    return {};
  }

  template <class T>
  Status read(T& out, std::string_view field) {
    if (auto s = need(sizeof(T), field); !s) return s;
    std::memcpy(&out, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string_view& out, std::string_view field) {
    uint64_t n;
    const uint64_t at = pos_;
    if (auto s = read(n, field); !s) return s;
    if (n > lim_.max_string)
      return limit_error(std::string(field) + ".length", at, n, lim_.max_string, "maximum string length");
    if (n > remaining())
      return limit_error(std::string(field) + ".length", at, n, remaining(), "bytes left in the file");
    out = std::string_view(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return {};
  }

  Status read_value(Value& v, ValueType type, const std::string& field, uint32_t depth) {
    v.type = type;
    switch (type) {
      case ValueType::UINT8: { uint8_t x; if (auto s = read(x, field); !s) return s; v.u = x; return {}; }
      case ValueType::INT8: { int8_t x; if (auto s = read(x, field); !s) return s; v.i = x; return {}; }
      case ValueType::UINT16: { uint16_t x; if (auto s = read(x, field); !s) return s; v.u = x; return {}; }
      case ValueType::INT16: { int16_t x; if (auto s = read(x, field); !s) return s; v.i = x; return {}; }
      case ValueType::UINT32: { uint32_t x; if (auto s = read(x, field); !s) return s; v.u = x; return {}; }
      case ValueType::INT32: { int32_t x; if (auto s = read(x, field); !s) return s; v.i = x; return {}; }
      case ValueType::UINT64: return read(v.u, field);
      case ValueType::INT64: return read(v.i, field);
      case ValueType::FLOAT32: { float x; if (auto s = read(x, field); !s) return s; v.f = x; return {}; }
      case ValueType::FLOAT64: return read(v.f, field);
      case ValueType::BOOL: {
        uint8_t x;
        const uint64_t at = pos_;
        if (auto s = read(x, field); !s) return s;
        if (x > 1) return limit_error(field, at, x, 1, "a bool is 0 or 1");
        v.u = x;
        return {};
      }
      case ValueType::STRING: return read_string(v.s, field);
      case ValueType::ARRAY: return read_array(v, field, depth);
    }
    return make_error(fmt::format("field '{}' has unknown value type {}", field, static_cast<uint32_t>(type)), kDamaged);
  }

  Status read_array(Value& v, const std::string& field, uint32_t depth) {
    if (depth >= lim_.max_array_depth)
      return limit_error(field, pos_, depth + 1, lim_.max_array_depth, "nesting depth of arrays");
    uint32_t elem;
    const uint64_t at_type = pos_;
    if (auto s = read(elem, field + ".type"); !s) return s;
    if (elem >= kValueTypeCount)
      return limit_error(field + ".type", at_type, elem, kValueTypeCount - 1, "known value types");
    uint64_t n;
    const uint64_t at_n = pos_;
    if (auto s = read(n, field + ".length"); !s) return s;
    if (n > lim_.max_array) return limit_error(field + ".length", at_n, n, lim_.max_array, "maximum array length");
    auto a = std::make_shared<Array>();
    a->elem = static_cast<ValueType>(elem);
    a->size = n;
    const size_t esize = value_type_size(a->elem);
    // The smallest encoding of one element: scalars their size, a string its u64 length, a
    // nested array its u32 type + u64 length.
    const uint64_t min_elem = esize ? esize : (a->elem == ValueType::STRING ? 8 : 12);
    if (n > remaining() / min_elem)
      return limit_error(field + ".length", at_n, n, remaining() / min_elem, "elements that fit in the rest of the file");
    if (esize) {
      a->raw = b_.data() + pos_;
      if (a->elem == ValueType::BOOL) {
        for (uint64_t k = 0; k < n; ++k)
          if (a->raw[k] > 1) return limit_error(field + "[" + std::to_string(k) + "]", pos_ + k, a->raw[k], 1, "a bool is 0 or 1");
      }
      pos_ += n * esize;
    } else if (a->elem == ValueType::STRING) {
      a->strings.resize(n);
      for (uint64_t k = 0; k < n; ++k)
        if (auto s = read_string(a->strings[k], field); !s) return s;
    } else {
      a->arrays.resize(n);
      for (uint64_t k = 0; k < n; ++k)
        if (auto s = read_value(a->arrays[k], ValueType::ARRAY, field, depth + 1); !s) return s;
    }
    v.arr = std::move(a);
    return {};
  }

  Status read_kv(uint64_t index) {
    KeyValue kv;
    kv.offset = pos_;
    const std::string field = fmt::format("kv[{}].key", index);
    if (auto s = read_string(kv.key, field); !s) return s;
    if (kv.key.empty()) return make_error(fmt::format("{} at byte offset {} is empty", field, kv.offset), kDamaged);
    const std::string vfield = fmt::format("kv[{}] '{}'", index, kv.key);
    uint32_t type;
    const uint64_t at_type = pos_;
    if (auto s = read(type, vfield + ".type"); !s) return s;
    if (type >= kValueTypeCount)
      return limit_error(vfield + ".type", at_type, type, kValueTypeCount - 1, "known value types");
    if (auto s = read_value(kv.value, static_cast<ValueType>(type), vfield, 0); !s) return s;
    if (f_.kv_index_.count(kv.key))
      return make_error(fmt::format("duplicate metadata key '{}' at byte offset {}", kv.key, kv.offset), kDamaged);
    f_.kv_index_.emplace(kv.key, f_.kvs_.size());
    f_.kvs_.push_back(std::move(kv));
    return {};
  }

  Status read_alignment() {
    const Value* v = f_.find("general.alignment");
    if (!v) return {};
    const auto& kv = f_.kvs_[f_.kv_index_.find(std::string_view("general.alignment"))->second];
    if (v->type != ValueType::UINT32)
      return make_error(fmt::format("'general.alignment' at byte offset {} has type {}, expected u32",
                                    kv.offset, value_type_name(v->type)), kDamaged);
    if (v->u == 0 || (v->u & (v->u - 1)) != 0 || v->u > kMaxAlignment)
      return make_error(fmt::format("'general.alignment' at byte offset {} is {}: must be a power of two "
                                    "between 1 and {}", kv.offset, v->u, kMaxAlignment), kDamaged);
    f_.alignment_ = v->u;
    return {};
  }

  Status read_tensor_info(uint64_t index) {
    TensorInfo t;
    t.info_offset = pos_;
    const std::string field = fmt::format("tensor[{}]", index);
    if (auto s = read_string(t.name, field + ".name"); !s) return s;
    if (t.name.empty() || t.name.size() > kMaxNameLength)
      return limit_error(field + ".name.length", t.info_offset, t.name.size(), kMaxNameLength, "1..1024 bytes");
    const std::string tf = fmt::format("tensor '{}'", t.name);
    uint32_t n_dims;
    const uint64_t at_dims = pos_;
    if (auto s = read(n_dims, tf + ".n_dims"); !s) return s;
    if (n_dims == 0 || n_dims > kMaxDims) return limit_error(tf + ".n_dims", at_dims, n_dims, kMaxDims, "1..4 dimensions");
    t.ne.resize(n_dims);
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t at = pos_;
      const std::string df = fmt::format("{}.ne[{}]", tf, d);
      if (auto s = read(t.ne[d], df); !s) return s;
      if (t.ne[d] == 0) return make_error(fmt::format("{} at byte offset {} is 0; dimensions must be > 0", df, at), kDamaged);
      if (mul_overflows(t.n_elements, t.ne[d], &t.n_elements) || t.n_elements > kMaxElements)
        return limit_error(df, at, t.ne[d], kMaxElements, "product of the dimensions overflows");
    }
    uint32_t type;
    const uint64_t at_type = pos_;
    if (auto s = read(type, tf + ".type"); !s) return s;
    const TypeTraits* tr = type_traits(type);
    if (!tr) return make_error(fmt::format("{}.type at byte offset {} is {}, not a known GGML type", tf, at_type, type),
                               "the file uses a tensor type this version of ggflow does not know");
    t.type = tr->type;
    if (t.ne[0] % tr->block_size != 0)
      return make_error(fmt::format("{} (info at byte offset {}): ne[0] = {} is not a multiple of the {} block size {}",
                                    tf, t.info_offset, t.ne[0], tr->name, tr->block_size), kDamaged);
    if (mul_overflows(t.n_elements / tr->block_size, tr->type_size, &t.n_bytes))
      return limit_error(tf + ".size", at_type, t.n_elements, kMaxElements, "byte size overflows");
    const uint64_t at_off = pos_;
    if (auto s = read(t.offset, tf + ".offset"); !s) return s;
    if (t.offset % f_.alignment_ != 0)
      return make_error(fmt::format("{}.offset at byte offset {} is {}, not a multiple of the alignment {}",
                                    tf, at_off, t.offset, f_.alignment_), kDamaged);
    if (f_.tensor_index_.count(t.name))
      return make_error(fmt::format("duplicate tensor name '{}' at byte offset {}", t.name, t.info_offset), kDamaged);
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
    return {};
  }

  Status check_tensor_ranges() {
    const uint64_t data_size = b_.size() - f_.data_offset_;
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(f_.tensors_.size());
    for (const auto& t : f_.tensors_) {
      uint64_t end;
      if (add_overflows(t.offset, t.n_bytes, &end) || end > data_size)
        return make_error(fmt::format("tensor '{}' (info at byte offset {}): data [{}, {}) relative to the data "
                                      "section at {} falls past the end of the file ({} bytes)", t.name,
                                      t.info_offset, t.offset, t.offset + t.n_bytes, f_.data_offset_, b_.size()),
                          kDamaged);
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
      const TensorInfo& a = *by_offset[k - 1];
      const TensorInfo& b = *by_offset[k];
      if (a.offset + a.n_bytes > b.offset)
        return make_error(fmt::format("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap in the data section (at byte "
                                      "offset {}; infos at byte offsets {} and {})", a.name, a.offset, a.offset + a.n_bytes,
                                      b.name, b.offset, b.offset + b.n_bytes, f_.data_offset_, a.info_offset, b.info_offset),
                          kDamaged);
    }
    return {};
  }

  File& f_;
  std::span<const uint8_t> b_;
  const ParseLimits& lim_;
  uint64_t pos_ = 0;
};

Result<File> Parser::parse(std::shared_ptr<const Bytes> bytes, std::string path, const ParseLimits& limits) {
  File f;
  f.bytes_ = bytes;
  f.path_ = std::move(path);
  Parser p(f, bytes->span(), limits);
  if (auto s = p.run(); !s) {
    Error e = s.error();
    if (!f.path_.empty()) e.what = f.path_ + ": " + e.what;
    return e;
  }
  return f;
}

Result<File> File::open(const std::string& path, const ParseLimits& limits) {
  auto bytes = MappedBytes::map(path);
  if (!bytes) return bytes.error();
  return Parser::parse(*bytes, path, limits);
}

Result<File> File::parse(std::span<const uint8_t> bytes, const ParseLimits& limits) {
  auto owned = std::make_shared<HeapBytes>(std::vector<uint8_t>(bytes.begin(), bytes.end()));
  return Parser::parse(owned, "", limits);
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

std::string_view File::architecture() const {
  const Value* v = find("general.architecture");
  return v && v->type == ValueType::STRING ? v->s : std::string_view{};
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> File::tensor_data(const TensorInfo& t) const {
  return bytes_->span().subspan(data_offset_ + t.offset, t.n_bytes);
}

}  // namespace ggflow::gguf
