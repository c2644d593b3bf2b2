#include "cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ggflow::cpu {

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

Result<Isa> isa_from_string(std::string_view s) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (s == to_string(i)) return i;
  return make_error("unknown instruction set '" + std::string(s) + "'", "use scalar, avx2 or avx512");
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::avx512:
      return isa_supported(Isa::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
  }
  return false;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

Isa best_isa() { return supported_isas().back(); }

Result<Isa> isa_from_env() {
  const char* e = std::getenv("GGFLOW_ISA");
  if (!e || !*e) return best_isa();
  auto isa = isa_from_string(e);
  if (!isa) return make_error("GGFLOW_ISA: " + isa.error().what, isa.error().hint);
  if (!isa_supported(*isa))
    return make_error("GGFLOW_ISA=" + std::string(e) + ": this CPU does not support it",
                      "use one of the supported: " + std::string(to_string(best_isa())) + " or narrower");
  return *isa;
}

namespace {

bool amx_probe() {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  if (!tile || !int8 || !isa_supported(Isa::avx512)) return false;
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;  // linux/arch/x86/include/uapi/asm/prctl.h
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
  return false;
#endif
}

std::atomic<bool>& amx_switch() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("GGFLOW_AMX");
    return !(e && std::strcmp(e, "0") == 0);
  }()};
  return on;
}

}  // namespace

bool amx_supported() {
  static const bool ok = amx_probe();
  return ok;
}

bool amx_enabled() { return amx_supported() && amx_switch().load(std::memory_order_relaxed); }

void set_amx_enabled(bool on) { amx_switch().store(on, std::memory_order_relaxed); }

}  // namespace ggflow::cpu
