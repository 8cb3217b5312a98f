#include "dmlops/core/platform.hpp"

#include <algorithm>
#include <thread>

#if defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <pthread.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#elif DMLOPS_X86
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace dmlops::platform {
namespace {

// The OS's answer, or 0 when it has none.
int affinity_cpu_count() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return 0;
#elif defined(_WIN32)
  // A process spanning several processor groups (> 64 CPUs) has no single mask: it may use
  // every active processor of every group.
  USHORT groups = 0;
  if (!GetProcessGroupAffinity(GetCurrentProcess(), &groups, nullptr) && groups > 1) {
    const DWORD all = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return all > 0 ? static_cast<int>(std::min<DWORD>(all, 1 << 20)) : 0;
  }
  DWORD_PTR process = 0, system = 0;
  if (!GetProcessAffinityMask(GetCurrentProcess(), &process, &system)) return 0;
  int count = 0;
  for (; process != 0; process &= process - 1) ++count;
  return count;
#elif defined(__APPLE__)
  int count = 0;
  std::size_t size = sizeof(count);
  if (sysctlbyname("hw.activecpu", &count, &size, nullptr, 0) == 0) return count;
  return 0;
#else
  return 0;
#endif
}

#if DMLOPS_X86
struct CpuidRegisters {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// cpuid leaf/subleaf; all zero when the leaf is beyond the CPU's highest.
CpuidRegisters cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegisters r;
#if defined(_MSC_VER) && !defined(__clang__)
  int max[4], regs[4];
  __cpuid(max, static_cast<int>(leaf & 0x80000000u));
  if (static_cast<unsigned>(max[0]) < leaf) return r;
  __cpuidex(regs, static_cast<int>(leaf), static_cast<int>(subleaf));
  r = {static_cast<unsigned>(regs[0]), static_cast<unsigned>(regs[1]), static_cast<unsigned>(regs[2]),
       static_cast<unsigned>(regs[3])};
#else
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) r = {};
#endif
  return r;
}

// The register state the OS saves on a context switch (XCR0); call only when OSXSAVE is set.
std::uint64_t xcr0() {
#if defined(_MSC_VER) && !defined(__clang__)
  return _xgetbv(0);
#else
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (std::uint64_t{hi} << 32) | lo;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  const CpuidRegisters leaf1 = cpuid(1, 0);
  const bool osxsave = (leaf1.ecx >> 27) & 1;
  if (!osxsave) return f;
  const std::uint64_t xcr = xcr0();
  const bool ymm_saved = (xcr & 0x6) == 0x6;      // SSE and AVX state
  const bool zmm_saved = (xcr & 0xe6) == 0xe6;    // and opmask, ZMM_Hi256, Hi16_ZMM
  f.avx = ymm_saved && ((leaf1.ecx >> 28) & 1);
  if (!f.avx) return f;
  f.fma = (leaf1.ecx >> 12) & 1;
  f.f16c = (leaf1.ecx >> 29) & 1;
  const CpuidRegisters leaf7 = cpuid(7, 0);
  f.avx2 = (leaf7.ebx >> 5) & 1;
  f.avx512f = zmm_saved && ((leaf7.ebx >> 16) & 1);
  return f;
}
#else
CpuFeatures detect() {
  CpuFeatures f;
  f.neon = DMLOPS_ARM64;  // mandatory in AArch64
  return f;
}
#endif

}  // namespace

int usable_cpu_count() {
  const int affinity = affinity_cpu_count();
  if (affinity > 0) return affinity;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void on_fork_in_child(void (*fn)()) {
#if defined(_WIN32)
  static_cast<void>(fn);
#else
  pthread_atfork(nullptr, nullptr, fn);
#endif
}

void cpu_relax() {
#if DMLOPS_X86
  _mm_pause();
#elif DMLOPS_ARM64 && (defined(__GNUC__) || defined(__clang__))
  __asm__ volatile("yield");
#elif DMLOPS_ARM64
  __yield();
#endif
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace dmlops::platform
