// Which instruction sets the kernels may use, decided once per process.
//
// Kernels with an ISA-specific variant compile it with __attribute__((target(...))) next to the
// portable one and ask here which to run. Variants give the same bits (no FMA contraction), so
// the choice only changes speed. DMLOPS_DISABLE_AVX2=1 forces the portable code (read once, at
// the first query) so that tests cover both.
#pragma once

namespace dmlops {

// The CPU has AVX2 and DMLOPS_DISABLE_AVX2 is unset (or "0").
bool avx2_enabled();

}  // namespace dmlops
