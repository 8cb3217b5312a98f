#include "dmlops/core/gather.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/recent.hpp"
#include "dmlops/core/rows.hpp"
#include "dmlops/core/scratch.hpp"
#include "dmlops/core/strided.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops {
namespace {

constexpr std::int64_t kFillOffset = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kBytesPerTask = 32 * 1024;  // below this, splitting costs more than it saves
constexpr std::int64_t kMaxColumnBlockBytes = 64 * 1024;
constexpr std::int64_t kPrefetchRowBytes = 1024;  // input rows this long are prefetched (run_rows)
constexpr std::int64_t kRepeatRowsMaxInBytes = 512;  // Plan::repeat_rows: input rows shorter than this
constexpr std::int64_t kCacheLine = 64;

// The inner output row is cut into runs, each reading the current input row in one pattern.
// Long regular stretches get a bulk kernel; short irregular ones (a padding of two elements,
// nearest resampling by 1.75) are gathered element by element from a precomputed offset list.
enum class RunKind : std::uint8_t {
  Fill,       // the fill value
  Copy,       // in[src + i * step], step +1 (memcpy), -1 (mirror) or +2
  Broadcast,  // in[src] for every element
  Repeat,     // in[src + i / step]: each element `step` times in a row (nearest upsampling)
  Gather,     // in[index[i]], the indices stored from Plan::gather_offsets[src] on
};

struct Run {
  RunKind kind;
  std::int64_t out_begin, length, src, step;
  std::int64_t groups = 0;  // Repeat: source elements read (length / step)
};

// Copy and broadcast runs shorter than this are gathered instead: below it, the per-run
// overhead outweighs the bulk kernel.
constexpr std::int64_t kMinBulkRun = 8;
// Repeat runs need this many source elements (each written `step` times).
constexpr std::int64_t kMinRepeatElements = 4;

// Cuts an explicit stretch of a map (one source index per position, -1 for fill) that starts at
// output position `base` into runs appended to `runs`; the gather runs' source indices are
// appended to `gather_indices`.
void compile_explicit(const std::vector<std::int64_t>& map, std::int64_t base, std::vector<Run>& runs,
                      std::vector<std::int64_t>& gather_indices) {
  const auto size = static_cast<std::int64_t>(map.size());
  std::int64_t gather_begin = -1;  // start of the pending gather run
  const auto flush_gather = [&](std::int64_t o) {
    if (gather_begin < 0) return;
    const std::int64_t n = o - gather_begin;
    runs.push_back(Run{RunKind::Gather, base + gather_begin, n, static_cast<std::int64_t>(gather_indices.size()) - n, 0});
    gather_begin = -1;
  };
  const auto push = [&](std::int64_t o, Run run) {
    flush_gather(o);
    run.out_begin += base;
    runs.push_back(run);
  };
  for (std::int64_t o = 0; o < size;) {
    const std::int64_t s = map[o];
    std::int64_t e = o + 1;
    if (s < 0) {
      while (e < size && map[e] < 0) ++e;
      push(o, Run{RunKind::Fill, o, e - o, -1, 0});
      o = e;
      continue;
    }
    while (e < size && map[e] == s) ++e;
    const std::int64_t k = e - o;  // copies of map[o] from o on
    if (k >= kMinBulkRun) {
      push(o, Run{RunKind::Broadcast, o, k, s, 0});
      o = e;
      continue;
    }
    // Runs of step +1, -1 (a mirror) and +2 (nearest downsampling by 2: copy_row's narrowing
    // kernel; gathered, 8 lanes never fit one window's permute).
    if (k == 1 && e < size && map[e] >= 0 && (std::llabs(map[e] - s) == 1 || map[e] - s == 2)) {
      const std::int64_t step = map[e] - s;
      while (e < size && map[e] >= 0 && map[e] - map[e - 1] == step) ++e;
      if (e - o >= kMinBulkRun) {
        push(o, Run{RunKind::Copy, o, e - o, s, step});
        o = e;
        continue;
      }
    }
    if (k >= 2) {
      // Whole blocks of k copies of s, s+1, s+2, ...
      std::int64_t blocks = 1;
      for (std::int64_t b = o + k; b + k <= size; b += k, ++blocks) {
        bool whole = true;
        for (std::int64_t i = b; whole && i < b + k; ++i) whole = map[i] == s + blocks;
        if (!whole) break;
      }
      if (blocks >= kMinRepeatElements) {
        push(o, Run{RunKind::Repeat, o, blocks * k, s, k, blocks});
        o += blocks * k;
        continue;
      }
    }
    if (gather_begin < 0) gather_begin = o;
    gather_indices.push_back(s);
    ++o;
  }
  flush_gather(size);
}

// Cuts `map` (`size` positions; identity when empty) into runs: its long runs directly (one
// memcpy, fill or broadcast each), stretches of short ones through compile_explicit, which
// finds repeats and gathers in them.
std::vector<Run> compile_runs(const AxisMap& map, std::int64_t size, std::vector<std::int64_t>& gather_indices) {
  if (map.is_identity()) return {Run{RunKind::Copy, 0, size, 0, 1}};
  std::vector<Run> runs;
  std::vector<std::int64_t> stretch;  // explicit indices of consecutive short runs
  std::int64_t stretch_begin = 0, o = 0;
  const auto flush = [&] {
    if (!stretch.empty()) compile_explicit(stretch, stretch_begin, runs, gather_indices);
    stretch.clear();
  };
  for (const MapRun& r : map.runs()) {
    if (r.length >= kMinBulkRun) {
      flush();
      if (r.src < 0) runs.push_back(Run{RunKind::Fill, o, r.length, -1, 0});
      else if (r.step == 0) runs.push_back(Run{RunKind::Broadcast, o, r.length, r.src, 0});
      else runs.push_back(Run{RunKind::Copy, o, r.length, r.src, r.step});
    } else {
      if (stretch.empty()) stretch_begin = o;
      for (std::int64_t i = 0; i < r.length; ++i) stretch.push_back(r.src < 0 ? -1 : r.src + i * r.step);
    }
    o += r.length;
  }
  flush();
  return runs;
}

// `groups` source elements, each written k times.
template <class T>
void repeat_groups(std::byte* dst, std::int64_t dst_step, const std::byte* src, std::int64_t src_step, std::int64_t k,
                   std::int64_t groups) {
  if (dst_step == sizeof(T) && src_step == sizeof(T)) return repeat_contiguous<T>(dst, src, groups, k);
  for (std::int64_t g = 0; g < groups; ++g) fill_row<T>(dst + g * k * dst_step, dst_step, load<T>(src + g * src_step), k);
}

// Elements [b, e) of a repeat run: element i is source element i / k. (A whole run goes to
// repeat_groups directly; this cuts one at column-block edges.)
template <class T>
void repeat(std::byte* dst, std::int64_t dst_step, const std::byte* src, std::int64_t src_step, std::int64_t k,
            std::int64_t b, std::int64_t e) {
  // A partial group at the front, whole groups, a partial group at the back.
  const std::int64_t head_end = std::min(e, (b + k - 1) / k * k);
  if (b < head_end) {
    fill_row<T>(dst, dst_step, load<T>(src + b / k * src_step), head_end - b);
    dst += (head_end - b) * dst_step;
  }
  const std::int64_t first = head_end / k, groups = std::max<std::int64_t>(0, e / k - first);
  src += first * src_step;
  repeat_groups<T>(dst, dst_step, src, src_step, k, groups);
  dst += groups * k * dst_step;
  src += groups * src_step;
  const std::int64_t tail = e - std::max(head_end, (first + groups) * k);
  if (tail > 0) fill_row<T>(dst, dst_step, load<T>(src), tail);
}

// Whether rows outs[r] and ins[r], r < count (count >= 2), lie evenly apart on both sides.
inline bool evenly_spaced(std::byte* const* outs, const std::byte* const* ins, int count) {
  const std::ptrdiff_t out_step = outs[1] - outs[0], in_step = ins[1] - ins[0];
  for (int r = 2; r < count; ++r) {
    if (outs[r] - outs[r - 1] != out_step || ins[r] - ins[r - 1] != in_step) return false;
  }
  return true;
}

template <class T>
void gather(std::byte* dst, std::int64_t dst_step, const std::byte* src, const std::int64_t* offsets, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i, dst += dst_step) std::memcpy(dst, src + offsets[i], sizeof(T));
}

#if DMLOPS_X86
// Gather of 4- or 8-byte elements into contiguous memory with AVX2, from a contiguous input row:
// positions [p0, p0 + n) of a gather run (index[] in elements, from the run's start). Each whole
// block of 32 output bytes from the run's start whose sources lie in a window of 32 input bytes
// inside the row (always, when a nearest map upsamples) has its window's first element in
// window_base and its permute in window_lanes (Plan::window_base): load the window and permute it
// into place. Other blocks, and the elements before the first block and after the last, go
// element by element.
template <int kBytes>
DMLOPS_TARGET("avx2") void gather_window_avx2(std::byte* dst, const std::byte* src, const std::int32_t* index,
                                                        const std::int32_t* window_base, const std::int32_t* window_lanes,
                                                        std::int64_t p0, std::int64_t n) {
  constexpr std::int64_t kLanes = 32 / kBytes;  // elements per vector
  dst -= p0 * kBytes;                            // (dst + p * kBytes is position p's output)
  const auto elements = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t p = from; p < to; ++p) std::memcpy(dst + p * kBytes, src + std::int64_t{index[p]} * kBytes, kBytes);
  };
  const std::int64_t end = p0 + n, first = std::min(end, (p0 + kLanes - 1) / kLanes * kLanes);
  elements(p0, first);
  std::int64_t p = first;
  for (; p + kLanes <= end; p += kLanes) {
    const std::int32_t base = window_base[p];
    if (base < 0) {
      elements(p, p + kLanes);
      continue;
    }
    const __m256i window = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + std::int64_t{base} * kBytes));
    const __m256i lanes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(window_lanes + 2 * p));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + p * kBytes), _mm256_permutevar8x32_epi32(window, lanes));
  }
  elements(p, end);
}
#endif

// 64 bytes of an output row whose input row fits two vectors (128 bytes): output element j of
// the block is element index[j] of the input row (the first vector's elements, then the
// second's; an index is as wide as an element), or the fill value where the fill mask has its
// bytes. A row of under 64 bytes is one block stored under `store`; a longer one is whole blocks,
// its last one ending where the row ends (it rewrites bytes the block before wrote, with the
// same values). Masks have a bit per byte.
struct PermuteBlock {
  std::array<std::uint8_t, 64> index{};
  std::uint64_t fill = 0, store = ~std::uint64_t{0};
  std::int64_t offset = 0;  // bytes into the output row
  // The same for AVX2's vpermd (4- and 8-byte elements, input rows of at most 128 bytes), per
  // 32-bit lane of the block: the 32-bit word of the input row (bits 0-4: its lane in bits 0-2,
  // its vector in bits 3-4), or of the half's window, the fill value (bit 31).
  std::array<std::int32_t, 16> lanes{};
  // Per 32 bytes of the block, in input rows of over two vectors: the first word of a window of
  // 8 words inside the input row that holds every word those bytes read (their lanes count from
  // it), or -1 (none does). Copies, mirrors, folds and broadcasts fill 32 bytes from 8 words or
  // fewer: one load of the window and one vpermd, not four and three blends.
  std::array<std::int32_t, 2> window{-1, -1};
};

// The mask of bytes [0, bytes) of a 64-byte vector.
inline std::uint64_t byte_prefix(std::int64_t bytes) {
  return bytes <= 0 ? 0 : bytes >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bytes) - 1;
}

// Narrow rows take AVX-512BW (byte masks, word permutes), and VBMI to permute bytes: every
// AVX-512 CPU since Skylake has BW (Ice Lake and Zen 4 have VBMI). Without them, AVX2 permutes
// 4- and 8-byte elements (vpermd) from input rows of at most four of its vectors.
bool narrow_rows_avx512(std::int64_t element) {
#if DMLOPS_X86
  if (element == 1) return avx512_vbmi_enabled();
  return (element == 2 || element == 4 || element == 8) && avx512_enabled() && platform::cpu_features().avx512bw;
#else
  (void)element;
  return false;
#endif
}
// The w-th 32-bit word of element `index` (of `element` bytes) of a row: the lane vpermd picks.
constexpr std::int64_t word_of(std::int64_t index, std::int64_t element, std::int64_t w) { return index * (element / 4) + w; }

// The window of 32 output bytes for AVX2: given the input row's word each of their 8 lanes reads
// (negative: none, a fill), the first word of 8 consecutive words inside the row (in_words long)
// that hold them all, with `lanes` rebased to it; -1 (lanes untouched) where no 8 words do. One
// load of the window and one vpermd then make the 32 bytes (nearest gathers, narrow rows).
std::int32_t window_of(std::int32_t* lanes, std::int64_t in_words) {
  std::int64_t low = in_words, high = -1;
  for (int j = 0; j < 8; ++j) {
    if (lanes[j] >= 0) low = std::min<std::int64_t>(low, lanes[j]), high = std::max<std::int64_t>(high, lanes[j]);
  }
  if (in_words < 8 || high - low >= 8) return -1;
  const auto base = static_cast<std::int32_t>(std::clamp<std::int64_t>(low, 0, in_words - 8));
  for (int j = 0; j < 8; ++j) {
    if (lanes[j] >= 0) lanes[j] -= base;
  }
  return base;
}

bool narrow_rows_avx2(std::int64_t element) {
#if DMLOPS_X86
  return (element == 4 || element == 8) && !narrow_rows_avx512(element) && avx2_enabled();
#else
  (void)element;
  return false;
#endif
}
// The longest input row a narrow row loads: two AVX-512 vectors, four AVX2 ones.
std::int64_t narrow_in_limit(std::int64_t element) {
  return narrow_rows_avx512(element) || narrow_rows_avx2(element) ? 128 : 0;
}

#if DMLOPS_X86
// A zmm register in a struct: the permute body below has no target of its own, and Clang refuses
// a bare vector register passed between it and functions compiled for AVX-512 (simd.hpp says
// why); GCC's note on such calls is silenced. Inlined into the wrappers, the calls dissolve.
struct Zmm {
  __m512i r;
};
DMLOPS_IGNORE_PSABI

// What every element size does alike: byte-masked loads, blends and stores (AVX-512BW).
struct NarrowOps {
  DMLOPS_TARGET("avx512f,avx512bw") static Zmm repeat(std::uint64_t v) { return {_mm512_set1_epi64(static_cast<long long>(v))}; }
  DMLOPS_TARGET("avx512f,avx512bw") static Zmm load(std::uint64_t m, const std::byte* p) { return {_mm512_maskz_loadu_epi8(m, p)}; }
  DMLOPS_TARGET("avx512f,avx512bw") static Zmm index(const std::uint8_t* p) { return {_mm512_loadu_si512(p)}; }
  DMLOPS_TARGET("avx512f,avx512bw") static Zmm blend(std::uint64_t m, Zmm v, Zmm f) { return {_mm512_mask_blend_epi8(m, v.r, f.r)}; }
  DMLOPS_TARGET("avx512f,avx512bw") static void store_whole(std::byte* p, Zmm v) { _mm512_storeu_si512(p, v.r); }
  DMLOPS_TARGET("avx512f,avx512bw") static void store(std::byte* p, std::uint64_t m, Zmm v) {
    if (m == ~std::uint64_t{0}) _mm512_storeu_si512(p, v.r);
    else _mm512_mask_storeu_epi8(p, m, v.r);
  }
};

// The permute across two vectors, per element size: the one part that differs.
template <int kBytes>
struct Permute2;
template <>
struct Permute2<1> {
  DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi") static Zmm run(Zmm a, Zmm i, Zmm b) { return {_mm512_permutex2var_epi8(a.r, i.r, b.r)}; }
};
template <>
struct Permute2<2> {
  DMLOPS_TARGET("avx512f,avx512bw") static Zmm run(Zmm a, Zmm i, Zmm b) { return {_mm512_permutex2var_epi16(a.r, i.r, b.r)}; }
};
template <>
struct Permute2<4> {
  DMLOPS_TARGET("avx512f,avx512bw") static Zmm run(Zmm a, Zmm i, Zmm b) { return {_mm512_permutex2var_epi32(a.r, i.r, b.r)}; }
};
template <>
struct Permute2<8> {
  DMLOPS_TARGET("avx512f,avx512bw") static Zmm run(Zmm a, Zmm i, Zmm b) { return {_mm512_permutex2var_epi64(a.r, i.r, b.r)}; }
};

// The rows of `count` narrow inputs (in_bytes each): two masked loads (no byte past the row is
// read), then per block a permute, a blend with the fill value where kFill and a store. Every
// block but the last is whole and lies 64 bytes after the one before (narrow_rows_of), so the
// loop over them is a load of the index, the permute and a store: the stores are the bound,
// and how many of them the core keeps in flight. A loop that also read each block's offset and
// masks and tested its store mask, and reloaded the row's address after each store (which may
// alias it), took 1.5x the time on the 1x64x32x32 float32 reflection to 147x147 (rows of 10
// blocks; a C++ loop on Zen 4: 155-160 us, 104 us so, 86 us fully unrolled for 10 blocks).
template <int kBytes, bool kFill>
DMLOPS_ALWAYS_INLINE inline void permute_rows_with(const std::vector<PermuteBlock>& blocks, std::int64_t in_bytes,
                                                   std::uint64_t fill, std::byte* const* outs, const std::byte* const* ins,
                                                   int count) {
  const Zmm fills = NarrowOps::repeat(fill);
  const std::uint64_t first = byte_prefix(in_bytes), second = byte_prefix(in_bytes - 64);
  const PermuteBlock* const block = blocks.data();
  const PermuteBlock& last = blocks.back();
  for (int r = 0; r < count; ++r) {
    const Zmm a = NarrowOps::load(first, ins[r]), b = NarrowOps::load(second, ins[r] + 64);
    std::byte* out = outs[r];
DMLOPS_UNROLL(4)
    for (const PermuteBlock* k = block; k != &last; ++k, out += 64) {
      Zmm v = Permute2<kBytes>::run(a, NarrowOps::index(k->index.data()), b);
      if constexpr (kFill) v = NarrowOps::blend(k->fill, v, fills);
      NarrowOps::store_whole(out, v);
    }
    Zmm v = Permute2<kBytes>::run(a, NarrowOps::index(last.index.data()), b);
    if constexpr (kFill) v = NarrowOps::blend(last.fill, v, fills);
    NarrowOps::store(outs[r] + last.offset, last.store, v);
  }
}

// Whether any block of a narrow row writes the fill value (constant padding; not reflections,
// upsamplings or resamplings).
bool any_fill(const std::vector<PermuteBlock>& blocks) {
  return std::any_of(blocks.begin(), blocks.end(), [](const PermuteBlock& block) { return block.fill != 0; });
}

template <bool kFill>
DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi")
void permute_bytes(const std::vector<PermuteBlock>& blocks, std::int64_t in_bytes, std::uint64_t fill, std::byte* const* outs,
                   const std::byte* const* ins, int count) {
  permute_rows_with<1, kFill>(blocks, in_bytes, fill, outs, ins, count);
}
template <int kBytes, bool kFill>
DMLOPS_TARGET("avx512f,avx512bw")
void permute_elements(const std::vector<PermuteBlock>& blocks, std::int64_t in_bytes, std::uint64_t fill, std::byte* const* outs,
                      const std::byte* const* ins, int count) {
  permute_rows_with<kBytes, kFill>(blocks, in_bytes, fill, outs, ins, count);
}

// The 32-bit lanes of an AVX2 vector that bytes [0, bytes) cover (all ones), for masked loads.
DMLOPS_TARGET("avx2") inline __m256i lanes_before(std::int64_t bytes) {
  const auto lanes = static_cast<int>(std::clamp<std::int64_t>(bytes / 4, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first n of the 8 lanes of v at p, in stores of 4, 2 and 1 lanes (a masked store,
// vmaskmovps, made rows of 7 to 13 floats 1.1-1.3x slower than run_rows' gathers on Zen 3).
DMLOPS_TARGET("avx2") inline void store_first_lanes(float* p, __m256 v, int n) {
  if (n == 8) return _mm256_storeu_ps(p, v);
  __m128 part = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, part);
    part = _mm256_extractf128_ps(v, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
    part = _mm_movehl_ps(part, part);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, part);
}

// 32 output bytes of a block (half 0 or 1) of an AVX2 narrow row: the words of the row (kVectors
// vectors), or of the half's window, permuted into place, the fill value blended in.
template <int kVectors, bool kFill>
DMLOPS_TARGET("avx2") inline __m256 permuted_half(const PermuteBlock& block, int half, const __m256 (&row)[kVectors],
                                                  const int* in, __m256 fills) {
  const __m256i lanes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.lanes.data() + 8 * half));
  __m256 v;
  if (kVectors == 4 && block.window[half] >= 0) {
    v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(in + block.window[half])), lanes);
  } else {
    const __m256 odd = _mm256_castsi256_ps(_mm256_slli_epi32(lanes, 28));  // bit 3: the odd vector of a pair
    v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(row[0], lanes), _mm256_permutevar8x32_ps(row[1], lanes), odd);
    if constexpr (kVectors == 4) {
      const __m256 high = _mm256_blendv_ps(_mm256_permutevar8x32_ps(row[2], lanes), _mm256_permutevar8x32_ps(row[3], lanes), odd);
      v = _mm256_blendv_ps(v, high, _mm256_castsi256_ps(_mm256_slli_epi32(lanes, 27)));  // bit 4: the second pair
    }
  }
  if constexpr (kFill) v = _mm256_blendv_ps(v, fills, _mm256_castsi256_ps(lanes));
  return v;
}

// permute_rows_with for AVX2 (PermuteBlock::lanes): kVectors masked loads (no byte past the row
// is read), then per 32 bytes of a block a vpermd of each input vector (or one of a window) and
// blends by the word's vector bits (3, then 4), a blend of the fill value where kFill and a
// store; blocks 64 bytes apart but the last, as with AVX-512. Only a row of under 64 bytes (one
// block) stores part of a block: its lanes in the row.
template <int kVectors, bool kFill>
DMLOPS_TARGET("avx2")
void permute_lanes_avx2(const std::vector<PermuteBlock>& blocks, std::int64_t in_bytes, std::uint64_t fill, std::byte* const* outs,
                        const std::byte* const* ins, int count) {
  const __m256 fills = _mm256_castsi256_ps(_mm256_set1_epi64x(static_cast<long long>(fill)));
  __m256i within[kVectors];
  for (int v = 0; v < kVectors; ++v) within[v] = lanes_before(in_bytes - 32 * v);
  const int short_row = blocks.front().store == ~std::uint64_t{0} ? 0 : std::popcount(blocks.front().store) / 4;  // lanes
  const PermuteBlock* const block = blocks.data();
  const PermuteBlock& last = blocks.back();
  for (int r = 0; r < count; ++r) {
    const auto* in = reinterpret_cast<const int*>(ins[r]);
    __m256 row[kVectors];
    for (int v = 0; v < kVectors; ++v) row[v] = _mm256_castsi256_ps(_mm256_maskload_epi32(in + 8 * v, within[v]));
    if (short_row > 0) {
      auto* out = reinterpret_cast<float*>(outs[r]);
      store_first_lanes(out, permuted_half<kVectors, kFill>(blocks.front(), 0, row, in, fills), std::min(short_row, 8));
      if (short_row > 8)
        store_first_lanes(out + 8, permuted_half<kVectors, kFill>(blocks.front(), 1, row, in, fills), short_row - 8);
      continue;
    }
    auto* out = reinterpret_cast<float*>(outs[r]);
    for (const PermuteBlock* k = block; k != &last; ++k, out += 16) {
      _mm256_storeu_ps(out, permuted_half<kVectors, kFill>(*k, 0, row, in, fills));
      _mm256_storeu_ps(out + 8, permuted_half<kVectors, kFill>(*k, 1, row, in, fills));
    }
    out = reinterpret_cast<float*>(outs[r] + last.offset);
    _mm256_storeu_ps(out, permuted_half<kVectors, kFill>(last, 0, row, in, fills));
    _mm256_storeu_ps(out + 8, permuted_half<kVectors, kFill>(last, 1, row, in, fills));
  }
}
#endif

// Rows of Plan::permute_blocks from their input rows, `fill_value` where the blocks say so.
template <class T>
void permute_rows(const std::vector<PermuteBlock>& blocks, std::int64_t in_bytes, T fill_value, std::byte* const* outs,
                  const std::byte* const* ins, int count) {
#if DMLOPS_X86
  std::uint64_t fill = 0;  // the value repeated over 8 bytes
  for (std::size_t at = 0; at < 8; at += sizeof(T)) std::memcpy(reinterpret_cast<std::byte*>(&fill) + at, &fill_value, sizeof(T));
  const auto run = [&](auto fills) {  // (the kernels' loops, with or without the fill's blend)
    constexpr bool kFill = decltype(fills)::value;
    if constexpr (sizeof(T) == 1) permute_bytes<kFill>(blocks, in_bytes, fill, outs, ins, count);
    else if (!narrow_rows_avx2(sizeof(T))) permute_elements<static_cast<int>(sizeof(T)), kFill>(blocks, in_bytes, fill, outs, ins, count);
    else if (in_bytes <= 64) permute_lanes_avx2<2, kFill>(blocks, in_bytes, fill, outs, ins, count);
    else permute_lanes_avx2<4, kFill>(blocks, in_bytes, fill, outs, ins, count);
  };
  if (any_fill(blocks)) run(std::true_type{});
  else run(std::false_type{});
#else
  (void)blocks, (void)in_bytes, (void)fill_value, (void)outs, (void)ins, (void)count;
#endif
}

// Everything the row loop needs but the data's addresses: the same for every call of the same
// shapes, strides, maps and thread count (plan_for reuses it).
struct Plan {
  std::int64_t in_offset = 0;  // bytes: the input indices that size-1 output axes read
  bool all_fill = false, any_pinned = false;
  std::int64_t rows = 1, grain = 1;  // outer rows; tasks per parallel_for chunk
  int outer_rank = 0;
  Dims outer_sizes;
  std::array<std::int64_t, kMaxRank> out_stride{}, in_stride{};
  std::array<std::int64_t, kMaxRank> row_span{};  // rows per index step of each outer dimension
  std::array<std::vector<std::int64_t>, kMaxRank> in_offsets;  // byte offsets; empty = identity
  std::int64_t inner_size = 1, inner_out_stride = 0, inner_in_stride = 0;
  std::vector<Run> runs;
  std::vector<std::int64_t> gather_offsets;  // byte offsets along the inner input axis
  // The same in elements, for the AVX2 window kernel: filled when 4- or 8-byte elements lie
  // contiguously along the inner input axis (inner_in_size of them) and AVX2 is enabled.
  std::vector<std::int32_t> gather_index;
  // ... and per block of 32 output bytes from a gather run's start, where gather_index has its
  // first element: the first element of the 32 input bytes its sources lie in (-1: they do not)
  // at window_base[i], and the 32-bit lanes that permute them into place at window_lanes[2i, 2i + 8)
  // (found once here, not per row: on Zen 3 a nearest 1.75x resampling of 1x4x128x128, in L2,
  // took 0.86x the time, of 1x64x128x128 0.87x, float64 0.81-0.89x).
  std::vector<std::int32_t> window_base, window_lanes;
  std::int64_t inner_in_size = 0;
  std::int64_t columns_per_block = 1, column_blocks = 1;
  // Each output row is written `row_copies` times, `copy_stride` bytes apart (see
  // fold_repeated_rows).
  std::int64_t row_copies = 1, copy_stride = 0;
  bool stream = false;  // contiguous copy runs use streaming stores (stream_output)
  // Or: every row is written through an L1 buffer and streamed, whole lines only (RowBatch);
  // see stream_rows_of.
  bool stream_rows = false;
  // Per index of the row dimension: how many rows back an earlier row of the same plane reads
  // the same input row (0: none): the nearest, or as far back as for the row before when that
  // works too; empty unless copying pays (see equal_rows_back).
  std::vector<std::int64_t> rows_back;
  bool packed_rows = false;  // rows lie back to back, each written once (copies of several, or a fill plane, are one)
  // A row of one contiguous copy, at most kMaxBorderElements other elements and at most
  // kMaxBorderRuns fills or mirrors (a padding of a few elements each side, or of one fill or
  // mirrored run each side): run_border_rows writes such rows without the per-run work and the
  // row batches. border_copy: the copy run's index, or -1.
  std::int64_t border_copy = -1;
  std::vector<std::pair<std::int64_t, std::int64_t>> border;  // (output, input) byte offsets; input kFillOffset: fill
  std::vector<Run> border_runs;                               // fills and mirrors (Copy, step -1)
  bool border_rows() const { return border_copy >= 0 && column_blocks == 1 && row_copies == 1; }
  // Whole rows that are one repeat run of k (2 to kMaxRepeatVbmi) from the start of their input
  // row, with the byte permute: repeat_rows writes a batch of them, then their copies. 0: not.
  std::int64_t repeat_rows = 0;
  // Rows whose input row fits 128 bytes (see narrow_rows_of): each is loaded whole and every 64
  // output bytes are permutes of it (and a blend with the fill value); empty otherwise.
  std::vector<PermuteBlock> permute_blocks;
  std::int64_t narrow_in_bytes = 0;
};

// Output and input addresses of successive planes: the outer dimensions but the last (the
// row dimension, which run_rows walks itself), updated incrementally from the outermost changed
// dimension.
class PlaneCursor {
 public:
  // `in`: the input's base plus plan.in_offset.
  PlaneCursor(const Plan& plan, std::byte* out, const std::byte* in, std::int64_t plane)
      : plan_(plan), out_base_(out), in_base_(in), dims_(std::max(plan.outer_rank - 1, 0)), counter_(plane_sizes(plan), plane) {
    update(0);
  }
  void next() { update(counter_.next()); }
  std::byte* out() const { return out_base_ + (dims_ ? out_[dims_ - 1] : 0); }
  const std::byte* in() const { return in_base_ + (dims_ ? in_[dims_ - 1] : 0); }
  bool fill() const { return dims_ && fill_[dims_ - 1]; }

  // A plane whose input equals that of an earlier plane has the same content: when an outer
  // map repeats an index (map[o] == map[o-1], as nearest upsampling and edge padding do), each
  // of its rows equals the row `rows_back` rows earlier, at out - out_back. {0, 0}: none.
  std::pair<std::int64_t, std::int64_t> same_as_earlier() const {
    for (int d = dims_ - 1; d >= 0; --d) {
      if (repeats_[d]) return {plan_.row_span[d], plan_.out_stride[d]};
    }
    return {0, 0};
  }

 private:
  static Dims plane_sizes(const Plan& plan) {
    Dims sizes = plan.outer_sizes;
    if (!sizes.empty()) sizes.erase(sizes.size() - 1);
    return sizes;
  }
  void update(int from) {
    for (int d = std::max(from, 0); d < dims_; ++d) {
      const std::int64_t o = counter_[d];
      const auto& offsets = plan_.in_offsets[d];
      const std::int64_t in = offsets.empty() ? o * plan_.in_stride[d] : offsets[o];
      const bool fill = (d && fill_[d - 1]) || in == kFillOffset;
      fill_[d] = fill;
      repeats_[d] = !offsets.empty() && o > 0 && in != kFillOffset && offsets[o - 1] == in;
      in_[d] = (d ? in_[d - 1] : 0) + (fill ? 0 : in);
      out_[d] = (d ? out_[d - 1] : 0) + o * plan_.out_stride[d];
    }
  }
  const Plan& plan_;
  std::byte* out_base_;
  const std::byte* in_base_;
  int dims_;
  NdCounter counter_;
  std::array<std::int64_t, kMaxRank> out_{}, in_{};
  std::array<bool, kMaxRank> fill_{}, repeats_{};
};

constexpr std::int64_t kMaxBorderElements = kMaxFramedElements;
// Fills at least kMinBorderFillRun long and mirrored copies (at least kMinBulkRun long, shorter
// ones are gathers) are runs of a border row, at most kMaxBorderRuns: an image reflected or
// filled by 16 each side spent most of its time in the row batches' per-run work otherwise (in
// L2, 36-41% of a copy's speed; at 1080x1920 uint8 0.73-0.79x the time so on Zen 4).
constexpr std::size_t kMaxBorderRuns = 4;
constexpr std::int64_t kMinBorderFillRun = 4;

// Plan::border_copy, Plan::border and Plan::border_runs, when the row has that form (and its
// copies are not streamed: run_border_rows stores normally).
void find_border(Plan& plan, std::int64_t element) {
  if (plan.stream || plan.stream_rows || plan.inner_out_stride != element || plan.inner_in_stride != element) return;
  const auto is_run = [](const Run& run) {  // a fill or mirror kept whole (Plan::border_runs)
    return (run.kind == RunKind::Copy && run.step == -1) || (run.kind == RunKind::Fill && run.length >= kMinBorderFillRun);
  };
  std::int64_t copy = -1, elements = 0;
  std::size_t runs = 0;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const Run& run = plan.runs[i];
    if (run.kind == RunKind::Copy && run.step == 1 && copy < 0) copy = static_cast<std::int64_t>(i);
    else if (is_run(run)) ++runs;
    else if (run.kind == RunKind::Fill || run.kind == RunKind::Broadcast || run.kind == RunKind::Gather) elements += run.length;
    else return;
  }
  if (copy < 0 || elements > kMaxBorderElements || runs > kMaxBorderRuns) return;
  plan.border_copy = copy;
  for (std::size_t r = 0; r < plan.runs.size(); ++r) {
    const Run& run = plan.runs[r];
    if (static_cast<std::int64_t>(r) == copy) continue;
    if (is_run(run)) {
      plan.border_runs.push_back(run);
      continue;
    }
    for (std::int64_t i = 0; i < run.length; ++i) {
      const std::int64_t in = run.kind == RunKind::Fill        ? kFillOffset
                              : run.kind == RunKind::Broadcast ? run.src * element
                                                               : plan.gather_offsets[run.src + i];
      plan.border.emplace_back((run.out_begin + i) * element, in);
    }
  }
}

// Columns [c0, c1) of one run of `count` output rows, each from its input row.
template <class T>
DMLOPS_ALWAYS_INLINE inline void write_run(const Plan& plan, const Run& run, T fill_value, std::byte* const* outs,
                                           const std::byte* const* ins, int count, std::int64_t c0, std::int64_t c1) {
  const std::int64_t out_step = plan.inner_out_stride, in_step = plan.inner_in_stride;
  const std::int64_t b = std::max(c0, run.out_begin);
  const std::int64_t e = std::min(c1, run.out_begin + run.length);
  if (b >= e) return;
  const std::int64_t n = e - b, out_at = b * out_step;
  const std::int64_t skip = b - run.out_begin;  // elements of the run before this block
  switch (run.kind) {
    case RunKind::Fill:
      for (int r = 0; r < count; ++r) fill_row<T>(outs[r] + out_at, out_step, fill_value, n);
      break;
    case RunKind::Broadcast:
      for (int r = 0; r < count; ++r) fill_row<T>(outs[r] + out_at, out_step, load<T>(ins[r] + run.src * in_step), n);
      break;
    case RunKind::Copy: {
      const std::int64_t in_at = (run.src + skip * run.step) * in_step, in_stride = run.step * in_step;
      if (out_step == sizeof(T) && in_stride == sizeof(T)) {  // the common case: straight to the copy
        const auto bytes = static_cast<std::size_t>(n) * sizeof(T);
        if (plan.stream) {
          for (int r = 0; r < count; ++r) stream_bytes(outs[r] + out_at, ins[r] + in_at, bytes);
        } else {
          for (int r = 0; r < count; ++r) copy_bytes(outs[r] + out_at, ins[r] + in_at, bytes);
        }
      } else if (count > 1 && evenly_spaced(outs, ins, count)) {  // stride 2: one narrowing call for all the rows
        copy_rows<T>(outs[0] + out_at, outs[1] - outs[0], out_step, ins[0] + in_at, ins[1] - ins[0], in_stride, n, count);
      } else {
        for (int r = 0; r < count; ++r) copy_row<T>(outs[r] + out_at, out_step, ins[r] + in_at, in_stride, n);
      }
      break;
    }
    case RunKind::Repeat:
      for (int r = 0; r < count; ++r) {
        if (skip == 0 && n == run.length) repeat_groups<T>(outs[r] + out_at, out_step, ins[r] + run.src * in_step, in_step, run.step, run.groups);
        else repeat<T>(outs[r] + out_at, out_step, ins[r] + run.src * in_step, in_step, run.step, skip, e - run.out_begin);
      }
      break;
    case RunKind::Gather: {
      const std::int64_t* offsets = plan.gather_offsets.data() + run.src + skip;
      // The window kernel pays for itself from a few vectors on; a padding's two-element
      // mirror is cheaper gathered inline.
#if DMLOPS_X86
      if (!plan.gather_index.empty() && out_step == sizeof(T) && n >= 64 / static_cast<std::int64_t>(sizeof(T))) {
        if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
          const std::int32_t* index = plan.gather_index.data() + run.src;
          const std::int32_t *base = plan.window_base.data() + run.src, *lanes = plan.window_lanes.data() + 2 * run.src;
          for (int r = 0; r < count; ++r) gather_window_avx2<sizeof(T)>(outs[r] + out_at, ins[r], index, base, lanes, skip, n);
          break;
        }
      }
#endif
      for (int r = 0; r < count; ++r) gather<T>(outs[r] + out_at, out_step, ins[r], offsets, n);
      break;
    }
  }
}

// Columns [c0, c1) of `count` output rows, each from its input row, run by run: the per-run
// work (clamping to the columns, the dispatch on its kind) is paid once per batch of rows, not
// once per row, which is most of the cost when rows are short (a 5-D activation's 64-element
// rows padded by one).
template <class T>
void gather_rows(const Plan& plan, T fill_value, std::byte* const* outs, const std::byte* const* ins, int count,
                 std::int64_t c0, std::int64_t c1) {
  if (!plan.permute_blocks.empty())  // (whole rows: narrow rows are never cut into column blocks)
    return permute_rows<T>(plan.permute_blocks, plan.narrow_in_bytes, fill_value, outs, ins, count);
  for (const Run& run : plan.runs) write_run<T>(plan, run, fill_value, outs, ins, count, c0, c1);
}

// Output rows waiting to be gathered together (gather_rows), each written row_copies times.
// A batch spans about kBatchBytes of output: enough short rows to amortise the per-run work,
// few enough long ones that the rows are still written nearly in memory order (writing a
// column of many long rows at a time defeats the hardware prefetcher).
// With Plan::stream_rows the rows (and their copies), which lie back to back, are written into
// an L1 buffer and streamed from there (LineStreamer), whole lines only.
template <class T>
class RowBatch {
 public:
  static constexpr int kCapacity = 32;
  static constexpr std::int64_t kBatchBytes = 2048;
  static constexpr std::int64_t kStagedBytes = 16 * 1024;  // stream_rows: rows and copies staged at a time
  RowBatch(const Plan& plan, T fill_value, std::int64_t c0, std::int64_t c1)
      : plan_(plan), fill_(fill_value), c0_(c0), c1_(c1),
        capacity_(static_cast<int>(std::clamp<std::int64_t>(
            (plan.stream_rows ? kStagedBytes / plan.row_copies : kBatchBytes) /
                std::max<std::int64_t>(1, (c1 - c0) * static_cast<std::int64_t>(sizeof(T))),
            1, kCapacity))),
        staging_(plan.stream_rows ? std::make_optional<Scratch<std::byte>>(kStagedBytes) : std::nullopt) {}
  void add(std::byte* out, const std::byte* in) {
    if (plan_.stream_rows && count_ > 0 && out != outs_[0] + count_ * row_span()) flush();
    outs_[count_] = out;
    ins_[count_] = in;
    if (++count_ == capacity_) flush();
  }
  void flush() {
    if (count_ == 0) return;
    if (plan_.stream_rows) return flush_staged();
    write(outs_.data());
    count_ = 0;
  }
  // Columns [c0, c1) of a row of the fill value, and the row's copies (stream_rows: whole rows).
  void fill(std::byte* out, std::int64_t c0, std::int64_t c1) {
    if (plan_.stream_rows) return fill_staged(out);
    const std::int64_t step = plan_.inner_out_stride;
    fill_row<T>(out + c0 * step, step, fill_, c1 - c0);
    copy_out(out);
  }
  // The rows are all out (and visible to whoever waits for this task).
  void finish() {
    flush();
    streamer_.finish();
  }
  // The extra copies of a finished row (fold_repeated_rows).
  void copy_out(std::byte* out) const {
    const std::int64_t step = plan_.inner_out_stride;
    for (std::int64_t j = 1; j < plan_.row_copies; ++j)
      copy_row<T>(out + j * plan_.copy_stride + c0_ * step, step, out + c0_ * step, step, c1_ - c0_);
  }

 private:
  // (Out of line: inlined, they slowed the row loop of every other plan by 5-10% on Zen 4.)
  DMLOPS_NOINLINE void flush_staged() {
    std::array<std::byte*, kCapacity> staged{};
    for (int r = 0; r < count_; ++r) staged[r] = staging_->get() + r * row_span();
    write(staged.data());
    streamer_.write(outs_[0], staging_->get(), static_cast<std::size_t>(count_ * row_span()));
    count_ = 0;
  }
  DMLOPS_NOINLINE void fill_staged(std::byte* out) {
    flush();
    fill_row<T>(staging_->get(), plan_.inner_out_stride, fill_, c1_ - c0_);
    copy_out(staging_->get());
    streamer_.write(out, staging_->get(), static_cast<std::size_t>(row_span()));
  }
  std::int64_t row_span() const { return plan_.row_copies * plan_.inner_size * static_cast<std::int64_t>(sizeof(T)); }
  // The batch's rows and their copies, at outs (the rows' own places, or staged).
  void write(std::byte* const* outs) {
    if (plan_.repeat_rows > 0)  // (whole rows: repeat_rows plans are not cut into column blocks)
      return repeat_rows<T>(outs, ins_.data(), count_, plan_.runs[0].groups, plan_.repeat_rows, plan_.row_copies, plan_.copy_stride);
    gather_rows<T>(plan_, fill_, outs, ins_.data(), count_, c0_, c1_);
    for (int r = 0; r < count_; ++r) copy_out(outs[r]);
  }

  const Plan& plan_;
  T fill_;
  std::int64_t c0_, c1_;
  int capacity_, count_ = 0;
  std::array<std::byte*, kCapacity> outs_{};
  std::array<const std::byte*, kCapacity> ins_{};
  std::optional<Scratch<std::byte>> staging_;  // with stream_rows
  LineStreamer streamer_;
};

// The row dimension (the last outer one), which the row loops walk themselves, and the prefetch
// of the input row two rows ahead. A padded row starts by reading its input row's ends (the
// borders), before the hardware prefetcher has seen that row coming: loading the input row two
// rows ahead made the 1 KiB rows of a 256x256 plane padded by 2 (reflection, wrap) 20-30%
// faster. Short rows gain nothing (many share a page, which the prefetcher follows); long ones
// get their first 4 KiB.
struct RowAxis {
  std::int64_t rows = 1, out_stride = 0, in_stride = 0;  // a single row without one
  const std::int64_t* offsets = nullptr;                   // the map's input offsets; nullptr: strided
  std::int64_t prefetch_bytes = 0;

  // (Inlined: with a second caller GCC called it out of line, and rows of a copy and two
  // elements ran 1.02-1.04x slower on Zen 4.)
  DMLOPS_ALWAYS_INLINE RowAxis(const Plan& plan, std::int64_t element) {
    const int d = plan.outer_rank - 1;
    if (d >= 0) {
      rows = plan.outer_sizes[d], out_stride = plan.out_stride[d], in_stride = plan.in_stride[d];
      if (!plan.in_offsets[d].empty()) offsets = plan.in_offsets[d].data();
    }
    const std::int64_t in_row_bytes = plan.inner_in_size * element;
    if (plan.column_blocks == 1 && plan.inner_in_stride == element && in_row_bytes >= kPrefetchRowBytes)
      prefetch_bytes = std::min<std::int64_t>(4 * kPrefetchRowBytes, in_row_bytes);
  }
  std::int64_t in_offset(std::int64_t o) const { return offsets ? offsets[o] : o * in_stride; }
  // Row o of a plane whose input starts at `in` is being written: the input row of o + 2.
  void prefetch_ahead(const std::byte* in, std::int64_t o) const {
    if (prefetch_bytes == 0 || o + 2 >= rows) return;
    const std::int64_t ahead = in_offset(o + 2);
    if (ahead == kFillOffset) return;
    for (std::int64_t b = 0; b < prefetch_bytes; b += kCacheLine) DMLOPS_PREFETCH(in + ahead + b);
  }
};

// Rows [row_begin, row_end) of Plan::border's form, one at a time: a copy and a few elements
// (and, with kRuns, Plan::border_runs' fills and mirrors, as gather_rows writes them), with none
// of run_rows' batching and equal-row bookkeeping (a row that equals an earlier one is gathered
// again, which costs no more than copying it). The bookkeeping was half the time of
// a 5-D activation's 64-element rows padded by one, in L2 (a 16-core machine's share of one on
// each of 16 threads): on a 2-core Xeon, 1 thread, paired, edge, constant and reflection padding
// of 1,188 such rows took 0.70x, 0.63x and 0.60x the time so; larger pads 0.88x (2x8x16x64x64
// edge) and 0.95x (1x64x256x256 reflection by 2). 16-core Xeon, 16 threads: 2x8x16x64x64 edge
// and constant 0.76-0.84x and 0.70-0.76x, 1x64x256x256 by 2 0.89-0.94x.
// kRuns: with Plan::border_runs (a separate instance: the loop over none made rows of a copy and
// two elements 1.1-1.2x slower on Zen 4). A plane of the fill value is one fill, and the
// elements before the copy go out before it: 1 thread, alternating processes, 2x8x16x64x64 by 1
// 0.81-0.95x the time on Zen 4 and 0.99-1.02x on the 16-core Xeon, 1x64x64x64 by 1 (float32,
// float16) 0.84-0.94x and 0.69-0.82x.
template <class T, bool kRuns>
DMLOPS_NOINLINE void run_border_rows(const Plan& plan, std::byte* out_base, const std::byte* in_base, T fill_value,
                     std::int64_t row_begin, std::int64_t row_end) {
  constexpr auto size = static_cast<std::int64_t>(sizeof(T));
  const RowAxis axis(plan, size);
  const Run& copy = plan.runs[static_cast<std::size_t>(plan.border_copy)];
  const std::int64_t out_at = copy.out_begin * size, in_at = copy.src * size;
  const auto bytes = static_cast<std::size_t>(copy.length * size);
  // The elements before the copy and after it, in locals (the plan's vector was reloaded after
  // every store), so that a row is written in the order of its addresses.
  using Element = std::pair<std::int64_t, std::int64_t>;
  std::array<Element, kMaxBorderElements> head{}, tail{};
  int heads = 0, tails = 0;
  for (const Element& element : plan.border) (element.first < out_at ? head[heads++] : tail[tails++]) = element;
  FramedRows frame;  // the same for copy_framed_rows, which writes the rows of kRuns = false
  frame.heads = heads, frame.tails = tails, frame.copy_in = in_at, frame.copy_bytes = copy.length * size;
  for (int i = 0; i < heads + tails; ++i) {
    const std::int64_t in_offset = (i < heads ? head[i] : tail[i - heads]).second;
    frame.element_in[i] = in_offset == kFillOffset ? kFramedFill : in_offset;
  }
  const auto put = [fill_value](std::byte* dst, const std::byte* src, const Element& element) {
    const T value = element.second == kFillOffset ? fill_value : load<T>(src + element.second);
    std::memcpy(dst + element.first, &value, sizeof(T));
  };
  std::int64_t row = row_begin, o = row_begin % axis.rows;
  PlaneCursor plane(plan, out_base, in_base, row_begin / axis.rows);
  for (;;) {
    const std::int64_t o_end = std::min(axis.rows, o + (row_end - row));
    std::byte* out = plane.out();
    const std::byte* in = plane.in();
    const bool fill = plane.fill();
    row += o_end - o;
    if (fill && plan.packed_rows) {  // a plane of the fill value, its rows back to back: one fill
      fill_row<T>(out + o * axis.out_stride, size, fill_value, (o_end - o) * plan.inner_size);
      o = o_end;
    }
    if (!kRuns && axis.prefetch_bytes == 0) {
      // Rows of the fill value one by one; the rows between them in one call. (Rows long enough
      // to prefetch ahead take the loop below: copy_framed_rows made 1x64x256x256 padded by 2
      // 1.10-1.17x slower at 2 threads on Zen 4, edge, reflection and wrap.)
      while (o < o_end) {
        if (fill || axis.in_offset(o) == kFillOffset) {
          fill_row<T>(out + o * axis.out_stride, size, fill_value, plan.inner_size);
          ++o;
          continue;
        }
        std::int64_t end = o + 1;
        if (axis.offsets) {
          while (end < o_end && axis.offsets[end] != kFillOffset) ++end;
          copy_framed_rows<T>(out + o * axis.out_stride, axis.out_stride, in, axis.offsets + o, 0, end - o, frame, fill_value);
        } else {
          end = o_end;
          copy_framed_rows<T>(out + o * axis.out_stride, axis.out_stride, in + o * axis.in_stride, nullptr, axis.in_stride,
                              end - o, frame, fill_value);
        }
        o = end;
      }
    }
    for (; o < o_end; ++o) {
      std::byte* dst = out + o * axis.out_stride;
      const std::int64_t in_offset = axis.in_offset(o);
      if (fill || in_offset == kFillOffset) {
        fill_row<T>(dst, size, fill_value, plan.inner_size);
        continue;
      }
      const std::byte* src = in + in_offset;
      axis.prefetch_ahead(in, o);
      for (int i = 0; i < heads; ++i) put(dst, src, head[i]);
      copy_bytes(dst + out_at, src + in_at, bytes);
      for (int i = 0; i < tails; ++i) put(dst, src, tail[i]);
      if constexpr (kRuns) {
        for (const Run& run : plan.border_runs) write_run<T>(plan, run, fill_value, &dst, &src, 1, 0, plan.inner_size);
      }
    }
    if (row >= row_end) return;
    o = 0;
    plane.next();
  }
}

// Rows [row_begin, row_end) of Plan::permute_blocks' form: fills, and permutes of their input
// rows (once per copy of the row: fold_repeated_rows), gathered in batches, with none of
// run_rows' per-run work and equal-row bookkeeping (a row that equals an earlier one is permuted
// again, which costs no more than copying it). The row walk is run_border_rows' (one walk for
// both, through a callback, made short border rows 1.09-1.13x slower on Zen 4).
template <class T>
DMLOPS_NOINLINE void run_narrow_rows(const Plan& plan, std::byte* out_base, const std::byte* in_base, T fill_value,
                                     std::int64_t row_begin, std::int64_t row_end) {
  constexpr auto size = static_cast<std::int64_t>(sizeof(T));
  constexpr int kBatch = 32;
  std::array<std::byte*, kBatch> outs{};
  std::array<const std::byte*, kBatch> ins{};
  int count = 0;
  const auto flush = [&] {
    permute_rows<T>(plan.permute_blocks, plan.narrow_in_bytes, fill_value, outs.data(), ins.data(), count);
    count = 0;
  };
  const RowAxis axis(plan, size);
  std::int64_t row = row_begin, o = row_begin % axis.rows;
  PlaneCursor plane(plan, out_base, in_base, row_begin / axis.rows);
  for (;;) {
    const std::int64_t o_end = std::min(axis.rows, o + (row_end - row));
    std::byte* out = plane.out();
    const std::byte* in = plane.in();
    const bool fill = plane.fill();
    row += o_end - o;
    for (; o < o_end; ++o) {
      std::byte* dst = out + o * axis.out_stride;
      const std::int64_t in_offset = axis.in_offset(o);
      for (std::int64_t j = 0; j < plan.row_copies; ++j, dst += plan.copy_stride) {
        if (fill || in_offset == kFillOffset) {
          fill_row<T>(dst, size, fill_value, plan.inner_size);
          continue;
        }
        outs[count] = dst, ins[count] = in + in_offset;
        if (++count == kBatch) flush();
      }
    }
    if (row >= row_end) break;
    o = 0;
    plane.next();
  }
  if (count > 0) flush();
}

// A copy from rows this thread has just written (run_rows), this long or longer, goes to the C
// library's memcpy: its source is in cache and its destination lines are written whole, which
// glibc's copy (rep movsb past a few KiB, on CPUs with fast strings) need not read first. On
// Zen 5, 1 thread, paired: 1x64x32x32 float32 padded to 147x147 (36 KB copied at a time) took
// 0.86x the time with reflection, 0.91x with wrap; other pads and upsamplings 0.95-1.02x.
// Copies of input rows keep copy_bytes: memcpy for every copy from 4 KiB made rows of
// 1x64x64x1100 edge-padded by 1 (input and output beyond L3) 1.19x slower, from 1 KiB those
// of 1x64x256x256 by 2 1.5x.
constexpr std::int64_t kLibcCopyBytes = 4096;

// Tasks [task_begin, task_end): task t is column block t % column_blocks of row t / column_blocks.
// The row dimension (the last outer one) is walked here directly, so a row costs a few integer
// operations besides its data. A row is filled, copied from an equal row this thread has
// already written (an outer map that repeats an index: edge padding, nearest upsampling), or
// gathered from its input row; gathers wait in a RowBatch, which is flushed before any copy
// that could read a row still waiting.
template <class T>
void run_rows(const Plan& plan, std::byte* out_base, const std::byte* in_base, T fill_value, std::int64_t task_begin,
              std::int64_t task_end) {
  if (!plan.permute_blocks.empty() && plan.rows_back.empty())
    return run_narrow_rows<T>(plan, out_base, in_base, fill_value, task_begin, task_end);
  if (plan.border_rows()) {
    if (plan.border_runs.empty()) return run_border_rows<T, false>(plan, out_base, in_base, fill_value, task_begin, task_end);
    return run_border_rows<T, true>(plan, out_base, in_base, fill_value, task_begin, task_end);
  }
  const std::int64_t blocks = plan.column_blocks, first_row = task_begin / blocks;
  const RowAxis axis(plan, static_cast<std::int64_t>(sizeof(T)));
  const std::int64_t rows_per_plane = axis.rows, row_out_stride = axis.out_stride;
  const std::int64_t step = plan.inner_out_stride;

  PlaneCursor plane(plan, out_base, in_base, first_row / rows_per_plane);
  std::pair<std::int64_t, std::int64_t> plane_repeats = plane.same_as_earlier();
  // Rows split into column blocks are written one at a time (a batch holds one column range).
  std::int64_t c0 = 0, c1 = plan.inner_size;
  RowBatch<T> batch(plan, fill_value, c0, c1);
  std::int64_t o = first_row % rows_per_plane;  // index along the row dimension
  for (std::int64_t task = task_begin; task < task_end; ++task) {
    // (no division per row when rows are whole: the common case)
    const std::int64_t row = blocks == 1 ? task : task / blocks, block = blocks == 1 ? 0 : task % blocks;
    if (block == 0 && task != task_begin && ++o == rows_per_plane) {
      o = 0;
      plane.next();
      plane_repeats = plane.same_as_earlier();
    }
    const std::int64_t in_offset = axis.in_offset(o);
    std::byte* out = plane.out() + o * row_out_stride;
    if (!plane.fill()) axis.prefetch_ahead(plane.in(), o);
    if (blocks > 1) {
      c0 = block * plan.columns_per_block;
      c1 = std::min(plan.inner_size, c0 + plan.columns_per_block);
    }
    if (plane.fill() || in_offset == kFillOffset) {
      batch.fill(out, c0, c1);
      continue;
    }
    // A whole row equal to one this thread has written: the previous row of this plane, an
    // earlier one (Plan::rows_back), or the same row of an earlier plane (when at most
    // `row - first_row` rows back).
    // (Not with stream_rows: the row is gathered again from its input, in cache, rather than
    // read back from a streamed output, from memory.)
    std::int64_t back = 0, rows = 1;
    if (blocks == 1 && !plan.stream_rows) {
      const std::int64_t rows_back = plan.rows_back.empty() ? 0 : plan.rows_back[o];
      if (o > 0 && axis.offsets && axis.offsets[o - 1] == in_offset && row > first_row) {
        back = row_out_stride;
      } else if (rows_back > 0 && rows_back <= row - first_row) {
        back = rows_back * row_out_stride;
        // The rows after it that copy from as far back, up to that distance (their sources are
        // written by then), as one copy when the rows lie back to back.
        if (plan.packed_rows) {
          const std::int64_t most = std::min({rows_back, rows_per_plane - o, task_end - task});
          while (rows < most && plan.rows_back[o + rows] == rows_back) ++rows;
        }
      } else if (plane_repeats.first > 0 && plane_repeats.first <= row - first_row) {
        back = plane_repeats.second;
      }
    }
    if (back > 0) {  // (never with stream_rows)
      batch.flush();
      const std::int64_t bytes = rows * plan.inner_size * static_cast<std::int64_t>(sizeof(T));
      if (step == sizeof(T) && bytes >= kLibcCopyBytes)
        std::memcpy(out, out - back, static_cast<std::size_t>(bytes));
      else
        copy_row<T>(out, step, out - back, step, rows * plan.inner_size);
      if (rows == 1) batch.copy_out(out);
      o += rows - 1, task += rows - 1;
      continue;
    }
    if (blocks > 1) {
      RowBatch<T> single(plan, fill_value, c0, c1);
      single.add(out, plane.in() + in_offset);
      single.flush();
      continue;
    }
    batch.add(out, plane.in() + in_offset);
  }
  batch.finish();
  if (plan.stream) stream_fence();
}

// Plan::window_base and Plan::window_lanes, from Plan::gather_index and the gather runs.
void find_windows(Plan& plan, std::int64_t element) {
  const std::int64_t lanes = 32 / element, words = element / 4, size = std::ssize(plan.gather_index);
  plan.window_base.assign(static_cast<std::size_t>(size), -1);
  plan.window_lanes.assign(static_cast<std::size_t>(2 * size), 0);
  for (const Run& run : plan.runs) {
    if (run.kind != RunKind::Gather) continue;
    for (std::int64_t k = 0; k + lanes <= run.length; k += lanes) {
      const std::int64_t at = run.src + k;
      const std::int32_t* index = plan.gather_index.data() + at;
      // The words from the block's lowest source (a row of 2^30 float64 has more words than int32
      // holds); a word past int32 is never in a window.
      const std::int32_t first = *std::min_element(index, index + lanes);
      std::int32_t* out = plan.window_lanes.data() + 2 * at;
      for (std::int64_t j = 0; j < 8; ++j)
        out[j] = static_cast<std::int32_t>(std::min<std::int64_t>(word_of(index[j / words] - first, element, j % words),
                                                                  std::numeric_limits<std::int32_t>::max()));
      // (The window starts on an element: its lowest word and the clamp, in_words - 8, are even for 8 bytes.)
      const std::int32_t base = window_of(out, (plan.inner_in_size - first) * words);
      plan.window_base[static_cast<std::size_t>(at)] = base < 0 ? -1 : first + base / static_cast<std::int32_t>(words);
    }
  }
}

// When the row dimension repeats every input row exactly k times (map o -> o / k, as nearest
// upsampling by an integer factor does), each input row makes one output row, gathered once
// and copied k - 1 times while it is in L1: a third of the bookkeeping per output row, and a
// plain copy instead of a second gather (a repeat shuffle, say).
void fold_repeated_rows(Plan& plan) {
  if (plan.outer_rank < 1) return;
  const int d = plan.outer_rank - 1;
  std::vector<std::int64_t>& offsets = plan.in_offsets[d];
  const std::int64_t n = plan.outer_sizes[d];
  if (offsets.empty()) return;
  std::int64_t k = 1;
  while (k < n && offsets[static_cast<std::size_t>(k)] == offsets[0]) ++k;
  if (k == 1 || n % k != 0) return;
  for (std::int64_t first = 0; first < n; first += k) {  // (no division per row: 1080 of them took 12 us)
    for (std::int64_t o = first + 1; o < first + k; ++o) {
      if (offsets[static_cast<std::size_t>(o)] != offsets[static_cast<std::size_t>(first)]) return;
    }
  }
  std::vector<std::int64_t> folded;
  for (std::int64_t o = 0; o < n; o += k) folded.push_back(offsets[static_cast<std::size_t>(o)]);
  offsets = std::move(folded);
  plan.outer_sizes[d] = n / k;
  plan.row_copies = k;
  plan.copy_stride = plan.out_stride[d];
  plan.out_stride[d] *= k;
}

// Plan::rows_back. A map that folds (reflection or wrap padding wider than the input reads each
// input row several times: 147 rows from 32) makes most rows copies of one already written, one
// copy from cache instead of a gather of several runs (half the time of that case). Only when a
// gather costs more than a copy: more runs than the three of a short padding (border, interior,
// border), whose few repeated rows (reflection by 2) were no faster copied. (A row equal to the
// previous one is always copied: run_rows checks that itself.)
constexpr std::size_t kRunsWorthACopy = 4;

void equal_rows_back(Plan& plan) {
  const int d = plan.outer_rank - 1;
  if (d < 0 || plan.in_offsets[d].empty() || plan.runs.size() < kRunsWorthACopy) return;
  const std::vector<std::int64_t>& offsets = plan.in_offsets[d];
  // Offsets are input index * in_stride (any index of a size-1 input axis is 0).
  const std::int64_t stride = plan.in_stride[d];
  const auto index = [&](std::int64_t offset) { return stride == 0 ? 0 : offset / stride; };
  std::int64_t inputs = 1;
  for (std::int64_t offset : offsets) {
    if (offset != kFillOffset) inputs = std::max(inputs, index(offset) + 1);
  }
  std::vector<std::int64_t> latest(static_cast<std::size_t>(inputs), -1);  // the last row reading each input row
  plan.rows_back.assign(offsets.size(), 0);
  for (std::size_t o = 0; o < offsets.size(); ++o) {
    if (offsets[o] == kFillOffset) continue;
    std::int64_t& seen = latest[static_cast<std::size_t>(index(offsets[o]))];
    if (seen >= 0) plan.rows_back[o] = static_cast<std::int64_t>(o) - seen;
    // As far back as the row before when that row reads the same input too: runs of rows at
    // one distance are one copy in run_rows (a reflection repeats with a period, 62 rows for 32;
    // the nearest equal row is the mirror image, a different distance every row).
    const std::int64_t previous = o > 0 ? plan.rows_back[o - 1] : 0;
    if (seen >= 0 && previous > 0 && previous <= static_cast<std::int64_t>(o) &&
        offsets[o - static_cast<std::size_t>(previous)] == offsets[o])
      plan.rows_back[o] = previous;
    seen = static_cast<std::int64_t>(o);
  }
}

}  // namespace

AxisMap::AxisMap(std::initializer_list<std::int64_t> indices) {
  for (std::int64_t s : indices) push(s);
}

AxisMap AxisMap::from_indices(const std::vector<std::int64_t>& indices) {
  AxisMap map;
  for (std::int64_t s : indices) map.push(s);
  return map;
}

void AxisMap::push(std::int64_t src) {
  if (src < -1) fail("AxisMap: source index ", src, " (only -1 means fill)");
  ++size_;
  if (!runs_.empty()) {
    MapRun& last = runs_.back();
    if (src < 0 && last.src < 0) {
      ++last.length;
      return;
    }
    if (src >= 0 && last.src >= 0) {
      if (last.length == 1 && std::llabs(src - last.src) <= 1) {
        last.step = src - last.src;
        last.length = 2;
        return;
      }
      if (last.length >= 2 && last.src + last.length * last.step == src) {
        ++last.length;
        return;
      }
    }
  }
  runs_.push_back(MapRun{1, src < 0 ? -1 : src, 0});
}

void AxisMap::push_run(std::int64_t src, std::int64_t step, std::int64_t length) {
  if (length <= 0) return;
  if (length == 1 || src < 0) {
    for (std::int64_t i = 0; i < length; ++i) push(src < 0 ? -1 : src);
    return;
  }
  size_ += length;
  runs_.push_back(MapRun{length, src, step});
}

std::vector<std::int64_t> AxisMap::indices() const {
  std::vector<std::int64_t> result;
  result.reserve(static_cast<std::size_t>(size_));
  for (const MapRun& r : runs_) {
    for (std::int64_t i = 0; i < r.length; ++i) result.push_back(r.src < 0 ? -1 : r.src + i * r.step);
  }
  return result;
}

namespace {

// Whether an output that stream_staged streams takes Plan::stream_rows: its rows (with their
// copies) lie back to back and fit the batch's buffer, and no row is copied from one further
// back (Plan::rows_back: those plans keep Plan::stream). A row equal to the one before it, or a
// plane equal to an earlier one, which run_rows otherwise copies from the output, is gathered
// again from its input, in cache, rather than read back from memory (nearest upsampling by
// 1.75, 16.8 MB, on 1 thread of Zen 4: 0.6x the time). The output's lines
// are then written past the caches without being read first: a 16 MB nearest upsampling by 2x2
// of 1 KiB rows took 0.4-0.6x the time so on 1 thread of Zen 4, by 2x1 at 32 MB 0.5-0.6x.
bool stream_rows_of(const Plan& plan, std::int64_t element) {
  const std::int64_t row_bytes = plan.inner_size * element, span = row_bytes * plan.row_copies;
  if (plan.all_fill || plan.inner_out_stride != element || span > RowBatch<std::uint8_t>::kStagedBytes) return false;
  if (!plan.rows_back.empty()) return false;
  // (Rows of at most kStagedBytes are never cut into column blocks.)
  const int d = plan.outer_rank - 1;
  return d < 0 || plan.out_stride[d] == span;
}

// Narrow rows: input rows of at most 128 bytes, output rows of at most kMaxNarrowRowBytes (longer
// ones are long runs, which the run kernels move at full speed).
constexpr std::int64_t kMaxNarrowRowBytes = 4096;
// A border row (find_border) whose copy is at least this long stays on run_border_rows: on Zen 4
// a 32x32 float32 plane padded by 1 ran 1.00-1.14x the time as narrow rows, 28x28 by 2 0.93-0.94x;
// shorter copies gain (7x7 float32 by 1 0.63-0.65x the time, 32x32 float16 by 5 0.55-0.70x).
constexpr std::int64_t kBorderCopyOverNarrow = 96;

// AVX2's permutes cost more than AVX-512's (where no window of 8 words holds the sources of 32
// output bytes, two vpermd and a blend per 32 bytes from rows of two vectors, four and three
// blends from rows of four), so two more kinds of rows keep their own form there: border rows
// that write fewer than kAvx2BorderElements elements one by one (rows padded by 1 or 2 each side
// took 1.04-1.28x the time as permutes on Zen 3; by 3 each side 0.92-0.96x), and rows that
// fold_repeated_rows copies, from input rows of over two vectors (nearest upsampling of 32x32
// float32 by 2 1.04x the time, of 16x16 float64 by 3 1.20x; of 7x7 to 16x16 float32 0.68-0.75x).
constexpr std::int64_t kAvx2BorderElements = 6;

// Whether a plan that fits narrow rows gains from them, where its rows have their own faster form:
// not a border row whose copy is kBorderCopyOverNarrow or longer, nor with AVX2 the rows above.
bool narrow_rows_pay(const Plan& plan, std::int64_t element) {
  if (plan.border_rows() && plan.runs[static_cast<std::size_t>(plan.border_copy)].length * element >= kBorderCopyOverNarrow)
    return false;
  if (!narrow_rows_avx2(element)) return true;
  if (plan.border_rows() && std::ssize(plan.border) < kAvx2BorderElements) return false;
  return plan.row_copies == 1 || plan.inner_in_size * element <= 64;
}

bool narrow_rows_fit(const Plan& plan, std::int64_t element) {
  const std::int64_t out_bytes = plan.inner_size * element;
  return plan.inner_in_stride == element && plan.inner_out_stride == element &&
         plan.inner_in_size * element <= narrow_in_limit(element) && out_bytes > 0 && out_bytes <= kMaxNarrowRowBytes;
}

// Plan::permute_blocks, for an inner axis whose map `indices` (-1: fill) reads a contiguous input
// row of at most 128 bytes into a contiguous output row, where the ISA has the permutes
// (narrow_rows_fit). A padded, upsampled or nearest-resampled small plane (a 7x7 to 32x32 feature
// map, a reflection wider than its input) otherwise spends most of its time on the per-run work
// of its short runs: on Zen 4, 1 thread, narrow rows took 0.50-0.65x the time of upsampling 7x7
// to 32x32 planes by 2, 0.55-0.61x of nearest resampling 20x20 by 1.5 and 30x30 uint8 by 0.5,
// 0.60-0.65x of padding 7x7 float32 and 64x64 uint8 rows, 0.77-0.84x of reflecting 32x32 by 70.
void narrow_rows_of(Plan& plan, const std::vector<std::int64_t>& indices, std::int64_t element) {
  if (!narrow_rows_fit(plan, element) || std::ssize(indices) != plan.inner_size) return;
  const std::int64_t in_bytes = plan.inner_in_size * element, out_bytes = plan.inner_size * element;
  const std::int64_t per_block = 64 / element;
  const auto block_at = [&](std::int64_t offset) {  // output bytes [offset, offset + 64), clipped to the row
    PermuteBlock block;
    block.offset = offset;
    const std::int64_t first = offset / element, n = std::min(per_block, plan.inner_size - first);
    block.store = byte_prefix(n * element);  // all ones: a whole block
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t src = indices[static_cast<std::size_t>(first + j)];
      if (src < 0) block.fill |= byte_prefix(element) << (j * element);
      const std::uint64_t index = src < 0 ? 0 : static_cast<std::uint64_t>(src);
      std::memcpy(block.index.data() + j * element, &index, std::min(sizeof index, static_cast<std::size_t>(element)));  // little-endian
      for (std::int64_t w = 0; w < element / 4; ++w) {  // the element's 32-bit lanes (AVX2)
        const std::int64_t lane = word_of(static_cast<std::int64_t>(index), element, w);
        block.lanes[static_cast<std::size_t>(word_of(j, element, w))] =
            static_cast<std::int32_t>(static_cast<std::uint32_t>(lane) | (src < 0 ? 1u << 31 : 0u));
      }
    }
    for (int half = 0; half < 2 && in_bytes > 64; ++half)  // (two vectors: their permutes are as cheap)
      block.window[static_cast<std::size_t>(half)] = window_of(block.lanes.data() + 8 * half, in_bytes / 4);
    return block;
  };
  if (out_bytes <= 64) {
    plan.permute_blocks.push_back(block_at(0));
  } else {
    for (std::int64_t offset = 0; offset + 64 <= out_bytes; offset += 64) plan.permute_blocks.push_back(block_at(offset));
    if (out_bytes % 64 != 0) plan.permute_blocks.push_back(block_at(out_bytes - 64));
  }
  plan.narrow_in_bytes = in_bytes;
}

// Everything but the data pointers: what a run does and what describe_separable_gather reports.
Plan make_plan(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps) {
  const int rank = out.sizes.size();
  if (in.sizes.size() != rank || static_cast<int>(maps.size()) != rank)
    fail("separable_gather: input rank ", in.sizes.size(), ", output rank ", rank, ", ", maps.size(), " maps");
  if (element_size(in.dtype) != element_size(out.dtype))
    fail<DTypeError>("separable_gather: input and output differ in element size");

  Plan plan;
  // Axes whose map is the identity can be merged with their neighbours; a size-1 output axis
  // reads one fixed input index, folded into the input base address.
  std::uint32_t pinned = 0;
  bool all_fill = false;
  for (int a = 0; a < rank; ++a) {
    const AxisMap& map = maps[a];
    if (map.is_identity()) {
      if (in.sizes[a] != out.sizes[a]) fail("separable_gather: identity map on axis ", a, " of different sizes");
      continue;
    }
    if (map.size() != out.sizes[a])
      fail("separable_gather: map ", a, " has ", map.size(), " entries for output size ", out.sizes[a]);
    for (const MapRun& r : map.runs()) {
      const std::int64_t last = r.src + (r.length - 1) * r.step;
      if (r.src >= 0 && (r.src >= in.sizes[a] || last < 0 || last >= in.sizes[a]))
        fail("separable_gather: map ", a, " reads indices ", r.src, "..", last, " of ", in.sizes[a]);
    }
    const MapRun& first = map.runs().front();
    if (out.sizes[a] == 1) {
      if (first.src < 0) all_fill = true;
      else plan.in_offset += first.src * in.byte_strides[a];
      continue;
    }
    const bool identity = map.runs().size() == 1 && first.src == 0 && first.step == 1 && in.sizes[a] == out.sizes[a];
    if (!identity) pinned |= 1u << a;
  }
  plan.all_fill = all_fill;
  plan.any_pinned = pinned != 0;
  StridedLayout<2> layout(out.sizes, {out.byte_strides, in.byte_strides});
  layout.sort_by_stride(0);  // write the output in memory order
  layout.coalesce(pinned);
  const int r = layout.rank();
  std::vector<std::int64_t> inner_indices;  // the inner axis' map, when it is not the identity
  if (r > 0) {
    const int inner = r - 1;
    plan.inner_size = layout.size(inner);
    plan.inner_out_stride = layout.stride(0, inner);
    plan.inner_in_stride = layout.stride(1, inner);
    const bool inner_pinned = (pinned >> layout.source_axis(inner)) & 1u;
    std::vector<std::int64_t> gather_indices;
    plan.runs = compile_runs(inner_pinned ? maps[layout.source_axis(inner)] : AxisMap{}, plan.inner_size,
                             gather_indices);
    for (std::int64_t s : gather_indices) plan.gather_offsets.push_back(s * plan.inner_in_stride);
    const auto elem = static_cast<std::int64_t>(element_size(in.dtype));
    plan.inner_in_size = inner_pinned ? in.sizes[layout.source_axis(inner)] : plan.inner_size;
    if (avx2_enabled() && (elem == 4 || elem == 8) && plan.inner_in_stride == elem &&
        plan.inner_in_size < std::numeric_limits<std::int32_t>::max()) {
      plan.gather_index.assign(gather_indices.begin(), gather_indices.end());
      find_windows(plan, elem);
    }
    if (inner_pinned && narrow_rows_fit(plan, elem)) inner_indices = maps[layout.source_axis(inner)].indices();
  } else {
    plan.runs = {Run{RunKind::Copy, 0, 1, 0, 1}};
  }
  plan.outer_rank = std::max(r - 1, 0);
  for (int d = 0; d < plan.outer_rank; ++d) {
    plan.outer_sizes.push_back(layout.size(d));
    plan.out_stride[d] = layout.stride(0, d);
    plan.in_stride[d] = layout.stride(1, d);
    if ((pinned >> layout.source_axis(d)) & 1u) {
      for (std::int64_t s : maps[layout.source_axis(d)].indices())
        plan.in_offsets[d].push_back(s < 0 ? kFillOffset : s * plan.in_stride[d]);
    }
  }
  if (all_fill) plan.runs = {Run{RunKind::Fill, 0, plan.inner_size, -1, 0}};
  fold_repeated_rows(plan);
  const int row_dim = plan.outer_rank - 1;
  plan.packed_rows = row_dim >= 0 && plan.row_copies == 1 && plan.inner_out_stride * plan.inner_size == plan.out_stride[row_dim];
  equal_rows_back(plan);
  const auto element = static_cast<std::int64_t>(element_size(out.dtype));
  plan.stream_rows = stream_staged(in.element_count() * element, out.element_count() * element) && stream_rows_of(plan, element);
  plan.stream = !plan.stream_rows && stream_output(out.element_count() * element);
  if (!all_fill) find_border(plan, element);
  // Narrow rows write with ordinary stores: not for outputs that are streamed.
  if (!all_fill && !plan.stream && !plan.stream_rows && narrow_rows_pay(plan, element))
    narrow_rows_of(plan, inner_indices, element);
  if (!plan.permute_blocks.empty()) plan.border_copy = -1;  // narrow rows, not border rows
  // Where AVX-512 runs in 256-bit halves (Zen 4), narrow rows permute a row from its input in
  // the time a copy from an equal row takes to read it: they write every row so (1 thread:
  // 1x64x32x32 float32 reflected to 147x147 took 0.77x the time). Full-width AVX-512 cores copy
  // faster (the 16-core Xeon, 1-16 threads, alternating processes, ten pairings: that reflection
  // 0.83-1.01x the time with copies, median 0.93; its wrap 0.70-0.91x), and so do AVX2's
  // permutes (Zen 4: 0.83x).
  if (!plan.permute_blocks.empty() && narrow_rows_avx512(element) && platform::cpu_features().avx512_half_rate)
    plan.rows_back.clear();
  for (int d = plan.outer_rank - 1; d >= 0; --d)
    plan.row_span[d] = d + 1 < plan.outer_rank ? plan.row_span[d + 1] * plan.outer_sizes[d + 1] : 1;

  // Tasks are (row, column block); rows are split into column blocks only when there are too
  // few rows to keep every thread busy.
  const std::int64_t elem = static_cast<std::int64_t>(element_size(out.dtype));
  const std::int64_t rows = plan.rows = plan.outer_sizes.product();
  const std::int64_t row_bytes = plan.inner_size * elem;
  plan.columns_per_block = plan.inner_size;
  if (rows < 4 * num_threads() && row_bytes > kMaxColumnBlockBytes) {
    plan.columns_per_block = kMaxColumnBlockBytes / elem;
    plan.column_blocks = (plan.inner_size + plan.columns_per_block - 1) / plan.columns_per_block;
  }
  // (Short rows only, where the calls per row cost as much as their data: on the 16-core Xeon,
  // 1x64x128x128 float32 (512-byte input rows) upsampled 2x2 took 1.1-1.3x the time at 8 and 16
  // threads so, 1x16x8x64x64 (256 bytes) 0.80-0.96x; on Zen 4 0.96-1.02x and 0.67-0.82x.)
  if (plan.runs.size() == 1 && plan.runs[0].kind == RunKind::Repeat && plan.column_blocks == 1 && plan.permute_blocks.empty() &&
      plan.runs[0].groups * elem < kRepeatRowsMaxInBytes) {
    const Run& run = plan.runs[0];
    if (run.out_begin == 0 && run.src == 0 && run.length == plan.inner_size && run.step * run.groups == run.length &&
        run.step >= 2 && run.step <= kMaxRepeatVbmi && plan.inner_out_stride == elem && plan.inner_in_stride == elem &&
        avx512_vbmi_enabled())
      plan.repeat_rows = run.step;
  }
  // (A row of a fold_repeated_rows plan writes row_copies output rows.)
  const std::int64_t task_bytes = plan.columns_per_block * elem * plan.row_copies;
  plan.grain = std::max<std::int64_t>(1, kBytesPerTask / task_bytes);
  return plan;
}

// make_plan's plan, taken from this thread's last few calls when one had the same shapes,
// strides, element size, maps and thread count: building it walks every map (a 360x640 uint8
// upsampling by 3 spent 9 us of a 2-core Xeon's time on it, where 16 threads of a 16-core Xeon
// moved its 6 MB in 50 us).
std::shared_ptr<const Plan> plan_for(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps) {
  struct Key {
    Dims in_sizes, in_strides, out_sizes, out_strides;
    std::size_t in_element, out_element;
    std::vector<AxisMap> maps;
    int threads;
  };
  thread_local RecentValues<Key, Plan> recent;
  const std::size_t in_element = element_size(in.dtype), out_element = element_size(out.dtype);
  const int threads = num_threads();
  std::int64_t positions = 0;
  for (const AxisMap& map : maps) positions += map.size();
  return recent.get(
      [&](const Key& k) {
        return k.threads == threads && k.in_element == in_element && k.out_element == out_element &&
               k.in_sizes == in.sizes && k.out_sizes == out.sizes && k.in_strides == in.byte_strides &&
               k.out_strides == out.byte_strides && k.maps == maps;
      },
      [&] { return std::make_shared<const Plan>(make_plan(in, out, maps)); }, positions,
      [&] { return Key{in.sizes, in.byte_strides, out.sizes, out.byte_strides, in_element, out_element, maps, threads}; });
}

}  // namespace

KernelPlan describe_separable_gather(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps) {
  const std::shared_ptr<const Plan> shared = plan_for(in, out, maps);  // held: a plan too large to keep dies with it
  const Plan& plan = *shared;
  KernelPlan k = KernelPlan::of(
      plan.all_fill ? "fill" : plan.any_pinned ? "gather" : "copy",
      plan.all_fill     ? "a size-1 output axis lies in the padding: every element is the fill value"
      : plan.any_pinned ? "each output row as runs along its inner axis (copies, mirrors, fills, broadcasts, repeats, gathers)"
                        : "every axis maps onto itself: a strided copy, row by row",
      plan.permute_blocks.empty() || narrow_rows_avx2(element_size(out.dtype)) ? kernel_isa(KernelKind::Avx2) : "avx512",
      plan.rows * plan.column_blocks);
  k.tiles = {{"rows", plan.rows}, {"row", plan.inner_size}};
  if (plan.column_blocks > 1) {
    k.tile("column_blocks", plan.column_blocks);
    k.tile("columns", plan.columns_per_block);
  }
  if (plan.row_copies > 1) {
    k.tile("row_copies", plan.row_copies);
    k.reason += "; the rows repeat " + std::to_string(plan.row_copies) + "x: each is gathered once and " +
                (plan.repeat_rows > 0 ? "copied, a batch of rows per call" : "copied");
  }
  if (plan.any_pinned && !plan.all_fill) {
    constexpr const char* kRunNames[] = {"fill_runs", "copy_runs", "broadcast_runs", "repeat_runs", "gather_runs"};
    std::int64_t counts[std::size(kRunNames)] = {}, mirrors = 0;
    for (const Run& run : plan.runs) {
      ++counts[static_cast<int>(run.kind)];
      if (run.kind == RunKind::Copy && run.step < 0) ++mirrors;
    }
    counts[static_cast<int>(RunKind::Copy)] -= mirrors;
    for (std::size_t i = 0; i < std::size(kRunNames); ++i) {
      if (counts[i] > 0) k.tile(kRunNames[i], counts[i]);
      if (i == static_cast<std::size_t>(RunKind::Copy) && mirrors > 0) k.tile("mirror_runs", mirrors);
    }
    if (plan.border_rows()) {
      k.tile("border_elements", std::ssize(plan.border));
      if (!plan.border_runs.empty()) k.tile("border_runs", std::ssize(plan.border_runs));
      k.reason += "; rows of one copy and " + std::to_string(plan.border.size()) + " other elements";
      if (!plan.border_runs.empty()) k.reason += " and " + std::to_string(plan.border_runs.size()) + " fills or mirrors";
      const bool framed = plan.border_runs.empty() && RowAxis(plan, element_size(in.dtype)).prefetch_bytes == 0;
      k.reason += framed ? ", a run of rows per call" : ", one by one";
    } else if (!plan.permute_blocks.empty()) {
      k.tile("permutes", std::ssize(plan.permute_blocks));
      k.reason += narrow_rows_avx2(element_size(out.dtype))
                      ? "; each input row (at most 128 bytes) loaded whole, every 32 output bytes a permute of 8 words of it (avx2)"
                      : "; each input row (at most 128 bytes) loaded whole, every 64 output bytes one permute of it";
    } else if (counts[static_cast<int>(RunKind::Gather)] > 0 && !plan.gather_index.empty()) {
      k.reason += "; gathers permute 32-byte windows (avx2)";
    }
    if (counts[static_cast<int>(RunKind::Repeat)] > 0 && avx512_vbmi_enabled() && plan.permute_blocks.empty())
      k.reason += "; repeats of 2 to 8 as one byte permute per 64 output bytes (avx512 vbmi)" +
                  std::string(plan.repeat_rows > 0 && plan.row_copies == 1 ? ", a batch of rows per call" : "");
  }
  if (plan.stream_rows) {
    k.tile("streamed", 1);
    k.reason += "; rows go through a buffer in L1 and out with streaming stores, whole lines (the output is too large "
                "for the caches, and several times the input)";
  }
  k.tile("grain", plan.grain);
  return k;
}

void separable_gather(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps,
                      Scalar fill_value) {
  if (element_size(fill_value.dtype) != element_size(out.dtype))
    fail<DTypeError>("separable_gather: input, output and fill value differ in element size");
  const std::shared_ptr<const Plan> shared = plan_for(in, out, maps);
  const Plan& plan = *shared;
  auto* out_base = static_cast<std::byte*>(out.data);
  const std::byte* in_base = static_cast<const std::byte*>(in.data) + plan.in_offset;
  const std::int64_t rows = plan.rows, grain = plan.grain;
  visit_width(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value;
    std::memcpy(&value, &fill_value.bits, sizeof(T));
    parallel_for(0, rows * plan.column_blocks, grain,
                 [&](std::int64_t begin, std::int64_t end) { run_rows<T>(plan, out_base, in_base, value, begin, end); });
  });
}

}  // namespace dmlops
