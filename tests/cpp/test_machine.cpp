// The FMA-peak probe of the benchmark report: it names the ISA the GEMM kernels use, returns a
// plausible rate, scales with threads, and rejects bad arguments.
#include <gtest/gtest.h>

#include <string>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/machine.hpp"

namespace dmlops {
namespace {

TEST(Machine, FmaIsaFollowsTheCpuSwitches) {
  const std::string isa = fma_isa();
  if (avx512_enabled()) {
    EXPECT_EQ(isa, "avx512f");
  } else if (avx2_fma_enabled()) {
    EXPECT_EQ(isa, "avx2+fma");
  } else {
    EXPECT_EQ(isa, "sse2");
  }
}

TEST(Machine, FmaPeakIsPositiveAndBelowAnyRealCpu) {
  const double one = fma_peak_gflops(1, 5.0);
  // Above a 1 GHz scalar SSE2 core, below 10 GHz x 2 AVX-512 FMA units x 32 FLOPs.
  EXPECT_GT(one, 1.0);
  EXPECT_LT(one, 640.0);
  // Two threads do at least the work of one (on one CPU they share it; never less in sum by much).
  EXPECT_GT(fma_peak_gflops(2, 5.0), 0.5 * one);
}

TEST(Machine, FmaPeakRejectsBadArguments) {
  EXPECT_THROW(fma_peak_gflops(0, 1.0), InvalidArgument);
  EXPECT_THROW(fma_peak_gflops(1, 0.0), InvalidArgument);
  EXPECT_THROW(fma_peak_gflops(1, -1.0), InvalidArgument);
}

}  // namespace
}  // namespace dmlops
