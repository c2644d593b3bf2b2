// GGML's f16-table GELU (see gelu_f16.h).
#include "ir/gelu_f16.h"

#include <cmath>

#include "gguf/dequant.h"

namespace ggflow::ir {

const uint16_t* gelu_f16_table() {
  static const uint16_t* table = [] {
    static uint16_t t[65536 + 1] = {};
    for (uint32_t h = 0; h < 65536; ++h) {
      const float v = gguf::f16_to_f32(static_cast<uint16_t>(h));
      // ggml_gelu_f32, one f32 rounding per operation, then to f16 (ggml_cpu_init fills it so)
      const float inner = 0.79788456080286535587989211986876f * v * (1.0f + 0.044715f * v * v);
      t[h] = gguf::f32_to_f16(0.5f * v * (1.0f + std::tanh(inner)));
    }
    return t;
  }();
  return table;
}

float gelu_f16(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return gguf::f16_to_f32(gelu_f16_table()[gguf::f32_to_f16(x)]);
}

}  // namespace ggflow::ir
