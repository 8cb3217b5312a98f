// Which instruction sets the kernels may use, decided once per process.
//
// Kernels with an ISA-specific variant compile it with DMLOPS_TARGET(...) (platform.hpp) next
// to the portable one and ask here which to run; on other processors than x86 every query is
// false and only the portable code exists. Data-movement and filter variants give the same bits
// (no FMA contraction), so the choice only changes speed; the GEMM micro-kernels (gemm.hpp) use
// FMA, whose single rounding may change the last bits of a dot product. Environment switches
// force the portable code (read once, at the first query) so that tests cover both paths on any
// machine:
//   DMLOPS_DISABLE_AVX2=1     no AVX2 (nor AVX2+FMA, nor AVX-512) kernels
//   DMLOPS_DISABLE_AVX512=1   no AVX-512 kernels (the AVX2 ones run; nor the AVX512_VBMI shuffles)
//   DMLOPS_DISABLE_F16C=1     half <-> float conversions in software
#pragma once

#include <cstdint>

#include "dmlops/core/platform.hpp"

namespace dmlops {

// The CPU has AVX2 and DMLOPS_DISABLE_AVX2 is unset (or "0").
bool avx2_enabled();
// avx2_enabled() and the CPU has FMA3 (every AVX2 CPU made so far has it).
bool avx2_fma_enabled();
// avx2_fma_enabled(), the CPU has AVX-512F and DMLOPS_DISABLE_AVX512 is unset (or "0").
bool avx512_enabled();
// avx512_enabled() and the CPU has AVX-512BW: byte masks on loads and stores (LineAssembler).
bool avx512bw_enabled();
// avx512_enabled() and the CPU has AVX-512BW and AVX512_VBMI (Ice Lake and later, Zen 4 and 5):
// the data-movement shuffles that permute bytes across a 64-byte vector (rows.hpp).
bool avx512_vbmi_enabled();
// The CPU has F16C (and AVX) and DMLOPS_DISABLE_F16C is unset (or "0").
bool f16c_enabled();
// Vector FMAs per cycle at the width the kernels use: 1 for AVX-512 on a CPU that runs it in
// halves (Zen 4), else 2 (Intel's AVX-512 and AVX2 cores, Zen 5; the portable code's too).
int vector_fmas_per_cycle();

// The two kinds of ISA-specific kernels below, which may run different variants (a CPU with AVX2
// and no FMA runs the AVX2 data-movement kernels and the baseline FMA ones).
enum class KernelKind : std::uint8_t {
  Fma,   // SimdKernel: avx512 (AVX-512F, AVX2, FMA), avx2 (AVX2 and FMA) or the baseline
  Avx2,  // IsaKernel and the other data-movement variants: avx2 (no FMA) or the baseline
};
// The instruction set the kernels of that kind run on this CPU, as plans, DMLOPS_VERBOSE and the
// benchmark report name it (the one place that names one): "avx512", "avx2", or the build's
// baseline: "sse2" (x86-64, whose baseline is SSE2), "neon" (Arm64, where the compiler vectorises
// the portable code with NEON) or "portable" (other processors: the plain C++ fallback).
const char* kernel_isa(KernelKind kind);

// IsaKernel<&body>::run(args...): the two-variant pattern above without hand-written wrappers.
// `body` is a hot loop written once as a DMLOPS_ALWAYS_INLINE inline function; IsaKernel
// instantiates a baseline and a target("avx2") wrapper around it (the body is inlined into
// each and vectorised for that ISA) and calls the one avx2_enabled() picks, chosen once:
//
//   template <class A>
//   DMLOPS_ALWAYS_INLINE inline void add_rows(A* acc, const A* x, std::int64_t n) { ... }
//   IsaKernel<&add_rows<float>>::run(acc, x, n);
//
// Like the other AVX2 variants it has no FMA, so both give the same bits.
template <auto kBody>
struct IsaKernel;

template <class R, class... Args, R (*kBody)(Args...)>
struct IsaKernel<kBody> {
  // Inlined at the call site: a guard test and one indirect call, like a call through an ifunc.
  DMLOPS_ALWAYS_INLINE static R run(Args... args) {
#if DMLOPS_X86
    static R (*const chosen)(Args...) = avx2_enabled() ? avx2 : baseline;
    return chosen(args...);
#else
    return baseline(args...);
#endif
  }

 private:
  static R baseline(Args... args) { return kBody(args...); }
#if DMLOPS_X86
  DMLOPS_TARGET("avx2") static R avx2(Args... args) { return kBody(args...); }
#endif
};

// The vector types of simd.hpp (declared here, defined there): Isa::V holds Isa::kLanes values
// of Acc, with load, store, madd...
template <class Acc>
struct SimdPortable;
template <class Acc>
struct SimdAvx2;
template <class Acc>
struct SimdAvx512;

// The lane count of the vector type SimdKernel picks for Acc: a full AVX-512 register with
// avx512_enabled(), else an AVX2 one (the portable type has as many lanes as AVX2's).
template <class Acc>
std::int64_t simd_lanes() {
  return (avx512_enabled() ? 64 : 32) / static_cast<std::int64_t>(sizeof(Acc));
}

// SimdKernel<Kernel, Acc>::run(args...): a kernel written once over a vector type, for FMA
// kernels whose data layout follows the register width. Kernel<Isa> is a class template whose
// static DMLOPS_ALWAYS_INLINE run() uses Isa's operations only; SimdKernel instantiates it
// inside a baseline, a target("avx2,fma") and a target("avx512f") function (where those
// operations inline) and calls the one avx512_enabled() / avx2_fma_enabled() pick, chosen once,
// so its lane count is simd_lanes<Acc>(). The two FMA variants give the same bits (every term
// one fused multiply-add, in the same order); the portable one rounds products and sums apart.
template <template <class> class Kernel, class Acc, class Signature = decltype(Kernel<SimdPortable<Acc>>::run)>
struct SimdKernel;

template <template <class> class Kernel, class Acc, class R, class... Args>
struct SimdKernel<Kernel, Acc, R(Args...)> {
  DMLOPS_ALWAYS_INLINE static R run(Args... args) {
#if DMLOPS_X86
    static R (*const chosen)(Args...) = avx512_enabled() ? avx512 : avx2_fma_enabled() ? avx2 : portable;
    return chosen(args...);
#else
    return portable(args...);
#endif
  }

 private:
  // flatten: Isa's operations (not always_inline: they could not be, inside a baseline
  // template) inline here, where the target allows them, however large.
  DMLOPS_FLATTEN static R portable(Args... args) { return Kernel<SimdPortable<Acc>>::run(args...); }
#if DMLOPS_X86
  DMLOPS_FLATTEN DMLOPS_TARGET("avx2,fma") static R avx2(Args... args) {
    return Kernel<SimdAvx2<Acc>>::run(args...);
  }
  DMLOPS_FLATTEN DMLOPS_TARGET("avx512f,avx2,fma") static R avx512(Args... args) {
    return Kernel<SimdAvx512<Acc>>::run(args...);
  }
#endif
};

}  // namespace dmlops
