#include "dmlops/core/gemm.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/scratch.hpp"
#include "dmlops/core/simd.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops {
namespace {

constexpr int R = static_cast<int>(kGemmRows);

// One R x NR tile, portable: the compiler vectorises the j loops.
// Each tile sums K rows; with `accumulate` it adds to C (the sums of the earlier K blocks). With
// an epilogue (the last K block) it adds bias[r] to row r's sums (when there is a bias) and
// applies relu before it stores them: the operations the caller would apply after the product,
// in the same order, so the same bits.
template <class Acc>
void tile_portable(std::int64_t K, const Acc* a, const Acc* b, Acc* c, std::int64_t ldc, bool accumulate,
                   const Acc* bias, bool relu) {
  constexpr int NR = static_cast<int>(gemm_columns<Acc>());
  Acc acc[R][NR] = {};
  if (accumulate) {
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < NR; ++j) acc[r][j] = c[r * ldc + j];
    }
  }
  for (std::int64_t k = 0; k < K; ++k, a += R, b += NR) {
    for (int r = 0; r < R; ++r) {
      const Acc ar = a[r];
      for (int j = 0; j < NR; ++j) acc[r][j] += ar * b[j];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NR; ++j) {
      Acc x = acc[r][j];
      if (bias) x += bias[r];
      c[r * ldc + j] = relu ? (x > Acc(0) ? x : Acc(0)) : x;
    }
  }
}

#if DMLOPS_X86
// The 6 x 16 float tile in twelve registers: per k, two loads of B, six broadcasts of A, twelve FMAs.
DMLOPS_TARGET("avx2,fma") void tile_f32_avx2(std::int64_t K, const float* a, const float* b,
                                                       float* c, std::int64_t ldc, bool accumulate, const float* bias,
                                              bool relu) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if (accumulate) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  }
  for (std::int64_t k = 0; k < K; ++k, a += R, b += 2 * 8) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  __m256 rows[R][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int r = 0; r < R; ++r) {
    if (bias) {
      const __m256 add = _mm256_broadcast_ss(bias + r);
      rows[r][0] = _mm256_add_ps(rows[r][0], add), rows[r][1] = _mm256_add_ps(rows[r][1], add);
    }
    if (relu) {  // max(x, 0) returns its second operand for a NaN or a zero x: x > 0 ? x : 0
      rows[r][0] = _mm256_max_ps(rows[r][0], _mm256_setzero_ps());
      rows[r][1] = _mm256_max_ps(rows[r][1], _mm256_setzero_ps());
    }
    _mm256_storeu_ps(c + r * ldc, rows[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, rows[r][1]);
  }
}

// The AVX-512 float tiles: kPanels panels of A (a, a + a_stride, ...) against kMicro adjacent
// micro-panels of B (b, b + b_stride, ...), kPanels * R x kMicro * 16 floats in zmm registers.
// Per k, kMicro loads of B and kPanels * R broadcasts feed kPanels * R * kMicro FMAs. Every
// element is the same chain of FMAs in the same order as in tile_f32_avx2, so every shape
// gives identical bits.
// - 12 x 32 (2, 2), 24 accumulators: 2 loads of B and 12 broadcasts per 24 FMAs, where 6 x 32
//   spends 8 per 12 (in L1, K 64 to 256: 201-205 GFLOP/s against 180-194 on a Xeon whose FMA
//   peak is 228). Whole layers gain less, where C's stores and B's packing set the pace: on
//   that Xeon at 1 thread transposed 4x4 s2 256>128@16 5% and the 7x7 s2 stem 3-7% faster, 1x1
//   layers within noise.
// - 6 x 32 (1, 2): a last odd panel of A against two micro-panels.
// - 12 x 16 (2, 1): a last odd micro-panel, which the 6 x 16 AVX2 tile would run at half the
//   vector width.
template <int kPanels, int kMicro>
DMLOPS_TARGET("avx512f") void tile_f32_avx512(std::int64_t K, std::int64_t a_stride, std::int64_t b_stride,
                                                       const float* a, const float* b, float* c, std::int64_t ldc,
                                                       bool accumulate, const float* bias, bool relu) {
  constexpr int kRows = kPanels * R;
  __m512 acc[kRows][kMicro];
DMLOPS_UNROLL(12)
  for (int r = 0; r < kRows; ++r) {
DMLOPS_UNROLL(2)
    for (int v = 0; v < kMicro; ++v) acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * 16) : _mm512_setzero_ps();
  }
  for (std::int64_t k = 0; k < K; ++k, a += R, b += 16) {
    __m512 bv[kMicro];
DMLOPS_UNROLL(2)
    for (int v = 0; v < kMicro; ++v) bv[v] = _mm512_loadu_ps(b + v * b_stride);
DMLOPS_UNROLL(12)
    for (int r = 0; r < kRows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r / R * a_stride + r % R]);
DMLOPS_UNROLL(2)
      for (int v = 0; v < kMicro; ++v) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
    }
  }
  if (bias) {
DMLOPS_UNROLL(12)
    for (int r = 0; r < kRows; ++r) {
      const __m512 add = _mm512_set1_ps(bias[r]);
DMLOPS_UNROLL(2)
      for (int v = 0; v < kMicro; ++v) acc[r][v] = _mm512_add_ps(acc[r][v], add);
    }
  }
  if (relu) {  // max(x, 0) returns its second operand for a NaN or a zero x: x > 0 ? x : 0
    // (the masked form of vmaxps: GCC 12 warns that _mm512_max_ps's undefined source is unset)
    const __m512 zero = _mm512_setzero_ps();
DMLOPS_UNROLL(12)
    for (int r = 0; r < kRows; ++r) {
DMLOPS_UNROLL(2)
      for (int v = 0; v < kMicro; ++v) acc[r][v] = _mm512_mask_max_ps(zero, 0xFFFF, acc[r][v], zero);
    }
  }
DMLOPS_UNROLL(12)
  for (int r = 0; r < kRows; ++r) {
DMLOPS_UNROLL(2)
    for (int v = 0; v < kMicro; ++v) _mm512_storeu_ps(c + r * ldc + v * 16, acc[r][v]);
  }
}

// The AVX-512 float tiles by shape (see tile_f32_avx512).
struct Avx512Tiles {
  static constexpr auto quad = tile_f32_avx512<2, 2>;
  static constexpr auto columns = tile_f32_avx512<1, 2>;
  static constexpr auto rows = tile_f32_avx512<2, 1>;
};

// The 6 x 8 double tile, same shape of loop.
DMLOPS_TARGET("avx2,fma") void tile_f64_avx2(std::int64_t K, const double* a, const double* b,
                                                       double* c, std::int64_t ldc, bool accumulate, const double* bias,
                                              bool relu) {
  __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256d c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if (accumulate) {
    c00 = _mm256_loadu_pd(c), c01 = _mm256_loadu_pd(c + 4);
    c10 = _mm256_loadu_pd(c + ldc), c11 = _mm256_loadu_pd(c + ldc + 4);
    c20 = _mm256_loadu_pd(c + 2 * ldc), c21 = _mm256_loadu_pd(c + 2 * ldc + 4);
    c30 = _mm256_loadu_pd(c + 3 * ldc), c31 = _mm256_loadu_pd(c + 3 * ldc + 4);
    c40 = _mm256_loadu_pd(c + 4 * ldc), c41 = _mm256_loadu_pd(c + 4 * ldc + 4);
    c50 = _mm256_loadu_pd(c + 5 * ldc), c51 = _mm256_loadu_pd(c + 5 * ldc + 4);
  }
  for (std::int64_t k = 0; k < K; ++k, a += R, b += 2 * 4) {
    const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
    __m256d x = _mm256_broadcast_sd(a + 0);
    c00 = _mm256_fmadd_pd(x, b0, c00), c01 = _mm256_fmadd_pd(x, b1, c01);
    x = _mm256_broadcast_sd(a + 1);
    c10 = _mm256_fmadd_pd(x, b0, c10), c11 = _mm256_fmadd_pd(x, b1, c11);
    x = _mm256_broadcast_sd(a + 2);
    c20 = _mm256_fmadd_pd(x, b0, c20), c21 = _mm256_fmadd_pd(x, b1, c21);
    x = _mm256_broadcast_sd(a + 3);
    c30 = _mm256_fmadd_pd(x, b0, c30), c31 = _mm256_fmadd_pd(x, b1, c31);
    x = _mm256_broadcast_sd(a + 4);
    c40 = _mm256_fmadd_pd(x, b0, c40), c41 = _mm256_fmadd_pd(x, b1, c41);
    x = _mm256_broadcast_sd(a + 5);
    c50 = _mm256_fmadd_pd(x, b0, c50), c51 = _mm256_fmadd_pd(x, b1, c51);
  }
  __m256d rows[R][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int r = 0; r < R; ++r) {
    if (bias) {
      const __m256d add = _mm256_broadcast_sd(bias + r);
      rows[r][0] = _mm256_add_pd(rows[r][0], add), rows[r][1] = _mm256_add_pd(rows[r][1], add);
    }
    if (relu) {
      rows[r][0] = _mm256_max_pd(rows[r][0], _mm256_setzero_pd());
      rows[r][1] = _mm256_max_pd(rows[r][1], _mm256_setzero_pd());
    }
    _mm256_storeu_pd(c + r * ldc, rows[r][0]);
    _mm256_storeu_pd(c + r * ldc + 4, rows[r][1]);
  }
}
#endif

// No wide tiles (Avx512Tiles): every micro-panel goes through `tile`.
constexpr std::nullptr_t kNoPairTile = nullptr;

// One micro-panel of B (at `b`, its K block `depth` deep) against panels [p0, p1) of A (panel p
// at a_at(p)): two panels at a time with the wide tiles, else one by one.
template <class Acc, class Tile, class PairTile, class PanelAt>
void single_micro_panel(std::int64_t depth, std::int64_t p0, std::int64_t p1, PanelAt a_at, const Acc* b, Acc* c,
                        std::int64_t ldc, bool accumulate, const Acc* bias, bool relu, Tile tile, PairTile wide) {
  const auto bias_at = [&](std::int64_t p) { return bias ? bias + p : nullptr; };
  std::int64_t p = p0;
  if constexpr (!std::is_same_v<PairTile, std::nullptr_t>) {
    for (; p + 2 * kGemmRows <= p1; p += 2 * kGemmRows)
      wide.rows(depth, a_at(p + kGemmRows) - a_at(p), 0, a_at(p), b, c + p * ldc, ldc, accumulate, bias_at(p), relu);
  }
  for (; p < p1; p += kGemmRows) tile(depth, a_at(p), b, c + p * ldc, ldc, accumulate, bias_at(p), relu);
}

// Rows of A per pass: their K block (gemm_block_bytes()) stays in L2 while the micro-panels of B
// pass over it. The blocks only choose which tile runs when; every C element still sums its K
// blocks in increasing order, so the bits do not depend on them.
template <class Acc>
std::int64_t block_rows_of() {
  static const std::int64_t rows = std::max<std::int64_t>(
      kGemmRows, gemm_block_bytes() / (kGemmDepth * std::int64_t{sizeof(Acc)}) / kGemmRows * kGemmRows);
  return rows;
}

// With `pack_a` (gemm_pack_a_inline), each K block of each block of rows is packed into
// `a_block` first and read from there; else `a` is the whole packed A.
template <class Acc, class Tile, class PairTile = std::nullptr_t>
void drive(std::int64_t M, std::int64_t N, std::int64_t K, const Acc* a, const Acc* b, Acc* c, std::int64_t ldc,
           const GemmEpilogue<Acc>& epilogue, Tile tile, PairTile pair_tile = kNoPairTile, const GemmPackA<Acc>* pack_a = nullptr,
           Acc* a_block = nullptr) {
  constexpr std::int64_t NR = gemm_columns<Acc>();
  const std::int64_t block_rows = block_rows_of<Acc>();
  for (std::int64_t k0 = 0; k0 < K; k0 += kGemmDepth) {
    const std::int64_t depth = std::min(kGemmDepth, K - k0);
    // The epilogue with the last K block only.
    const Acc* bias = k0 + depth == K ? epilogue.bias : nullptr;
    const bool relu = k0 + depth == K && epilogue.relu;
    const auto bias_at = [&](std::int64_t p) { return bias ? bias + p : nullptr; };
    for (std::int64_t m0 = 0; m0 < M; m0 += block_rows) {
      const std::int64_t m1 = std::min(M, m0 + block_rows);
      // Panel p's K block: in the whole packed A, or in the block just packed.
      const auto a_at = [&](std::int64_t p) { return pack_a ? a_block + (p - m0) * depth : a + p * K + k0 * kGemmRows; };
      if (pack_a) (*pack_a)(k0, depth, m0, m1 - m0, a_block);
      // Micro-panels of B outside (two at a time with a pair tile): each K block of one stays in
      // L1 while every panel of the A block passes over it.
      for (std::int64_t j = 0; j < N;) {
        const Acc* b_block = b + j * K + k0 * NR;
        if constexpr (!std::is_same_v<PairTile, std::nullptr_t>) {
          if (j + 2 * NR <= N) {
            std::int64_t p = m0;
            for (; p + 2 * kGemmRows <= m1; p += 2 * kGemmRows)
              pair_tile.quad(depth, a_at(p + kGemmRows) - a_at(p), K * NR, a_at(p), b_block, c + p * ldc + j, ldc, k0 > 0,
                             bias_at(p), relu);
            for (; p < m1; p += kGemmRows)
              pair_tile.columns(depth, 0, K * NR, a_at(p), b_block, c + p * ldc + j, ldc, k0 > 0, bias_at(p), relu);
            j += 2 * NR;
            continue;
          }
        }
        single_micro_panel(depth, m0, m1, a_at, b_block, c + j, ldc, k0 > 0, bias, relu, tile, pair_tile);
        j += NR;
      }
    }
  }
}

template <class Acc>
void weighted_row_sum_portable(std::int64_t taps, const Acc* const* rows, const Acc* weights, std::int64_t n, Acc* out) {
  std::fill_n(out, n, Acc(0));
  for (std::int64_t t = 0; t < taps; ++t) {
    const Acc w = weights[t], *row = rows[t];
    for (std::int64_t j = 0; j < n; ++j) out[j] += w * row[j];
  }
}

#if DMLOPS_X86
// Four registers of outputs at a time, summed over every tap before they are stored; float and
// double alike (the depthwise lanes and the GEMM fuse float64 products with AVX2 too, so every
// algorithm of a layer gives the same bits: rounded apart, a depthwise layer of one channel,
// which takes these rows, differed in the last bit from the same channel in a layer of several).
// The last outputs (fewer than a register) are summed from copies of their inputs in a zeroed
// register-sized buffer: no read past a row's end, the same chain per output.
template <class T>
DMLOPS_TARGET("avx2,fma") void weighted_row_sum_avx2(std::int64_t taps, const T* const* rows, const T* weights,
                                                   std::int64_t n, T* out) {
  using Isa = SimdAvx2<T>;
  using V = typename Isa::V;
  constexpr std::int64_t L = Isa::kLanes;
  std::int64_t j = 0;
  for (; j + 4 * L <= n; j += 4 * L) {
    V s[4] = {Isa::zero(), Isa::zero(), Isa::zero(), Isa::zero()};
    for (std::int64_t t = 0; t < taps; ++t) {
      const V w = Isa::broadcast(weights + t);
      for (int k = 0; k < 4; ++k) s[k] = Isa::madd(w, Isa::load(rows[t] + j + k * L), s[k]);
    }
    for (int k = 0; k < 4; ++k) Isa::store(out + j + k * L, s[k]);
  }
  for (; j + L <= n; j += L) {
    V s = Isa::zero();
    for (std::int64_t t = 0; t < taps; ++t) s = Isa::madd(Isa::broadcast(weights + t), Isa::load(rows[t] + j), s);
    Isa::store(out + j, s);
  }
  if (j < n) {
    T in[L] = {}, sums[L];
    V s = Isa::zero();
    for (std::int64_t t = 0; t < taps; ++t) {
      std::memcpy(in, rows[t] + j, static_cast<std::size_t>(n - j) * sizeof(T));
      s = Isa::madd(Isa::broadcast(weights + t), Isa::load(in), s);
    }
    Isa::store(sums, s);
    std::memcpy(out + j, sums, static_cast<std::size_t>(n - j) * sizeof(T));
  }
}
#endif

// Copies one micro-panel row (NR values) as 32-byte vectors: one register move each in the
// AVX2 variant, where memcpy's inline expansion of a fixed size uses 16-byte moves.
template <class Acc>
DMLOPS_ALWAYS_INLINE inline void copy_micro_row(Acc* dst, const Acc* src) {
  constexpr std::int64_t kPieces = gemm_columns<Acc>() * std::int64_t{sizeof(Acc)} / 32;
  for (std::int64_t i = 0; i < kPieces; ++i) platform::copy32(dst + i * 32 / std::int64_t{sizeof(Acc)}, src + i * 32 / std::int64_t{sizeof(Acc)});
}

// Packing reads one micro-panel row from each of K input rows, more streams than the hardware
// prefetcher follows: each row's piece two micro-panels ahead is asked for as this one is copied
// (1x1 64>256@56 and 128>512@28 4-8% faster at 1-2 threads on an Intel Xeon; one panel ahead
// was too late, four no better).
constexpr std::int64_t kPackAhead = 2;
// A run's micro-panels are K * NR values apart, 4 KiB for K = 64 floats: one source row's copies
// into all of them land in one L1 set, which a long run overflows (1x1 64>64@56, B packed whole in
// runs of 49: 0.168 ms, and 0.116 ms in chunks of 8, on a Zen 5 at 1 thread). So a run is copied
// kRunChunk micro-panels at a time, each source row visited once per chunk.
constexpr std::int64_t kRunChunk = 8;
template <class Acc>
DMLOPS_ALWAYS_INLINE inline void pack_b_gather_body(std::int64_t K, const Acc* const* source, const GemmPiece* pieces,
                                                      std::int64_t piece_count, std::int64_t column0, std::int64_t N,
                                                      Acc* b) {
  constexpr std::int64_t NR = gemm_columns<Acc>();
  const GemmPiece* const end = pieces + piece_count;
  const auto whole = [&](const GemmPiece* piece, std::int64_t j) {  // micro-panel j is this one piece
    return piece < end && piece->column == j && piece->length == NR && (piece + 1 == end || piece[1].column >= j + NR);
  };
  std::int64_t i = 0;
  for (std::int64_t j0 = column0; j0 < column0 + N;) {
    // The common case: micro-panels that are each one row piece, each following the last in its
    // rows (a pointwise layer's, or pieces of one output row): fixed-size copies, all of them
    // per source row, so that each of the K rows (as many pages) is visited once per call, not
    // once per micro-panel (2-core Xeon, 1 thread, C++ benchmark: 1x1 64>256@56 0.76-0.80 ->
    // 0.67-0.69 ms, transposed 4x4 s2 1.92-1.95 -> 1.79-1.87 ms).
    std::int64_t run = 0;
    while (j0 + run * NR < column0 + N && whole(pieces + i + run, j0 + run * NR) &&
           pieces[i + run].offset == pieces[i].offset + run * NR)
      ++run;
    if (run > 0) {
      for (std::int64_t q0 = 0; q0 < run; q0 += kRunChunk) {
        const std::int64_t count = std::min(kRunChunk, run - q0), offset = pieces[i].offset + q0 * NR;
        Acc* to = b + q0 * K * NR;
        for (std::int64_t k = 0; k < K; ++k) {
          const Acc* src = source[k] + offset;
          for (std::int64_t q = 0; q < count; ++q) copy_micro_row(to + q * K * NR + k * NR, src + q * NR);
          // kPackAhead micro-panels ahead of each copied one, but only those past the chunk: the
          // others were just copied.
          for (std::int64_t q = std::max(count, kPackAhead); q < count + kPackAhead; ++q) DMLOPS_PREFETCH(src + q * NR);
        }
      }
      i += run, j0 += run * NR, b += run * K * NR;
      continue;
    }
    const std::int64_t first = i;
    while (i < piece_count && pieces[i].column < j0 + NR) ++i;
    std::int64_t covered = 0;
    for (std::int64_t p = first; p < i; ++p) covered += pieces[p].length;
    if (covered < NR) std::fill_n(b, K * NR, Acc(0));  // a tail or a gap
    // Pieces of two output rows, each down all K rows: in blocks of a quarter micro-panel, then
    // one by one (the piece's fields in locals, which the stores cannot be assumed not to change).
    for (std::int64_t p = first; p < i; ++p) {
      const std::int64_t offset = pieces[p].offset, length = pieces[p].length;
      constexpr std::int64_t kQuarter = NR / 4;
      const std::int64_t quarters = length / kQuarter * kQuarter;
      Acc* to = b + (pieces[p].column - j0);
      for (std::int64_t k = 0; k < K; ++k, to += NR) {
        const Acc* src = source[k] + offset;
        std::int64_t j = 0;
        for (; j < quarters; j += kQuarter) std::memcpy(to + j, src + j, kQuarter * sizeof(Acc));
        for (; j < length; ++j) to[j] = src[j];
      }
    }
    j0 += NR, b += K * NR;
  }
}

#if DMLOPS_X86
// Whole panels eight columns at a time: rows r0..r5 transposed in registers (two rows of
// zeros make the 8 x 8 transpose), each column stored as four floats and two.
DMLOPS_TARGET("avx2") void pack_a_rows_avx2(std::int64_t M, std::int64_t K, const float* a, std::int64_t lda,
                                                     float* packed) {
  const std::int64_t whole = M / kGemmRows * kGemmRows;
  const __m256 zero = _mm256_setzero_ps();
  for (std::int64_t p = 0; p < whole; p += kGemmRows) {
    const float* row = a + p * lda;
    float* dst = packed + p * K;
    std::int64_t k = 0;
    for (; k + 8 <= K; k += 8, dst += 8 * kGemmRows) {
      const __m256 r0 = _mm256_loadu_ps(row + k), r1 = _mm256_loadu_ps(row + lda + k);
      const __m256 r2 = _mm256_loadu_ps(row + 2 * lda + k), r3 = _mm256_loadu_ps(row + 3 * lda + k);
      const __m256 r4 = _mm256_loadu_ps(row + 4 * lda + k), r5 = _mm256_loadu_ps(row + 5 * lda + k);
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      // Column c of the eight: rows 0..3 in the 128-bit lane c / 4 of top[c % 4], rows 4..5 in
      // the low half of that lane of bottom[c % 4].
      const __m256 top[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                             _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
      const __m256 bottom[4] = {_mm256_shuffle_ps(t4, zero, 0x44), _mm256_shuffle_ps(t4, zero, 0xEE),
                                _mm256_shuffle_ps(t5, zero, 0x44), _mm256_shuffle_ps(t5, zero, 0xEE)};
      for (int c = 0; c < 4; ++c) {
        _mm_storeu_ps(dst + c * kGemmRows, _mm256_castps256_ps128(top[c]));
        _mm_storel_pi(reinterpret_cast<__m64*>(dst + c * kGemmRows + 4), _mm256_castps256_ps128(bottom[c]));
        _mm_storeu_ps(dst + (c + 4) * kGemmRows, _mm256_extractf128_ps(top[c], 1));
        _mm_storel_pi(reinterpret_cast<__m64*>(dst + (c + 4) * kGemmRows + 4), _mm256_extractf128_ps(bottom[c], 1));
      }
    }
    for (; k < K; ++k, dst += kGemmRows) {
      for (std::int64_t r = 0; r < kGemmRows; ++r) dst[r] = row[r * lda + k];
    }
  }
  if (whole < M) {
    const float* rest = a + whole * lda;
    pack_gemm_a(M - whole, K, [&](std::int64_t i, std::int64_t k) { return rest[i * lda + k]; }, packed + whole * K);
  }
}
#endif

}  // namespace

void pack_gemm_a_rows(std::int64_t M, std::int64_t K, const float* a, std::int64_t lda, float* packed) {
#if DMLOPS_X86
  if (avx2_enabled()) return pack_a_rows_avx2(M, K, a, lda, packed);
#endif
  pack_gemm_a(M, K, [&](std::int64_t i, std::int64_t k) { return a[i * lda + k]; }, packed);
}

void pack_gemm_a_rows(std::int64_t M, std::int64_t K, const double* a, std::int64_t lda, double* packed) {
  pack_gemm_a(M, K, [&](std::int64_t i, std::int64_t k) { return a[i * lda + k]; }, packed);
}

void pack_gemm_b_gather(std::int64_t K, const float* const* source, const GemmPiece* pieces, std::int64_t piece_count,
                        std::int64_t column0, std::int64_t N, float* b) {
  IsaKernel<&pack_b_gather_body<float>>::run(K, source, pieces, piece_count, column0, N, b);
}

void pack_gemm_b_gather(std::int64_t K, const double* const* source, const GemmPiece* pieces, std::int64_t piece_count,
                        std::int64_t column0, std::int64_t N, double* b) {
  IsaKernel<&pack_b_gather_body<double>>::run(K, source, pieces, piece_count, column0, N, b);
}

void weighted_row_sum(std::int64_t taps, const float* const* rows, const float* weights, std::int64_t n, float* out) {
#if DMLOPS_X86
  if (avx2_fma_enabled()) return weighted_row_sum_avx2(taps, rows, weights, n, out);
#endif
  weighted_row_sum_portable(taps, rows, weights, n, out);
}

void weighted_row_sum(std::int64_t taps, const double* const* rows, const double* weights, std::int64_t n,
                      double* out) {
#if DMLOPS_X86
  if (avx2_fma_enabled()) return weighted_row_sum_avx2(taps, rows, weights, n, out);
#endif
  weighted_row_sum_portable(taps, rows, weights, n, out);
}

void gemm_packed(std::int64_t M, std::int64_t N, std::int64_t K, const float* a, const float* b, float* c,
                 std::int64_t ldc, const GemmEpilogue<float>& epilogue) {
#if DMLOPS_X86
  if (avx512_enabled()) return drive(M, N, K, a, b, c, ldc, epilogue, tile_f32_avx2, Avx512Tiles{});
  if (avx2_fma_enabled()) return drive(M, N, K, a, b, c, ldc, epilogue, tile_f32_avx2);
#endif
  drive(M, N, K, a, b, c, ldc, epilogue, tile_portable<float>);
}

void gemm_packed(std::int64_t M, std::int64_t N, std::int64_t K, const double* a, const double* b, double* c,
                 std::int64_t ldc, const GemmEpilogue<double>& epilogue) {
#if DMLOPS_X86
  if (avx2_fma_enabled()) return drive(M, N, K, a, b, c, ldc, epilogue, tile_f64_avx2);
#endif
  drive(M, N, K, a, b, c, ldc, epilogue, tile_portable<double>);
}

void gemm_pack_a_inline(std::int64_t M, std::int64_t N, std::int64_t K, const GemmPackA<float>& pack_a, const float* b,
                        float* c, std::int64_t ldc, const GemmEpilogue<float>& epilogue) {
  const Scratch<float> block(block_rows_of<float>() * kGemmDepth);
#if DMLOPS_X86
  if (avx512_enabled())
    return drive<float>(M, N, K, nullptr, b, c, ldc, epilogue, tile_f32_avx2, Avx512Tiles{}, &pack_a, block.get());
  if (avx2_fma_enabled()) return drive<float>(M, N, K, nullptr, b, c, ldc, epilogue, tile_f32_avx2, kNoPairTile, &pack_a, block.get());
#endif
  drive<float>(M, N, K, nullptr, b, c, ldc, epilogue, tile_portable<float>, kNoPairTile, &pack_a, block.get());
}

void gemm_pack_a_inline(std::int64_t M, std::int64_t N, std::int64_t K, const GemmPackA<double>& pack_a,
                        const double* b, double* c, std::int64_t ldc, const GemmEpilogue<double>& epilogue) {
  const Scratch<double> block(block_rows_of<double>() * kGemmDepth);
#if DMLOPS_X86
  if (avx2_fma_enabled()) return drive<double>(M, N, K, nullptr, b, c, ldc, epilogue, tile_f64_avx2, kNoPairTile, &pack_a, block.get());
#endif
  drive<double>(M, N, K, nullptr, b, c, ldc, epilogue, tile_portable<double>, kNoPairTile, &pack_a, block.get());
}

}  // namespace dmlops
