#include "runtime/greedy.h"

#include "gguf/finite.h"

namespace ggflow::runtime {

const char* non_finite(std::span<const float> row) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(row.data()), row.size_bytes());
  auto bad = gguf::find_non_finite(gguf::GgmlType::F32, bytes);
  if (!bad) return nullptr;
  return bad->is_nan ? "NaN" : "Inf";
}

int32_t argmax(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  return best;
}

Result<std::vector<int32_t>> generate_greedy(SequenceRunner& runner, std::span<const int32_t> prompt, int n,
                                             std::vector<float>* rows) {
  std::vector<int32_t> out;
  auto l = runner.step(prompt);
  if (!l) return l.error();
  for (int i = 0; i < n; ++i) {
    const int32_t t = argmax(*l);
    out.push_back(t);
    if (rows) rows->insert(rows->end(), l->begin(), l->end());
    if (i + 1 == n) break;
    l = runner.step(std::span<const int32_t>(&t, 1));
    if (!l) return l.error();
  }
  return out;
}

}  // namespace ggflow::runtime
