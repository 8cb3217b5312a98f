// The machine's arithmetic ceiling, measured rather than assumed: the benchmark report
// (python -m dmlops.bench) divides a convolution's FLOP/s by it.
//
// fma_peak_gflops runs a loop that keeps independent FMA chains in registers (no loads or
// stores) on `threads` std::threads for about `milliseconds` each, and returns the sum of the
// threads' rates in GFLOP/s (an FMA on one lane counts two FLOPs). The vector width is the
// one the GEMM kernels use, chosen through core/cpu.hpp (so DMLOPS_DISABLE_AVX512 and
// DMLOPS_DISABLE_AVX2 apply here too); fma_isa() names it.
#pragma once

namespace dmlops {

// "avx512f", "avx2+fma", "sse2" (x86 without FMA: a multiply and an add, still counted as 2
// FLOPs), "neon" (Arm64: the portable kernels, vectorised by the compiler) or "portable".
const char* fma_isa();

// threads >= 1 and milliseconds > 0; throws InvalidArgument otherwise.
double fma_peak_gflops(int threads, double milliseconds);

}  // namespace dmlops
