#include "gguf/types.h"

#include <array>
#include <cctype>
#include <string>

namespace ggflow::gguf {

namespace {
using T = GgmlType;
// Block geometry from GGML (ggml.c type_traits); matches gguf-py's GGML_QUANT_SIZES.
constexpr TypeTraits kTable[] = {
    {T::F32, "F32", 1, 4, false, true},          {T::F16, "F16", 1, 2, false, true},
    {T::Q4_0, "Q4_0", 32, 18, true, true},       {T::Q4_1, "Q4_1", 32, 20, true, true},
    {T::Q5_0, "Q5_0", 32, 22, true, true},       {T::Q5_1, "Q5_1", 32, 24, true, true},
    {T::Q8_0, "Q8_0", 32, 34, true, true},       {T::Q8_1, "Q8_1", 32, 40, true, false},
    {T::Q2_K, "Q2_K", 256, 84, true, true},      {T::Q3_K, "Q3_K", 256, 110, true, true},
    {T::Q4_K, "Q4_K", 256, 144, true, true},     {T::Q5_K, "Q5_K", 256, 176, true, true},
    {T::Q6_K, "Q6_K", 256, 210, true, true},     {T::Q8_K, "Q8_K", 256, 292, true, false},
    {T::IQ2_XXS, "IQ2_XXS", 256, 66, true, false}, {T::IQ2_XS, "IQ2_XS", 256, 74, true, false},
    {T::IQ3_XXS, "IQ3_XXS", 256, 98, true, false}, {T::IQ1_S, "IQ1_S", 256, 50, true, false},
    {T::IQ4_NL, "IQ4_NL", 32, 18, true, false},  {T::IQ3_S, "IQ3_S", 256, 110, true, false},
    {T::IQ2_S, "IQ2_S", 256, 82, true, false},   {T::IQ4_XS, "IQ4_XS", 256, 136, true, false},
    {T::I8, "I8", 1, 1, false, false},           {T::I16, "I16", 1, 2, false, false},
    {T::I32, "I32", 1, 4, false, false},         {T::I64, "I64", 1, 8, false, false},
    {T::F64, "F64", 1, 8, false, false},         {T::IQ1_M, "IQ1_M", 256, 56, true, false},
    {T::BF16, "BF16", 1, 2, false, true},        {T::TQ1_0, "TQ1_0", 256, 54, true, false},
    {T::TQ2_0, "TQ2_0", 256, 66, true, false},   {T::MXFP4, "MXFP4", 32, 17, true, false},
};

constexpr size_t kMaxId = 64;
constexpr std::array<const TypeTraits*, kMaxId> make_index() {
  std::array<const TypeTraits*, kMaxId> idx{};
  for (const auto& t : kTable) idx[static_cast<uint32_t>(t.type)] = &t;
  return idx;
}
constexpr auto kIndex = make_index();
}  // namespace

const TypeTraits* type_traits(uint32_t id) { return id < kMaxId ? kIndex[id] : nullptr; }

std::optional<GgmlType> type_from_name(std::string_view name) {
  std::string up(name);
  for (auto& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& t : kTable)
    if (t.name == up) return t.type;
  return std::nullopt;
}

}  // namespace ggflow::gguf
