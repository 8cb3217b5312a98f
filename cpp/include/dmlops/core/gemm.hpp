// Packed matrix product: the arithmetic engine behind convolution (and any operator that is
// a GEMM over packed panels).
//
//   C[M x N] = A[M x K] * B[K x N]
//
// Both operands are packed in the order the micro-kernel reads them:
// - A in panels of kGemmRows rows (pack_gemm_a): panel p holds rows p*R .. p*R+R-1 column by
//   column (K groups of R values; rows past M are zero).
// - B in micro-panels of NR = gemm_columns<Acc>() columns (gemm_b_offset / pack_gemm_b_row):
//   micro-panel q holds columns q*NR .. q*NR+NR-1 row by row (K groups of NR values), so one
//   micro-panel is one contiguous stream. N is a multiple of NR (the caller zero-fills the tail).
// C receives whole tiles: it needs round_up(M, kGemmRows) rows of ldc >= N.
// The epilogue (optional) is applied by the tiles to the sums of the last K block as they store
// them (see GemmEpilogue).
//
// The product is blocked over K (kGemmDepth rows of B, whose micro-panel then stays in L1 while
// the panels of an L2-sized block of A's rows pass over it) and over M (those blocks), but each C element is still summed in one fixed order,
// increasing k, whatever the caller's split of M or N: results do not depend on the thread count.
//
// Micro-kernels: 6 x 16 floats / 6 x 8 doubles in twelve AVX2 registers with FMA, chosen at
// run time by avx2_fma_enabled(); with avx512_enabled(), 6 x 32 floats (two micro-panels) in
// twelve AVX-512 registers, and for a last odd micro-panel 12 x 16 (two panels of A), the same
// FMA chains, so the same bits as AVX2. The portable fallback
// computes the same tiles with separate multiplies and adds, so its last bits may differ from
// the FMA kernels'.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>

#include "dmlops/core/platform.hpp"

namespace dmlops {

inline constexpr std::int64_t kGemmRows = 6;
// K block: 256 rows of a 16-float micro-panel of B are 16 KiB, half of a 32 KiB L1.
inline constexpr std::int64_t kGemmDepth = 256;
// A block of A's rows (x kGemmDepth values) that stays in L2 with room for B's panel and C: a
// quarter of the L2 this CPU reports (256 KiB on the 1 MiB L2 of the Zen 4 and Zen 5 it was
// tuned on).
inline std::int64_t gemm_block_bytes() { return platform::cache_sizes().l2 / 4; }
template <class Acc>
constexpr std::int64_t gemm_columns() {
  return 32 / sizeof(Acc) * 2;  // two AVX2 registers per row
}

inline std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// What the tiles apply to the finished sums before they store them: the operations a pass over C
// after the product would apply, in the same order, so the same bits, without reading C back
// (a bias and a relu so applied were 15% and 14% of 1x1 64>256@56 on a Zen 5).
template <class Acc>
struct GemmEpilogue {
  const Acc* bias = nullptr;  // round_up(M, kGemmRows) values: bias[i] added to row i's sums
  bool relu = false;          // then x > 0 ? x : 0
};

// Packs A (M x K; element (i, k) from `at(i, k)`) into `packed` (round_up(M, kGemmRows) * K values).
template <class Acc, class At>
void pack_gemm_a(std::int64_t M, std::int64_t K, At&& at, Acc* packed) {
  for (std::int64_t p = 0; p < M; p += kGemmRows) {
    const std::int64_t rows = std::min(kGemmRows, M - p);
    if (rows == kGemmRows) {  // a whole panel: no test per element
      for (std::int64_t k = 0; k < K; ++k) {
        for (std::int64_t r = 0; r < kGemmRows; ++r) *packed++ = static_cast<Acc>(at(p + r, k));
      }
      continue;
    }
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t r = 0; r < kGemmRows; ++r) *packed++ = r < rows ? static_cast<Acc>(at(p + r, k)) : Acc(0);
    }
  }
}

// pack_gemm_a of a dense A: row i is a[i * lda .. i * lda + K). The float version transposes
// eight columns of a panel per AVX2 step (a filter of a large layer is packed on every call).
void pack_gemm_a_rows(std::int64_t M, std::int64_t K, const float* a, std::int64_t lda, float* packed);
void pack_gemm_a_rows(std::int64_t M, std::int64_t K, const double* a, std::int64_t lda, double* packed);

// pack_gemm_a's layout from A's columns: column k (A(0, k) .. A(M - 1, k)) is the contiguous
// run column(k)[0 .. M), e.g. a filter whose input channel is its outer axis. Per block of
// kColumnBlock columns (their runs stay in L1), each panel's rows are copied as one short run.
template <class Acc, class Column>
void pack_gemm_a_columns(std::int64_t M, std::int64_t K, Column&& column, Acc* packed) {
  constexpr std::int64_t kColumnBlock = 16;
  const Acc* runs[kColumnBlock];
  for (std::int64_t k0 = 0; k0 < K; k0 += kColumnBlock) {
    const std::int64_t depth = std::min(kColumnBlock, K - k0);
    for (std::int64_t k = 0; k < depth; ++k) runs[k] = column(k0 + k);
    for (std::int64_t p = 0; p < M; p += kGemmRows) {
      Acc* dst = packed + p * K + k0 * kGemmRows;
      const std::int64_t rows = std::min(kGemmRows, M - p);
      for (std::int64_t k = 0; k < depth; ++k, dst += kGemmRows) {
        if (rows == kGemmRows) {
          std::memcpy(dst, runs[k] + p, kGemmRows * sizeof(Acc));  // fixed size: a few vector moves
        } else {
          std::fill_n(std::copy_n(runs[k] + p, rows, dst), kGemmRows - rows, Acc(0));
        }
      }
    }
  }
}

// Where element (k, j) of a packed B with K rows lives.
template <class Acc>
constexpr std::int64_t gemm_b_offset(std::int64_t K, std::int64_t k, std::int64_t j) {
  constexpr std::int64_t NR = gemm_columns<Acc>();
  return j / NR * K * NR + k * NR + j % NR;
}

// Copies `row` (N values, N a multiple of NR) into row k of a packed B with K rows: callers
// build a row contiguously (in L1), then move it in whole micro-panel pieces.
template <class Acc>
void pack_gemm_b_row(Acc* b, std::int64_t K, std::int64_t k, const Acc* row, std::int64_t N) {
  constexpr std::int64_t NR = gemm_columns<Acc>();
  for (std::int64_t j = 0; j < N; j += NR) std::memcpy(b + gemm_b_offset<Acc>(K, k, j), row + j, NR * sizeof(Acc));
}

// One piece of a row of B that the gather packer copies: columns [column, column + length) of
// row k are source[k][offset .. offset + length). A piece lies inside one micro-panel.
struct GemmPiece {
  std::int64_t column, offset, length;
};

// Packs a whole B (K x N, N a multiple of NR) gathered from K source rows, micro-panel by
// micro-panel (each written as one contiguous stream): `pieces` (sorted by column, none crossing a
// multiple of NR) say where each column comes from; columns no piece covers are zero. This is
// the implicit im2col of a convolution: source[k] is an input row shifted by one window tap, and
// a micro-panel that lies in one output row is one piece, so one vector copy per k.
// `column0` (a multiple of NR) is the first column packed: the pieces then start there, and b
// holds columns [column0, column0 + N).
void pack_gemm_b_gather(std::int64_t K, const float* const* source, const GemmPiece* pieces, std::int64_t piece_count,
                        std::int64_t column0, std::int64_t N, float* b);
void pack_gemm_b_gather(std::int64_t K, const double* const* source, const GemmPiece* pieces, std::int64_t piece_count,
                        std::int64_t column0, std::int64_t N, double* b);

// C = A * B over whole tiles (see above): M rows (padded to kGemmRows), N columns (a multiple
// of gemm_columns<Acc>()), both operands packed.
void gemm_packed(std::int64_t M, std::int64_t N, std::int64_t K, const float* a_packed, const float* b_packed,
                 float* c, std::int64_t ldc, const GemmEpilogue<float>& epilogue = {});
void gemm_packed(std::int64_t M, std::int64_t N, std::int64_t K, const double* a_packed, const double* b_packed,
                 double* c, std::int64_t ldc, const GemmEpilogue<double>& epilogue = {});

// C = A * B with A packed on the fly, one K block of an L2-sized block of rows at a time, just
// before the tiles that read it: pack_a(k0, depth, m0, rows, dst) writes rows [m0, m0 + rows)
// (rows a multiple of kGemmRows) of columns [k0, k0 + depth) as rows / kGemmRows panels of depth
// columns (panel q at dst + q * kGemmRows * depth, laid out like pack_gemm_a's). For an A that
// is used once (e.g. a large filter against one block of positions), this saves writing the
// whole packed A out and reading it back. Same tiles and sums as gemm_packed, so the same bits.
template <class Acc>
using GemmPackA = std::function<void(std::int64_t k0, std::int64_t depth, std::int64_t m0, std::int64_t rows, Acc* dst)>;
void gemm_pack_a_inline(std::int64_t M, std::int64_t N, std::int64_t K, const GemmPackA<float>& pack_a,
                        const float* b_packed, float* c, std::int64_t ldc, const GemmEpilogue<float>& epilogue = {});
void gemm_pack_a_inline(std::int64_t M, std::int64_t N, std::int64_t K, const GemmPackA<double>& pack_a,
                        const double* b_packed, double* c, std::int64_t ldc, const GemmEpilogue<double>& epilogue = {});

// out[j] = sum over t of weights[t] * rows[t][j], j in [0, n): a weighted sum of shifted rows
// (a direct convolution with one input channel per output, e.g. depthwise), summed in
// increasing t. It runs AVX2+FMA when avx2_fma_enabled() (then every term is one fused
// multiply-add, the tail included, so the result does not depend on n or alignment, and is the
// chain the GEMM and the depthwise lanes compute: the same bits), else rounds products apart.
void weighted_row_sum(std::int64_t taps, const float* const* rows, const float* weights, std::int64_t n, float* out);
void weighted_row_sum(std::int64_t taps, const double* const* rows, const double* weights, std::int64_t n,
                      double* out);

}  // namespace dmlops
