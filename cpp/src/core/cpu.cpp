#include "dmlops/core/cpu.hpp"

#include <cstdlib>

namespace dmlops {
namespace {

bool disabled_by(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && value[0] != '\0' && value[0] != '0';
}

}  // namespace

bool avx2_enabled() {
  static const bool enabled = !disabled_by("DMLOPS_DISABLE_AVX2") && __builtin_cpu_supports("avx2");
  return enabled;
}

bool f16c_enabled() {
  static const bool enabled =
      !disabled_by("DMLOPS_DISABLE_F16C") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return enabled;
}

bool avx2_fma_enabled() {
  static const bool enabled = avx2_enabled() && __builtin_cpu_supports("fma") != 0;
  return enabled;
}

bool avx512_enabled() {
  static const bool enabled =
      avx2_fma_enabled() && !disabled_by("DMLOPS_DISABLE_AVX512") && __builtin_cpu_supports("avx512f") != 0;
  return enabled;
}

}  // namespace dmlops
