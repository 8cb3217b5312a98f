#include "dmlops/core/platform.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

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
#include <sys/mman.h>
#include <sys/syscall.h>
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

// Stores a data or unified cache's size by its level; false for a level the kernels do not use.
bool record_cache(CacheSizes& sizes, int level, std::int64_t bytes) {
  if (level == 1) sizes.l1d = bytes;
  else if (level == 2) sizes.l2 = bytes;
  else if (level == 3) sizes.l3 = bytes;
  else return false;
  return true;
}

// A byte count written as digits (at most 8) and an optional K/k or M suffix, as sysfs and
// DMLOPS_CACHE_SIZES spell them, taken from the front of `text`; 0 when there are no digits.
std::int64_t take_size(std::string_view& text) {
  std::int64_t value = 0;
  std::size_t digits = 0;
  for (; digits < text.size() && digits < 8 && text[digits] >= '0' && text[digits] <= '9'; ++digits)
    value = 10 * value + (text[digits] - '0');
  if (digits == 0) return 0;
  text.remove_prefix(digits);
  if (!text.empty() && (text.front() == 'K' || text.front() == 'k')) value <<= 10, text.remove_prefix(1);
  else if (!text.empty() && text.front() == 'M') value <<= 20, text.remove_prefix(1);
  return value;
}

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

bool amd_cpu() { return cpuid(0, 0).ebx == 0x68747541u; }  // "Auth"enticAMD

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
  f.avx512bw = f.avx512f && ((leaf7.ebx >> 30) & 1);
  f.avx512vbmi = f.avx512bw && ((leaf7.ecx >> 1) & 1);
  const unsigned base_family = (leaf1.eax >> 8) & 0xf;
  const unsigned family = base_family == 0xf ? base_family + ((leaf1.eax >> 20) & 0xff) : base_family;
  f.zen4 = f.avx512f && amd_cpu() && family == 0x19;
  f.avx512_half_rate = f.zen4;
  f.avx512_l2_fed = f.avx512f && amd_cpu() && family >= 0x19;
  return f;
}

// The deterministic cache parameters (Intel leaf 4; AMD's copy of it, leaf 0x8000001D, when
// the CPU has topology extensions): one subleaf per cache until type 0.
bool cpuid_caches(CacheSizes& sizes) {
  const CpuidRegisters extended = cpuid(0x80000001u, 0);
  const bool amd = amd_cpu();
  unsigned leaf = 4;
  if (amd) {
    if (!((extended.ecx >> 22) & 1)) return false;
    leaf = 0x8000001Du;
  }
  bool found = false;
  for (unsigned sub = 0; sub < 16; ++sub) {
    const CpuidRegisters r = cpuid(leaf, sub);
    const unsigned type = r.eax & 0x1f, level = (r.eax >> 5) & 0x7;
    if (type == 0) break;
    if (type != 1 && type != 3) continue;  // data or unified, not instruction
    const std::int64_t bytes = std::int64_t{((r.ebx >> 22) & 0x3ff) + 1} * (((r.ebx >> 12) & 0x3ff) + 1) *
                               ((r.ebx & 0xfff) + 1) * (std::int64_t{r.ecx} + 1);
    found = record_cache(sizes, static_cast<int>(level), bytes) || found;
  }
  return found;
}
#else
CpuFeatures detect() {
  CpuFeatures f;
  f.neon = DMLOPS_ARM64;  // mandatory in AArch64
  return f;
}
#endif

#if defined(__linux__)
// /sys/devices/system/cpu/cpu0/cache/indexN/{level,type,size}: size as "48K" or "2048K".
bool sysfs_caches(CacheSizes& sizes) {
  bool found = false;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction" || size.empty()) continue;
    std::string_view text = size;
    const std::int64_t bytes = take_size(text);
    if (bytes <= 0) continue;
    found = record_cache(sizes, static_cast<int>(level), bytes) || found;
  }
  return found;
}
#endif

CacheSizes detect_caches() {
  if (const char* env = std::getenv("DMLOPS_CACHE_SIZES")) {
    if (const auto parsed = parse_cache_sizes(env)) return *parsed;
  }
  CacheSizes sizes;
#if DMLOPS_X86
  if (cpuid_caches(sizes)) {
    sizes.source = "cpuid";
    return sizes;
  }
#endif
#if defined(__linux__)
  if (sysfs_caches(sizes)) sizes.source = "sysfs";
#elif defined(__APPLE__)
  const auto read = [&](const char* name, std::int64_t& field) {
    std::int64_t value = 0;
    std::size_t size = sizeof(value);
    if (sysctlbyname(name, &value, &size, nullptr, 0) != 0 || value <= 0) return false;
    field = value;
    return true;
  };
  const bool l1 = read("hw.l1dcachesize", sizes.l1d), l2 = read("hw.l2cachesize", sizes.l2);
  const bool l3 = read("hw.l3cachesize", sizes.l3);
  if (l1 || l2 || l3) sizes.source = "sysctl";
#elif defined(_WIN32)
  DWORD bytes = 0;
  GetLogicalProcessorInformation(nullptr, &bytes);
  std::vector<SYSTEM_LOGICAL_PROCESSOR_INFORMATION> info(bytes / sizeof(SYSTEM_LOGICAL_PROCESSOR_INFORMATION) + 1);
  if (bytes > 0 && GetLogicalProcessorInformation(info.data(), &bytes)) {
    for (std::size_t i = 0; i < bytes / sizeof(SYSTEM_LOGICAL_PROCESSOR_INFORMATION); ++i) {
      if (info[i].Relationship != RelationCache) continue;
      const CACHE_DESCRIPTOR& cache = info[i].Cache;
      if (cache.Type == CacheInstruction) continue;
      if (record_cache(sizes, cache.Level, cache.Size)) sizes.source = "windows";
    }
  }
#endif
  return sizes;
}

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

#if defined(_WIN32)
namespace {
struct ExitEntry {
  void (*destroy)(void*);
  void* value;
};
void NTAPI run_exit_entry(void* entry) {
  if (entry == nullptr) return;
  const ExitEntry e = *static_cast<ExitEntry*>(entry);
  delete static_cast<ExitEntry*>(entry);
  e.destroy(e.value);
}
}  // namespace

ThreadExitValue::ThreadExitValue(void (*destroy)(void*)) : destroy_(destroy), key_(FlsAlloc(run_exit_entry)) {}

void ThreadExitValue::set(void* value) const {
  if (static_cast<DWORD>(key_) != FLS_OUT_OF_INDEXES)
    FlsSetValue(static_cast<DWORD>(key_), new ExitEntry{destroy_, value});
}
#else
ThreadExitValue::ThreadExitValue(void (*destroy)(void*)) : destroy_(destroy) {
  pthread_key_t key{};
  if (pthread_key_create(&key, destroy_) == 0) key_ = static_cast<std::uint64_t>(key) + 1;  // 0: none
}

void ThreadExitValue::set(void* value) const {
  if (key_ != 0) pthread_setspecific(static_cast<pthread_key_t>(key_ - 1), value);
}
#endif

#if defined(__linux__)
int current_cpu() { return sched_getcpu(); }

int keep_off_cpu(int cpu, int previous) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return -1;
  if (previous >= 0 && previous < CPU_SETSIZE) CPU_SET(previous, &allowed);
  int kept_off = -1;
  if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)) {
    CPU_CLR(cpu, &allowed);
    if (CPU_COUNT(&allowed) > 0) {
      kept_off = cpu;
    } else {
      CPU_SET(cpu, &allowed);
    }
  }
  return sched_setaffinity(0, sizeof(allowed), &allowed) == 0 ? kept_off : -1;
}

void set_short_time_slices(bool on) {
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
  // struct sched_attr as of Linux 3.14 (SCHED_ATTR_SIZE_VER0); glibc declares it only from 2.41.
  struct {
    std::uint32_t size, policy;
    std::uint64_t flags;
    std::int32_t nice;
    std::uint32_t priority;
    std::uint64_t runtime, deadline, period;
  } attr{};
  static_assert(sizeof(attr) == 48);
  // Read first: the thread keeps its policy and nice value, and only a normal thread is touched.
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0 || attr.policy != SCHED_OTHER) return;
  attr.size = sizeof(attr);
  attr.runtime = on ? 100'000 : 0;  // ns: the kernel's smallest slice, or its default
  syscall(SYS_sched_setattr, 0, &attr, 0);
#endif
}

void advise_huge_pages(void* data, std::size_t bytes) noexcept {
  if (data == nullptr || bytes < kHugePageMinBytes) return;
  // madvise wants a page-aligned start: the block's first whole page onwards (the kernel backs
  // the 2 MiB-aligned stretches inside with huge pages). A failure leaves small pages.
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<std::uintptr_t>(data), end = start + bytes;
  const std::uintptr_t first = (start + page - 1) / page * page;
  if (page == 0 || first >= end) return;
  madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
}
#else
int current_cpu() { return -1; }
int keep_off_cpu(int, int) { return -1; }
void set_short_time_slices(bool) {}
void advise_huge_pages(void*, std::size_t) noexcept {}
#endif

void cpu_relax() {
#if DMLOPS_X86
  _mm_pause();
#elif DMLOPS_ARM64 && (defined(__GNUC__) || defined(__clang__))
  __asm__ volatile("yield");
#elif DMLOPS_ARM64
  __yield();
#endif
}

void wait_while_equal(std::atomic<std::uint32_t>& word, std::uint32_t old) {
#if defined(_WIN32)
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  if (word.load(std::memory_order_acquire) != old) return;
  WaitOnAddress(reinterpret_cast<volatile void*>(&word), &old, sizeof(old), INFINITE);
#else
  word.wait(old, std::memory_order_acquire);
#endif
}

void wake_one(std::atomic<std::uint32_t>& word) {
#if defined(_WIN32)
  WakeByAddressSingle(reinterpret_cast<void*>(&word));
#else
  word.notify_one();
#endif
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

std::optional<CacheSizes> parse_cache_sizes(std::string_view text) {
  std::int64_t values[3] = {};
  for (int i = 0; i < 3; ++i) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    const std::int64_t value = take_size(text);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (value < 1024 || value > (std::int64_t{1} << 30)) return std::nullopt;
    values[i] = value;
    if (i < 2) {
      if (text.empty() || text.front() != ',') return std::nullopt;
      text.remove_prefix(1);
    }
  }
  if (!text.empty() || values[0] > values[1]) return std::nullopt;
  CacheSizes sizes;
  sizes.l1d = values[0], sizes.l2 = values[1], sizes.l3 = values[2];
  sizes.source = "environment";
  return sizes;
}

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = detect_caches();
  return sizes;
}

}  // namespace dmlops::platform
