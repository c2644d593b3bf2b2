#include "runtime/greedy.h"

namespace ggflow::runtime {

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
