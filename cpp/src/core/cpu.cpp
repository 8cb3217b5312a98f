#include "dmlops/core/cpu.hpp"

#include <cstdlib>

namespace dmlops {

bool avx2_enabled() {
  static const bool enabled = [] {
    const char* disable = std::getenv("DMLOPS_DISABLE_AVX2");
    if (disable != nullptr && disable[0] != '\0' && disable[0] != '0') return false;
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return enabled;
}

bool avx2_fma_enabled() {
  static const bool enabled = avx2_enabled() && __builtin_cpu_supports("fma") != 0;
  return enabled;
}

}  // namespace dmlops
