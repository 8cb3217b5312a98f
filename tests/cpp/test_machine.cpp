// The FMA-peak probe of the benchmark report: it names the ISA the GEMM kernels use, returns a
// plausible rate, and rejects bad arguments.
#include <gtest/gtest.h>

#include <string>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/machine.hpp"

namespace dmlops {
namespace {

TEST(Machine, KernelIsaFollowsTheCpuSwitches) {
  const std::string fma = kernel_isa(KernelKind::Fma), avx2 = kernel_isa(KernelKind::Avx2);
  const std::string baseline = DMLOPS_X86 ? "sse2" : DMLOPS_ARM64 ? "neon" : "portable";
  EXPECT_EQ(fma, avx512_enabled() ? "avx512" : avx2_fma_enabled() ? "avx2" : baseline);
  EXPECT_EQ(avx2, avx2_enabled() ? "avx2" : baseline);
}

TEST(Machine, FmaPeakIsPositiveAndBelowAnyRealCpu) {
  // Only bounds that hold on a machine busy with other work: a share of a CPU can be tiny.
  // Above: 10 GHz x 2 AVX-512 FMA units x 32 FLOPs per thread.
  for (int threads : {1, 2}) {
    const double gflops = fma_peak_gflops(threads, 5.0);
    EXPECT_GT(gflops, 0.0);
    EXPECT_LT(gflops, 640.0 * threads);
  }
}

TEST(Machine, FmaPeakRejectsBadArguments) {
  EXPECT_THROW(fma_peak_gflops(0, 1.0), InvalidArgument);
  EXPECT_THROW(fma_peak_gflops(1, 0.0), InvalidArgument);
  EXPECT_THROW(fma_peak_gflops(1, -1.0), InvalidArgument);
}

}  // namespace
}  // namespace dmlops
