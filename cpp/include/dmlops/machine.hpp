// The machine's arithmetic ceiling, measured rather than assumed: the benchmark report
// (python -m dmlops.bench) divides a convolution's FLOP/s by it.
//
// fma_peak_gflops runs a loop that keeps independent FMA chains in registers (no loads or
// stores) on `threads` std::threads for about `milliseconds` each, and returns the sum of the
// threads' rates in GFLOP/s (an FMA on one lane counts two FLOPs). The vector width is the
// one the GEMM kernels use, chosen through core/cpu.hpp (so DMLOPS_DISABLE_AVX512 and
// DMLOPS_DISABLE_AVX2 apply here too); kernel_isa(KernelKind::Fma) names it (on "sse2" and the
// other baselines an FMA is a multiply and an add, still counted as 2 FLOPs).
#pragma once

namespace dmlops {

// threads >= 1 and milliseconds > 0; throws InvalidArgument otherwise.
double fma_peak_gflops(int threads, double milliseconds);

}  // namespace dmlops
