#include "dmlops/core/cpu.hpp"

#include <cstdlib>

#include "dmlops/core/platform.hpp"

namespace dmlops {
namespace {

bool disabled_by(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && value[0] != '\0' && value[0] != '0';
}

}  // namespace

bool avx2_enabled() {
  static const bool enabled = !disabled_by("DMLOPS_DISABLE_AVX2") && platform::cpu_features().avx2;
  return enabled;
}

bool f16c_enabled() {
  static const bool enabled =
      !disabled_by("DMLOPS_DISABLE_F16C") && platform::cpu_features().f16c;
  return enabled;
}

bool avx2_fma_enabled() {
  static const bool enabled = avx2_enabled() && platform::cpu_features().fma;
  return enabled;
}

bool avx512_enabled() {
  static const bool enabled =
      avx2_fma_enabled() && !disabled_by("DMLOPS_DISABLE_AVX512") && platform::cpu_features().avx512f;
  return enabled;
}

bool avx512bw_enabled() {
  static const bool enabled = avx512_enabled() && platform::cpu_features().avx512bw;
  return enabled;
}

bool avx512_vbmi_enabled() {
  static const bool enabled = avx512_enabled() && platform::cpu_features().avx512vbmi;
  return enabled;
}

int vector_fmas_per_cycle() {
  return avx512_enabled() && platform::cpu_features().avx512_half_rate ? 1 : 2;
}

const char* kernel_isa(KernelKind kind) {
  if (kind == KernelKind::Fma && avx512_enabled()) return "avx512";
  if (kind == KernelKind::Fma ? avx2_fma_enabled() : avx2_enabled()) return "avx2";
  if (DMLOPS_X86) return "sse2";
  return DMLOPS_ARM64 ? "neon" : "portable";
}

}  // namespace dmlops
