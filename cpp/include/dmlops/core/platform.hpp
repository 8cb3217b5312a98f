// Everything that depends on the operating system, the compiler or the processor, in one place.
//
// Kernels spell compiler-specific things with the macros below, never with GNU or MSVC syntax
// of their own, and compile ISA-specific code (x86 intrinsics) only under `#if DMLOPS_X86`: the
// portable path builds with GCC, Clang and MSVC on x86-64, Arm64 or anything else with C++20.
//
//   DMLOPS_X86, DMLOPS_ARM64   1 when compiling for that architecture, else 0
//   DMLOPS_TARGET("avx2")      compile one function for an extra x86 ISA (GCC and Clang need the
//                              attribute to accept intrinsics; MSVC accepts them anywhere, and
//                              no other architecture has these ISAs: empty there)
//   DMLOPS_ALWAYS_INLINE       an attribute: inline this function into every caller
//   DMLOPS_FLATTEN             an attribute: inline every call inside this function
//   DMLOPS_RESTRICT            a pointer qualifier: nothing else reaches this memory
//   DMLOPS_UNROLL(n)           before a loop: unroll it n times (a hint)
//   DMLOPS_PREFETCH(p)         start loading the cache line of p into L2 (a hint)
//   DMLOPS_OPAQUE(p)           the compiler forgets where pointer p points (it stays the same)
//   DMLOPS_IGNORE_PSABI        silence GCC's note that passing vector registers between
//                              baseline functions would change the ABI
//
// The library is static and the Python extension exports its one entry point through pybind11,
// so no symbol visibility or __declspec(dllexport) is needed anywhere.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string_view>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define DMLOPS_X86 1
#else
#define DMLOPS_X86 0
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define DMLOPS_ARM64 1
#else
#define DMLOPS_ARM64 0
#endif

#define DMLOPS_PRAGMA(text) _Pragma(#text)

#if defined(_MSC_VER) && !defined(__clang__)
#define DMLOPS_ALWAYS_INLINE [[msvc::forceinline]]
#define DMLOPS_NOINLINE __declspec(noinline)
#define DMLOPS_FLATTEN [[msvc::flatten]]
#define DMLOPS_UNROLL(n)
#define DMLOPS_TARGET(isa)
#if DMLOPS_X86
#include <intrin.h>
#define DMLOPS_PREFETCH(p) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1)
#else
#define DMLOPS_PREFETCH(p) static_cast<void>(p)
#endif
#define DMLOPS_OPAQUE(p) static_cast<void>(p)
#else  // GCC and Clang (MinGW included)
#define DMLOPS_ALWAYS_INLINE [[gnu::always_inline]]
#define DMLOPS_NOINLINE [[gnu::noinline]]
#define DMLOPS_FLATTEN [[gnu::flatten]]
#define DMLOPS_UNROLL(n) DMLOPS_PRAGMA(GCC unroll n)
#if DMLOPS_X86
#define DMLOPS_TARGET(isa) __attribute__((target(isa)))
#else
#define DMLOPS_TARGET(isa)
#endif
#define DMLOPS_PREFETCH(p) __builtin_prefetch((p), 0, 2)
#define DMLOPS_OPAQUE(p) asm("" : "+r"(p))
#endif
#define DMLOPS_RESTRICT __restrict

#if defined(__GNUC__) && !defined(__clang__)
#define DMLOPS_IGNORE_PSABI DMLOPS_PRAGMA(GCC diagnostic ignored "-Wpsabi")
#else
#define DMLOPS_IGNORE_PSABI
#endif

namespace dmlops::platform {

// The CPUs this process may run on: its affinity mask (Linux sched_getaffinity; Windows
// GetProcessAffinityMask, or every active processor of every group when the process spans
// several), else the online CPUs (macOS: sysctl hw.activecpu), else
// std::thread::hardware_concurrency(); at least 1.
int usable_cpu_count();

// Registers fn to run in the child process after fork(), where only the forking thread
// survives. A no-op where processes do not fork (Windows).
void on_fork_in_child(void (*fn)());

// A value per thread that `destroy` is handed when its thread exits (threads that set none are
// skipped): a pthread key, or a Windows fiber-local slot. It is the way to free per-thread
// memory, rather than a thread_local object with a destructor: with MinGW GCC's emulated TLS
// the storage of such an object can be freed before its destructor runs at thread exit, which
// then reads freed memory (GCC bug 80816). `destroy` gets the value and must read no
// thread_local. Lives as long as the process.
class ThreadExitValue {
 public:
  explicit ThreadExitValue(void (*destroy)(void*));
  // The calling thread's value; set once per thread.
  void set(void* value) const;

 private:
  void (*destroy_)(void*);
  std::uint64_t key_ = 0;
};

// Scheduling hints for the thread pool's workers (Linux; elsewhere -1, false and no-ops):
// - current_cpu: the CPU the calling thread runs on now (it may move at any time).
// - keep_off_cpu: keeps the calling thread off `cpu` from now on (its affinity mask without
//   it; it moves if it runs there), where it was kept off `previous` until now (that CPU is
//   allowed again); -1 for either: none. Returns the CPU it is now kept off: `cpu`, or -1
//   where its mask holds no other CPU (or none was asked). The scheduler balances thread
//   counts, not processes: with another busy thread on the machine it can leave a worker
//   sharing its caller's CPU for good, where the two only take turns; and a worker woken while
//   its own CPU's vCPU sleeps (the host has preempted it) is placed on its waker's CPU, where
//   it preempts the caller and must then be moved off (two migrations a call on the 2-vCPU
//   Zen 4). Kept off the caller's CPU while it sleeps, it wakes on another.
// - set_short_time_slices: asks for 100 us time slices for the calling thread, or (false) the
//   kernel's default again (the EEVDF scheduler of Linux 6.12 and later; older kernels ignore
//   it). A thread that runs in short bursts is then let in soon after it is woken, ahead of a
//   busy thread of another library or process, and gives the CPU back as soon as it has had
//   its turn.
int current_cpu();
int keep_off_cpu(int cpu, int previous);
void set_short_time_slices(bool on);

// Asks the OS to back [data, data + bytes) with huge pages (Linux: madvise MADV_HUGEPAGE, for
// kernels whose transparent huge pages are on "madvise", as Debian's and Ubuntu's are; a no-op
// for blocks under kHugePageMinBytes and on other systems). Call it before the block is first
// written: pages already touched stay small. A prepared filter read whole on every call spans
// thousands of 4 KiB pages (21 MB, 5,300 of them, for 3x3 768@7): on Zen 4, paired, prepared
// 768@7 ran 0.97x the time with huge pages and 512@7 (9.4 MB) 0.99x. numpy advises its arrays of
// 4 MiB and more the same way.
inline constexpr std::size_t kHugePageMinBytes = std::size_t{4} << 20;
void advise_huge_pages(void* data, std::size_t bytes) noexcept;

// An allocator for a long-lived buffer that kernels stream with vector loads (a prepared
// filter: std::vector<float, VectorAllocator<float>>): blocks aligned to a cache line, as
// Scratch's are, so that no 64-byte load straddles two lines (malloc aligns to 16 bytes), and
// advised huge pages.
template <class T>
struct VectorAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  VectorAllocator() = default;
  template <class U>
  VectorAllocator(const VectorAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    T* data = static_cast<T*>(::operator new(n * sizeof(T), kAlignment));
    advise_huge_pages(data, n * sizeof(T));
    return data;
  }
  void deallocate(T* data, std::size_t) noexcept { ::operator delete(data, kAlignment); }
  template <class U>
  bool operator==(const VectorAllocator<U>&) const noexcept { return true; }
};

// A hint for spin-wait loops: lets the sibling hyperthread run (x86 pause, Arm yield).
void cpu_relax();

// Blocks while word == old (it may also return early: callers loop on their condition), and
// wakes one thread blocked on word. std::atomic::wait/notify_one (a futex on Linux), except on
// Windows: MinGW's libstdc++ 12 has no futex there and its fallback for std::atomic::wait can lose
// a wake-up (it tests the value outside the mutex its notify takes), which hung the thread pool;
// WaitOnAddress/WakeByAddressSingle are the OS's own address waits.
void wait_while_equal(std::atomic<std::uint32_t>& word, std::uint32_t old);
void wake_one(std::atomic<std::uint32_t>& word);

// What the processor and the operating system support, detected once (x86: cpuid, and xgetbv
// for the register state the OS saves; Arm64: Advanced SIMD is part of the architecture).
struct CpuFeatures {
  bool avx = false;      // AVX, and the OS saves ymm registers
  bool avx2 = false;     // AVX2 (with avx)
  bool fma = false;      // FMA3 (with avx)
  bool f16c = false;     // F16C (with avx)
  bool avx512f = false;  // AVX-512F, and the OS saves zmm and mask registers
  // AVX-512 runs as two 256-bit halves, one zmm FMA per cycle (AMD Zen 4: family 19h with
  // AVX-512); Intel's AVX-512 cores and Zen 5 do two.
  bool avx512_half_rate = false;
  // AMD's AVX-512 cores (Zen 4, family 19h; Zen 5, 1Ah; and later): their L2 streams a packed
  // filter to the FMA tiles as fast as they use it, at two zmm FMAs per cycle on Zen 5. On
  // Intel's AVX-512 cores (the 16-core Xeon) tiles fed from L2 ran up to 10% slower.
  bool avx512_l2_fed = false;
  // AMD Zen 4 (family 19h with AVX-512), for what its caches do rather than its instructions
  // (whatever DMLOPS_DISABLE_AVX512 says): an output written into its L3 by one core stays there
  // only while it is small (staged_cache_bytes).
  bool zen4 = false;
  bool avx512bw = false;    // AVX-512BW (with avx512f): byte and word lanes, byte masks
  bool avx512vbmi = false;  // AVX512_VBMI (with avx512bw): byte permutes across a zmm
  bool neon = false;     // Arm Advanced SIMD
};
const CpuFeatures& cpu_features();

// The data caches one core sees, in bytes, read once: x86 cpuid (Intel leaf 4, AMD leaf
// 0x8000001D), else Linux sysfs, macOS sysctl or Windows GetLogicalProcessorInformation. Kernels
// size their tiles from these (a packed filter that stays in L1, a panel that stays in L2), so
// what they assume is what this CPU has. A size nobody reports keeps the default below, and
// `source` says where the figures came from. DMLOPS_CACHE_SIZES="48K,2M,32M" (L1d, L2, L3, read
// once) overrides them all: for a virtual machine whose cpuid misreports the host, and for
// measuring how the tiles of one CPU do on another.
struct CacheSizes {
  std::int64_t l1d = 32 * 1024;    // L1 data, per core
  std::int64_t l2 = 1024 * 1024;   // L2, per core on every x86 and Arm server core we know
  std::int64_t l3 = 8 << 20;       // last level, shared by a group of cores
  const char* source = "default";  // "environment", "cpuid", "sysfs", "sysctl", "windows" or "default"
};
const CacheSizes& cache_sizes();
// DMLOPS_CACHE_SIZES' syntax: three sizes in bytes, each with an optional K or M suffix, from 1K
// to 1024M, L1d <= L2; nullopt for anything else.
std::optional<CacheSizes> parse_cache_sizes(std::string_view text);

// Copies 32 bytes as one vector where the compiler has GNU vector types (one register move in
// an AVX2 function, where memcpy of a fixed size expands to 16-byte moves), else with memcpy.
DMLOPS_ALWAYS_INLINE inline void copy32(void* dst, const void* src) {
#if defined(__GNUC__) || defined(__clang__)
  typedef char Piece __attribute__((vector_size(32), aligned(1), may_alias));
  *static_cast<Piece*>(dst) = *static_cast<const Piece*>(src);
#else
  std::memcpy(dst, src, 32);
#endif
}

// *result = a * b or a + b; true when the exact result does not fit in int64 (then *result is
// unchanged). GCC and Clang check with their builtins, other compilers (MSVC) portably.
inline bool mul_overflow_portable(std::int64_t a, std::int64_t b, std::int64_t* result) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const bool overflow = a > 0 ? (b > 0 ? a > kMax / b : b < kMin / a)
                              : (b > 0 ? a < kMin / b : a != 0 && b < kMax / a);
  if (!overflow) *result = a * b;
  return overflow;
}

inline bool add_overflow_portable(std::int64_t a, std::int64_t b, std::int64_t* result) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const bool overflow = b > 0 ? a > kMax - b : a < kMin - b;
  if (!overflow) *result = a + b;
  return overflow;
}

inline bool mul_overflow(std::int64_t a, std::int64_t b, std::int64_t* result) {
#if defined(__GNUC__) || defined(__clang__)
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return true;
  *result = r;
  return false;
#else
  return mul_overflow_portable(a, b, result);
#endif
}

inline bool add_overflow(std::int64_t a, std::int64_t b, std::int64_t* result) {
#if defined(__GNUC__) || defined(__clang__)
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return true;
  *result = r;
  return false;
#else
  return add_overflow_portable(a, b, result);
#endif
}

}  // namespace dmlops::platform
