#include "dmlops/core/direct.hpp"

#include <algorithm>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/simd.hpp"

namespace dmlops {
namespace {

template <class Isa>
struct WindowProduct {
  using Acc = typename Isa::Acc;
  using V = typename Isa::V;
  static constexpr std::int64_t L = Isa::kLanes;
  static constexpr bool kWide = L * sizeof(Acc) == 64;  // AVX-512: 32 registers, else 16
  static constexpr int kMaxVectors = kWide ? 4 : 2;

  // Positions per tile: its sums, the weights and the broadcast fit the register file
  // (AVX-512: 6 x 4 + 4 + 1 of 32, AVX2: 6 x 2 + 2 + 1 of 16). GCC keeps a broadcast that feeds
  // several FMAs in a register; a seventh row would spill a sum (an embedded-broadcast FMA, which
  // would need no register, is slower on Zen 5).
  static constexpr int positions(int vectors) {
    if (kWide) return vectors == 4 ? 6 : 12;
    return vectors == 2 ? 6 : 12;
  }

  // A tile's sums, position-major (out[j * W + v * L]): from out with `accumulate`, else zero.
  template <int kVectors, int kCount>
  DMLOPS_ALWAYS_INLINE static void load_sums(V (&acc)[kCount][kVectors], bool accumulate, const Acc* out) {
    constexpr std::int64_t W = kVectors * L;
DMLOPS_UNROLL(16)
    for (int j = 0; j < kCount; ++j) {
DMLOPS_UNROLL(4)
      for (int v = 0; v < kVectors; ++v) acc[j][v] = accumulate ? Isa::load(out + j * W + v * L) : Isa::zero();
    }
  }
  // ... stored, with the bias added and the relu applied first when `sums` asks (a last pass).
  template <int kVectors, int kCount>
  DMLOPS_ALWAYS_INLINE static void store_sums(V (&acc)[kCount][kVectors], const DirectSums& sums, Acc* out) {
    constexpr std::int64_t W = kVectors * L;
    if (sums.bias) {
      V bias[kVectors];
DMLOPS_UNROLL(4)
      for (int v = 0; v < kVectors; ++v) bias[v] = Isa::load(sums.bias + v * L);
DMLOPS_UNROLL(16)
      for (int j = 0; j < kCount; ++j) {
DMLOPS_UNROLL(4)
        for (int v = 0; v < kVectors; ++v) acc[j][v] = Isa::add(acc[j][v], bias[v]);
      }
    }
    if (sums.relu) {
DMLOPS_UNROLL(16)
      for (int j = 0; j < kCount; ++j) {
DMLOPS_UNROLL(4)
        for (int v = 0; v < kVectors; ++v) acc[j][v] = Isa::relu(acc[j][v]);
      }
    }
DMLOPS_UNROLL(16)
    for (int j = 0; j < kCount; ++j) {
DMLOPS_UNROLL(4)
      for (int v = 0; v < kVectors; ++v) Isa::store(out + j * W + v * L, acc[j][v]);
    }
  }

  // One tap of a tile whose positions lie kStep elements apart from x: the tap's kVectors
  // weight vectors from w, each position's input broadcast once against them.
  template <int kVectors, int kCount, int kStep>
  DMLOPS_ALWAYS_INLINE static void row_tap(V (&acc)[kCount][kVectors], const Acc* x, const Acc* w) {
    V weights[kVectors];
DMLOPS_UNROLL(4)
    for (int v = 0; v < kVectors; ++v) weights[v] = Isa::load(w + v * L);
DMLOPS_UNROLL(16)
    for (int j = 0; j < kCount; ++j) {
      const V b = Isa::broadcast(x + j * kStep);
DMLOPS_UNROLL(4)
      for (int v = 0; v < kVectors; ++v) acc[j][v] = Isa::madd(b, weights[v], acc[j][v]);
    }
  }

  // kCount positions x kVectors weight vectors: output position j reads offsets[j] + tap offset,
  // addressed as position 0's window plus j's displacement from it (the same in every plane and
  // tap): one pointer per tap and kCount - 1 displacements for the whole tile. A pointer per
  // position, rebuilt per channel, left GCC short of general registers in the 5 x 4 tile, which
  // it then kept in vector registers and moved back per tap: 3x3 512@7's 5-position tiles ran
  // at 85% of the 6-position tiles' speed on Zen 4, now at the same speed (prepared 512@7 0.93x
  // the time). With AVX2 (and SSE2, NEON) the tap's pointer is opaque, so that each broadcast
  // addresses it plus a displacement in one instruction: GCC otherwise adds the tap offset to
  // each displacement first (an add per position and tap: 30 instructions for a tap's 12 FMAs,
  // not 25). On Zen 3,
  // 3x3 512@7 and s2 512@14 (rows of 7, general tiles) 0.93-0.95x the time; AVX-512's tiles on
  // the 16-core Xeon ran 1.01-1.04x the time so, and keep the compiler's addressing.
  template <int kVectors, int kCount>
  DMLOPS_ALWAYS_INLINE static void tile(std::int64_t channels, std::int64_t taps, const Acc* const* planes,
                                          const std::int64_t* tap_offsets, const std::int64_t* offsets,
                                          const Acc* filter, const DirectSums& sums, Acc* out) {
    constexpr std::int64_t W = kVectors * L;
    V acc[kCount][kVectors];
    load_sums<kVectors, kCount>(acc, sums.accumulate, out);
    std::int64_t delta[kCount];  // position j's window from position 0's: the same in every plane
DMLOPS_UNROLL(16)
    for (int j = 0; j < kCount; ++j) delta[j] = offsets[j] - offsets[0];
    const std::int64_t first = offsets[0];
    const Acc* w = filter;
    for (std::int64_t c = 0; c < channels; ++c) {
      const Acc* window = planes[c] + first;  // position 0's window in this channel
      for (std::int64_t t = 0; t < taps; ++t, w += W) {
        const Acc* at = window + tap_offsets[t];
        if constexpr (!kWide) DMLOPS_OPAQUE(at);
        V weights[kVectors];
DMLOPS_UNROLL(4)
        for (int v = 0; v < kVectors; ++v) weights[v] = Isa::load(w + v * L);
DMLOPS_UNROLL(16)
        for (int j = 0; j < kCount; ++j) {
          const V x = Isa::broadcast(at + delta[j]);
DMLOPS_UNROLL(4)
          for (int v = 0; v < kVectors; ++v) acc[j][v] = Isa::madd(x, weights[v], acc[j][v]);
        }
      }
    }
    store_sums<kVectors, kCount>(acc, sums, out);
  }

  // A pointwise tile whose planes are `plane_stride` apart and whose positions lie one element
  // apart (x[c * plane_stride + j]): one pointer per channel instead of one per position, so
  // the loop is the broadcasts and FMAs (1x1 layers run 2 FMAs per cycle on Intel's AVX-512
  // cores, which the per-position addresses kept from them). Same FMA chain per output.
  // A pass of a pointwise tile reads one line from each of its channels' planes, dozens of
  // streams at once, more than the hardware prefetcher follows: the line after this tile's is
  // asked for one channel at a time, so the tiles that reach it find it in cache
  // (1x1 256>64@56 15-19% faster at 1-2 threads on an Intel Xeon, 512>128@28 6%).
  static constexpr std::int64_t kPrefetchAhead = 64 / sizeof(Acc);
  template <int kVectors, int kCount>
  DMLOPS_ALWAYS_INLINE static void pointwise_tile(std::int64_t channels, const Acc* x, std::int64_t plane_stride,
                                                  const Acc* filter, const DirectSums& sums, Acc* out) {
    constexpr std::int64_t W = kVectors * L;
    V acc[kCount][kVectors];
    load_sums<kVectors, kCount>(acc, sums.accumulate, out);
    const Acc* w = filter;
    for (std::int64_t c = 0; c < channels; ++c, x += plane_stride, w += W) {
      DMLOPS_PREFETCH(x + kPrefetchAhead);
      row_tap<kVectors, kCount, 1>(acc, x, w);
    }
    store_sums<kVectors, kCount>(acc, sums, out);
  }

  // A tile of positions in one row of the planes, kStep elements apart (x[first + j * kStep]):
  // one pointer per channel and per tap, the positions as constant displacements. The general
  // tile holds a displacement per position: 12 of them and the loop's own do not fit the 16
  // general registers, and the 12 x 2 tile spilled them (~60% of the FMA peak on an Intel Xeon,
  // where 6 x 4 reached 76%). Used for the tiles of 12 positions only (positions_of): on the 16-core
  // Xeon, paired, the layers that take 2-vector blocks ran 0.87-0.99x the time at 8 and 16
  // threads (3x3 256@14 0.80-0.95x at 16 in three calls), 0.89-1.01x at 4; on Zen 4, where one
  // FMA per cycle leaves the addressing idle time, 0.97-1.01x. Same FMA chain per output.
  // With kTriples, the taps come in rows of three adjacent ones (see kTripleTiles).
  template <int kVectors, int kCount, int kStep, bool kTriples = false>
  DMLOPS_ALWAYS_INLINE static void row_tile(std::int64_t channels, std::int64_t taps, const Acc* const* planes,
                                            const std::int64_t* tap_offsets, std::int64_t first, const Acc* filter,
                                            const DirectSums& sums, Acc* out) {
    constexpr std::int64_t W = kVectors * L;
    V acc[kCount][kVectors];
    load_sums<kVectors, kCount>(acc, sums.accumulate, out);
    const Acc* w = filter;
    for (std::int64_t c = 0; c < channels; ++c) {
      const Acc* row = planes[c] + first;
      if constexpr (kTriples) {
        for (std::int64_t t = 0; t < taps; t += 3, w += 3 * W) {
          const Acc* const taps_row = row + tap_offsets[t];
DMLOPS_UNROLL(3)
          for (int k = 0; k < 3; ++k) {
            // Opaque: seeing that tap k + 1's position j reads what tap k's position j + 1 read,
            // GCC keeps those broadcasts for the next tap, in more registers than AVX2 has.
            const Acc* x = taps_row + k;
            DMLOPS_OPAQUE(x);
            row_tap<kVectors, kCount, kStep>(acc, x, w + k * W);
          }
        }
      } else {
        for (std::int64_t t = 0; t < taps; ++t, w += W) row_tap<kVectors, kCount, kStep>(acc, row + tap_offsets[t], w);
      }
    }
    store_sums<kVectors, kCount>(acc, sums, out);
  }

  // Tiles whose taps come in rows of three adjacent ones (3x3 windows, undilated: `triples`)
  // are triple tiles where they lie in one row: row tiles that run a row of taps as three
  // unrolled taps, addressed from one pointer per tap row. Per tap they issue the broadcasts, the
  // weight loads and the FMAs and nearly nothing else (the general 6 x 2 tile adds an address
  // per position, the row tile a tap offset and a loop step): 21 instructions for 12 FMAs where
  // the general tile has 30. A core runs as fast as its FMAs only while its front end keeps up.
  // On a 2-core Zen 3 VM (AVX2 only) whose cores are at times shared (their other hardware
  // threads busy), the general tile in L1 ran at 53-62% of the FMA peak at such times, this one
  // at 83-85% (unshared: 89-95% and 98-99%); 3x3 64@56 went from 0.68-0.74x ONNX Runtime's speed
  // to 0.76-0.84x, 128@28 from 0.70-0.72x to 0.83-0.96x. On the 16-core Xeon's AVX2 kernel: 3x3
  // layers 0.84-0.94x the time. Its AVX-512 kernel (24 FMAs a tap: the addressing a smaller
  // share) ran 1.00-1.04x the time with triple tiles, so they are for the kernels of 16 vector
  // registers (AVX2, and the SSE2 and NEON builds').
  static constexpr bool kTripleTiles = !kWide;

  // The tile of `count` (<= kCount) positions; row_step 1 or 2: they lie in one row, that many
  // elements apart (positions_of), else 0.
  template <int kVectors, int kCount>
  DMLOPS_ALWAYS_INLINE static void tile_of(std::int64_t count, std::int64_t channels, std::int64_t taps,
                                             const Acc* const* planes, const std::int64_t* tap_offsets,
                                             const std::int64_t* offsets, const Acc* filter, const DirectSums& sums, Acc* out,
                                             std::int64_t plane_stride, std::int64_t row_step, bool triples) {
    if (count == kCount) {
      // plane_stride: the planes are evenly spaced and the layer pointwise (see run()).
      bool consecutive = plane_stride != 0;
DMLOPS_UNROLL(16)
      for (int j = 1; j < kCount; ++j) consecutive = consecutive && offsets[j] == offsets[0] + j;
      if (consecutive)
        return pointwise_tile<kVectors, kCount>(channels, planes[0] + tap_offsets[0] + offsets[0], plane_stride, filter,
                                                sums, out);
      if constexpr (kTripleTiles && kCount >= kTripleMinPositions && positions(kVectors) == 6) {
        if (triples && row_step == 1)
          return row_tile<kVectors, kCount, 1, true>(channels, taps, planes, tap_offsets, offsets[0], filter, sums,
                                                     out);
        if (triples && row_step == 2)
          return row_tile<kVectors, kCount, 2, true>(channels, taps, planes, tap_offsets, offsets[0], filter, sums,
                                                     out);
      }
      if constexpr (kCount > 1 && positions(kVectors) > 6) {  // see row_tile
        if (row_step == 1)
          return row_tile<kVectors, kCount, 1>(channels, taps, planes, tap_offsets, offsets[0], filter, sums, out);
        if (row_step == 2)
          return row_tile<kVectors, kCount, 2>(channels, taps, planes, tap_offsets, offsets[0], filter, sums, out);
      }
      return tile<kVectors, kCount>(channels, taps, planes, tap_offsets, offsets, filter, sums, out);
    }
    if constexpr (kCount > 1)
      tile_of<kVectors, kCount - 1>(count, channels, taps, planes, tap_offsets, offsets, filter, sums, out,
                                    plane_stride, row_step, triples);
  }

  // Positions [p, p + m) in tiles of near-equal sizes (20 is 5 + 5 + 5 + 5 with 6, not 6 + 6 + 6 + 2).
  // (A member, not a lambda: a lambda would not inherit the caller's ISA target.)
  template <int kVectors>
  DMLOPS_ALWAYS_INLINE static void even_tiles(std::int64_t p, std::int64_t m, std::int64_t channels, std::int64_t taps,
                                                const Acc* const* planes, const std::int64_t* tap_offsets,
                                                const std::int64_t* offsets, const Acc* filter, const DirectSums& sums, Acc* out,
                                                std::int64_t plane_stride, std::int64_t row_step, bool triples) {
    constexpr int P = positions(kVectors);
    const std::int64_t tiles = (m + P - 1) / P, small = m / tiles, larger = m % tiles;
    for (std::int64_t i = 0; i < tiles; ++i) {
      const std::int64_t count = small + (i < larger ? 1 : 0);
      tile_of<kVectors, P>(count, channels, taps, planes, tap_offsets, offsets + p, filter, sums,
                           out + p * kVectors * L, plane_stride, row_step, triples);
      p += count;
    }
  }

  // The end of the row (positions `step` elements apart) that position p < n is in.
  static std::int64_t row_end(const std::int64_t* offsets, std::int64_t n, std::int64_t step, std::int64_t p) {
    std::int64_t end = p + 1;
    while (end < n && offsets[end] - offsets[end - 1] == step) ++end;
    return end;
  }

  // n positions in tiles. Tiles of 12 positions, more than the general tile has registers for
  // their pointers, are cut at the ends of rows (positions 1 or 2 elements apart) when rows hold
  // half a tile or more, so that they are row tiles (a 14-wide row: 7 + 7); so are tiles of 6
  // that can be triple tiles, when every tile of a row keeps kTripleMinPositions (a 7-wide row
  // would leave a tile of 3: 6 sums, fewer than two FMA pipes need in flight to hide their
  // latency; a 14-wide row tiles of 5, 5 and 4, where general tiles of 6 across rows, with more
  // FMAs per load of the weights, ran 3x3 256@14 and s2 256@28 0.94-0.98x the time on Zen 3, 1
  // and 2 threads, paired). Shorter rows, and AVX-512's tiles of 6, may span rows and take the
  // general tile (6 x 4 row tiles for those that lay in one row made 3x3 512@7 3-11% slower on
  // Zen 4, in two paired runs).
  static constexpr std::int64_t kTripleMinPositions = 5;
  template <int kVectors>
  DMLOPS_ALWAYS_INLINE static void positions_of(std::int64_t channels, std::int64_t taps, const Acc* const* planes,
                                                  const std::int64_t* tap_offsets, const std::int64_t* offsets,
                                                  std::int64_t n, const Acc* filter, const DirectSums& sums, Acc* out,
                                                  std::int64_t plane_stride, bool triples) {
    constexpr int P = positions(kVectors);
    const std::int64_t step = n > 1 ? offsets[1] - offsets[0] : 0;
    triples = triples && kTripleTiles && P == 6;
    bool cut = (P > 6 || triples) && (step == 1 || step == 2);
    if (cut) {  // the row length, from the first whole row (the band may start inside one)
      const std::int64_t first = row_end(offsets, n, step, 0);
      const std::int64_t row = first == n ? n : std::max(first, row_end(offsets, n, step, first) - first);
      cut = P > 6 ? first == n || row >= P / 2 : row / ((row + P - 1) / P) >= kTripleMinPositions;
    }
    if (!cut)
      return even_tiles<kVectors>(0, n, channels, taps, planes, tap_offsets, offsets, filter, sums, out, plane_stride,
                                  0, false);
    for (std::int64_t p = 0; p < n;) {
      const std::int64_t end = row_end(offsets, n, step, p);
      even_tiles<kVectors>(p, end - p, channels, taps, planes, tap_offsets, offsets, filter, sums, out, plane_stride,
                           step, triples);
      p = end;
    }
  }

  DMLOPS_ALWAYS_INLINE static void run(std::int64_t channels, std::int64_t taps, const Acc* const* planes,
                                         const std::int64_t* tap_offsets, const std::int64_t* offsets, std::int64_t n,
                                         std::int64_t vectors, const Acc* filter, const DirectSums& sums, Acc* out) {
    if (n <= 0) return;
    // Pointwise (one tap) with evenly spaced planes: a tile of positions one element apart
    // takes pointwise_tile (0: it cannot).
    std::int64_t plane_stride = taps == 1 && channels > 1 ? planes[1] - planes[0] : 0;
    for (std::int64_t c = 2; c < channels && plane_stride != 0; ++c) {
      if (planes[c] - planes[c - 1] != plane_stride) plane_stride = 0;
    }
    // Taps in rows of three adjacent ones (kTripleTiles).
    bool triples = taps % 3 == 0;
    for (std::int64_t t = 0; t < taps && triples; t += 3)
      triples = tap_offsets[t + 1] == tap_offsets[t] + 1 && tap_offsets[t + 2] == tap_offsets[t] + 2;
    if constexpr (kMaxVectors >= 4) {
      if (vectors == 4)
        return positions_of<4>(channels, taps, planes, tap_offsets, offsets, n, filter, sums, out, plane_stride,
                               triples);
    }
    if (vectors == 2)
      return positions_of<2>(channels, taps, planes, tap_offsets, offsets, n, filter, sums, out, plane_stride,
                             triples);
    positions_of<1>(channels, taps, planes, tap_offsets, offsets, n, filter, sums, out, plane_stride, triples);
  }
};

template <class Isa>
struct PackFilter {
  using Acc = typename Isa::Acc;
  DMLOPS_ALWAYS_INLINE static void run(const Acc* rows, std::int64_t ld, std::int64_t used, std::int64_t K,
                                         std::int64_t width, Acc* dst) {
    std::int64_t o = 0;
    for (; o + 8 <= used; o += 8) {
      std::int64_t k = 0;
      for (; k + 8 <= K; k += 8) Isa::transpose8(rows + o * ld + k, ld, dst + k * width + o, width);
      for (; k < K; ++k) {
        for (std::int64_t i = 0; i < 8; ++i) dst[k * width + o + i] = rows[(o + i) * ld + k];
      }
    }
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t i = o; i < width; ++i) dst[k * width + i] = i < used ? rows[i * ld + k] : Acc(0);
    }
  }
};

}  // namespace

std::int64_t direct_vectors() { return avx512_enabled() ? 4 : 2; }

void direct_window_product(std::int64_t channels, std::int64_t taps, const float* const* planes,
                           const std::int64_t* tap_offsets, const std::int64_t* offsets, std::int64_t n,
                           std::int64_t vectors, const float* filter, const DirectSums& sums, float* out) {
  SimdKernel<WindowProduct, float>::run(channels, taps, planes, tap_offsets, offsets, n, vectors, filter, sums, out);
}

void pack_direct_filter(const float* rows, std::int64_t ld, std::int64_t used, std::int64_t K, std::int64_t width,
                        float* dst) {
  SimdKernel<PackFilter, float>::run(rows, ld, used, K, width, dst);
}

}  // namespace dmlops
