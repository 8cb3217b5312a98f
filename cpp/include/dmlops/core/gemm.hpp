// Packed matrix product: the arithmetic engine behind convolution (and any operator that is
// a GEMM over packed panels).
//
//   C[M x N] = A[M x K] * B[K x N]
//
// A is packed in panels of kGemmRows rows (pack_gemm_a): panel p holds rows p*R .. p*R+R-1,
// column by column (K groups of R values; rows past M are zero), so the micro-kernel reads one
// contiguous group per k. B is a row-major panel (row stride ldb) whose width N is a multiple
// of gemm_columns<Acc>(). C receives whole tiles: it needs round_up(M, kGemmRows) rows of
// ldc >= N. K is not blocked: every C element is one dot product summed in increasing k, so
// the result does not depend on how a caller splits M or N (hence not on the thread count).
//
// Micro-kernels: 6 x 16 floats / 6 x 8 doubles in twelve AVX2 registers with FMA, chosen at
// run time by avx2_fma_enabled(); the portable fallback computes the same tiles with separate
// multiplies and adds, so its last bits may differ from the FMA kernel's.
#pragma once

#include <cstdint>

namespace dmlops {

inline constexpr std::int64_t kGemmRows = 6;
template <class Acc>
constexpr std::int64_t gemm_columns() {
  return 32 / sizeof(Acc) * 2;  // two AVX2 registers per row
}

inline std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Packs A (M x K; element (i, k) from `at(i, k)`) into `packed` (round_up(M, kGemmRows) * K values).
template <class Acc, class At>
void pack_gemm_a(std::int64_t M, std::int64_t K, At&& at, Acc* packed) {
  for (std::int64_t p = 0; p < M; p += kGemmRows) {
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t r = 0; r < kGemmRows; ++r) *packed++ = p + r < M ? static_cast<Acc>(at(p + r, k)) : Acc(0);
    }
  }
}

// C = A * B over whole tiles (see above): M rows (padded to kGemmRows), N columns (a multiple
// of gemm_columns<Acc>()).
void gemm_packed(std::int64_t M, std::int64_t N, std::int64_t K, const float* a_packed, const float* b,
                 std::int64_t ldb, float* c, std::int64_t ldc);
void gemm_packed(std::int64_t M, std::int64_t N, std::int64_t K, const double* a_packed, const double* b,
                 std::int64_t ldb, double* c, std::int64_t ldc);

}  // namespace dmlops
