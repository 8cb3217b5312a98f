// Which instruction sets the kernels may use, decided once per process.
//
// Kernels with an ISA-specific variant compile it with __attribute__((target(...))) next to the
// portable one and ask here which to run. Data-movement and filter variants give the same bits
// (no FMA contraction), so the choice only changes speed; the GEMM micro-kernels (gemm.hpp) use
// FMA, whose single rounding may change the last bits of a dot product. Environment switches
// force the portable code (read once, at the first query) so that tests cover both paths on any
// machine:
//   DMLOPS_DISABLE_AVX2=1     no AVX2 (nor AVX2+FMA, nor AVX-512) kernels
//   DMLOPS_DISABLE_AVX512=1   no AVX-512 kernels (the AVX2 ones run)
//   DMLOPS_DISABLE_F16C=1     half <-> float conversions in software
#pragma once

namespace dmlops {

// The CPU has AVX2 and DMLOPS_DISABLE_AVX2 is unset (or "0").
bool avx2_enabled();
// avx2_enabled() and the CPU has FMA3 (every AVX2 CPU made so far has it).
bool avx2_fma_enabled();
// avx2_fma_enabled(), the CPU has AVX-512F and DMLOPS_DISABLE_AVX512 is unset (or "0").
bool avx512_enabled();
// The CPU has F16C (and AVX) and DMLOPS_DISABLE_F16C is unset (or "0").
bool f16c_enabled();

}  // namespace dmlops
