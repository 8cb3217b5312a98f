// Which instruction sets the kernels may use, decided once per process.
//
// Kernels with an ISA-specific variant compile it with __attribute__((target(...))) next to the
// portable one and ask here which to run. Environment switches force the portable code (read
// once, at the first query) so that tests cover both paths on any machine:
//   DMLOPS_DISABLE_AVX2=1   no AVX2 kernels
//   DMLOPS_DISABLE_F16C=1   half <-> float conversions in software
#pragma once

namespace dmlops {

// The CPU has AVX2 and DMLOPS_DISABLE_AVX2 is unset (or "0").
bool avx2_enabled();
// The CPU has F16C (and AVX) and DMLOPS_DISABLE_F16C is unset (or "0").
bool f16c_enabled();

}  // namespace dmlops
