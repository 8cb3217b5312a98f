// Which instruction sets the kernels may use, decided once per process.
//
// Kernels with an ISA-specific variant compile it with __attribute__((target(...))) next to the
// portable one and ask here which to run. Data-movement and filter variants give the same bits
// (no FMA contraction), so the choice only changes speed; the GEMM micro-kernels (gemm.hpp) use
// FMA, whose single rounding may change the last bits of a dot product. DMLOPS_DISABLE_AVX2=1 forces the portable code (read once, at
// the first query) so that tests cover both.
#pragma once

namespace dmlops {

// The CPU has AVX2 and DMLOPS_DISABLE_AVX2 is unset (or "0").
bool avx2_enabled();
// avx2_enabled() and the CPU has FMA3 (every AVX2 CPU made so far has it).
bool avx2_fma_enabled();

}  // namespace dmlops
