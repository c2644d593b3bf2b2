// The --dump-logits file of `ggflow run`, the same for every engine (raw, sdpa, paged):
// headerless, little-endian IEEE f32, row-major [n, n_vocab], where row i holds the logits that
// generated token i was chosen from (row 0: the prompt's last position; row i > 0: the decode
// step that fed token i-1). n_vocab comes from the model; n = file size / (4 · n_vocab).
// Two engines agree bit for bit exactly when `cmp a.bin b.bin` says so.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace ggflow::runtime {

Status write_logits_dump(const std::string& path, const std::vector<float>& rows);
Result<std::vector<float>> read_logits_dump(const std::string& path);

}  // namespace ggflow::runtime
